"""``dlc scheduler``'s caps on ``dlc shell``/``dlc exec`` sessions (docs/environments.md)."""

from __future__ import annotations

import functools

import click

from dlc.api.shell_relay import SessionLimits

_DEFAULTS = SessionLimits()


def session_options(func):
    """Add ``--max-sessions-per-user``, ``--max-sessions``, ``--session-idle-timeout`` and
    ``--session-max-time``; the command receives them as one ``sessions`` argument."""

    @functools.wraps(func)
    def wrapper(*args, max_sessions_per_user, max_sessions, session_idle_timeout,
                session_max_time, **kwargs):  # fmt: skip
        limits = SessionLimits(max_sessions_per_user, max_sessions, session_idle_timeout,
                               session_max_time)  # fmt: skip
        return func(*args, sessions=limits, **kwargs)

    options = [
        click.option("--max-sessions-per-user", type=click.IntRange(1), metavar="N",
                     default=_DEFAULTS.per_user, show_default=True,
                     help="dlc shell/exec sessions one user may have open at once."),
        click.option("--max-sessions", type=click.IntRange(1), metavar="N",
                     default=_DEFAULTS.total, show_default=True,
                     help="dlc shell/exec sessions open at once, all users together."),
        click.option("--session-idle-timeout", type=click.FloatRange(1), metavar="S",
                     default=_DEFAULTS.idle_s, show_default=True,
                     help="Close a dlc shell with no input or output for S seconds."),
        click.option("--session-max-time", type=click.FloatRange(1), metavar="S",
                     default=_DEFAULTS.max_s, show_default=True,
                     help="Close a dlc shell (end a dlc exec's wait) after S seconds."),
    ]  # fmt: skip
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper
