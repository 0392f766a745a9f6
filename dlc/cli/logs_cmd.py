"""``dlc logs`` (implemented with its siblings in :mod:`dlc.cli.submit_cmd`)."""

from dlc.cli.submit_cmd import logs as command

__all__ = ["command"]
