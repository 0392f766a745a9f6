"""``dlc jobs`` (implemented with its siblings in :mod:`dlc.cli.submit_cmd`)."""

from dlc.cli.submit_cmd import jobs as command

__all__ = ["command"]
