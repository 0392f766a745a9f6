"""Which running jobs to stop so that a group gets its guarantee back (reclaim), or a
higher-priority job of the same group may run.

Victims are taken lowest priority first, then youngest first (the latest *started*: the
least work lost), and only as many as cover the need: a plan that cannot free enough stops
nothing. A job is stopped whole: a multi-node job frees (and is charged) all its nodes'
resources, and every one of its tasks is killed, never some of them. A victim gets
a kill (the executor sends SIGTERM, waits its grace period, then SIGKILL) and is queued
again as ``preempted`` without using a retry (:mod:`dlc.scheduler.core`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dlc.scheduler.jobs import Job
from dlc.scheduler.tenancy import Resources


@dataclass(frozen=True)
class Preemption:
    """One job to stop and why (shown on the job and in its history)."""

    job_id: str
    reason: str


def victim_order(
    jobs: Iterable[Job], started_of: Callable[[Job], float] | None = None
) -> list[Job]:
    """Lowest priority first, then youngest (latest started) first.

    Args:
        started_of: when a job's current run started (default: its submission time, for
            callers that know no start times).
    """
    started = started_of or (lambda j: j.submitted_at)
    return sorted(jobs, key=lambda j: (j.spec.priority, -started(j), j.job_id))


def pick_victims(
    candidates: Iterable[Job],
    need: Resources,
    demand_of: Callable[[Job], Resources],
    eligible: Callable[[Job], bool] = lambda job: True,
    on_pick: Callable[[Job], None] = lambda job: None,
    started_of: Callable[[Job], float] | None = None,
) -> list[Job] | None:
    """Victims (in :func:`victim_order`) whose demands cover ``need``, or ``None``.

    Args:
        candidates: running jobs that may be stopped.
        need: what must be freed (amounts <= 0 need nothing).
        demand_of: what a job holds (over all its nodes: a gang is taken whole).
        eligible: re-checked before each pick (e.g. "its group still borrows").
        on_pick: told of each pick (so ``eligible`` sees the updated accounting).
        started_of: start times for :func:`victim_order`.
    """
    freed = Resources()
    picked: list[Job] = []
    for job in victim_order(candidates, started_of):
        if need.fits(freed):
            break
        if not eligible(job):
            continue
        picked.append(job)
        freed = freed + demand_of(job)
        on_pick(job)
    return picked if need.fits(freed) else None
