"""Interpreter settings of the scheduler process (set once, at start).

The offer round is CPU-bound Python for hundreds of milliseconds at openb scale; submits,
API requests and status updates run on other threads, and each of their SQLite and socket
calls lets the GIL go and must take it back. With CPython's default switch interval (5 ms)
every such take-back waits up to 5 ms for the round thread to yield: a submit of a dozen
such calls waited tens of milliseconds per round it overlapped, and at 500 submits/s the
backlog made the even-rate submit p99 several hundred milliseconds (issue 26; the figures
are in docs/scheduler.md). A 1 ms interval bounds each wait at 1 ms for a few percent of
the round's CPU.
"""

from __future__ import annotations

import sys

#: the GIL switch interval of the scheduler process, seconds (CPython's default: 0.005)
SWITCH_INTERVAL_S = 0.001


def tune_for_scheduler() -> None:
    """Set :data:`SWITCH_INTERVAL_S` (the scheduler service calls this at start)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
