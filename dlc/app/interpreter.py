"""Interpreter settings of a long-running scheduler process (``dlc scheduler``, ``dlc local``).

The scheduler runs one CPU-bound offer round at a time (a few hundred ms of Python at openb
scale) beside API threads whose requests give the GIL up and take it back several times
each: every SQLite statement and commit, every contended lock, every hand-off from the
server's event loop to a worker thread. A thread that wants the GIL back while the round
runs waits for CPython's switch interval (5 ms by default) before the round is made to let
it go, and only one such forced hand-off happens per interval; so at 500 submits a second a
round leaves submits queued behind each other for most of its length (issue 26's even-rate
submits, ``bench/core_scale.py``). A shorter interval bounds each wait; it costs only while
threads contend, a context switch per interval.

The cyclic collector runs with larger thresholds for the same process: a round at openb scale
allocates a few hundred thousand objects (parsed offers, slots, TaskInfos), which at CPython's
default (a young collection every 700 net allocations, a middle one every 10 young) is about 60
young and 6 middle collections a round, 9-13 ms of a steady round, that find nothing: the
scheduler's objects form no cycles, and its long-lived state is frozen out of the collector
once loaded (``gc.freeze`` in :mod:`dlc.app.service`). A middle collection still runs every
20 young ones and a full one after 10 middle ones (when CPython's own rule allows), so cyclic
garbage (tracebacks, event-loop callbacks) is still freed, later. At these thresholds a steady
round at openb scale runs no collection itself (``round_gc_ms`` of ``bench/core_scale.py``): it
frees the previous round's state about as fast as it allocates its own, and each free lowers
the count, so collections run where the offers are decoded instead. Higher ones (50,000) only
move them into the rounds, fewer and longer (docs/scheduler.md, "Fifteenth pass").
"""

from __future__ import annotations

import gc
import sys

#: the switch interval DLC's scheduler runs with (s); ``--gil-switch-interval``
DEFAULT_SWITCH_INTERVAL_S = 0.0005
#: the bounds ``--gil-switch-interval`` takes: below 0.1 ms the switches themselves cost
#: more than the waits they save; above 0.1 s a round would starve every request
MIN_SWITCH_INTERVAL_S = 0.0001
MAX_SWITCH_INTERVAL_S = 0.1


#: the collector's thresholds DLC's scheduler runs with (young, middle, full); CPython's
#: are (700, 10, 10)
GC_THRESHOLDS = (10_000, 20, 10)


def tune_interpreter(switch_interval_s: float = DEFAULT_SWITCH_INTERVAL_S) -> float:
    """Set this process's GIL switch interval and the collector's thresholds
    (:data:`GC_THRESHOLDS`); returns the switch interval it replaces.

    Raises:
        ValueError: ``switch_interval_s`` is outside the bounds above.
    """
    if not MIN_SWITCH_INTERVAL_S <= switch_interval_s <= MAX_SWITCH_INTERVAL_S:
        raise ValueError(
            f"switch interval {switch_interval_s} s is outside "
            f"{MIN_SWITCH_INTERVAL_S}-{MAX_SWITCH_INTERVAL_S} s"
        )
    before = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval_s)
    gc.set_threshold(*GC_THRESHOLDS)
    return before
