"""What each user holds now, counted as their per-user limits count it.

The read-only side of admission, for views (``GET /v1/quota`` lists it beside each user's
limits, the dashboard shows "held / cap"): the admission planner
(:func:`~dlc.scheduler.tenancy.quotas.plan`) counts the active jobs with the same
:class:`~dlc.scheduler.tenancy.held.UserTally` at the start of a round before it admits a
queued job against the user's :class:`~dlc.scheduler.tenancy.policy.UserLimits`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.inventory import DEFAULT_OVERHEADS, Overheads
from dlc.scheduler.tenancy.held import UserHeld, UserTally
from dlc.scheduler.tenancy.policy import Policy
from dlc.scheduler.tenancy.quotas import job_gpus
from dlc.scheduler.tenancy.share_charge import GpuSizes

__all__ = ["UserHeld", "held_by_user"]


def held_by_user(
    policy: Policy,
    active: Iterable[Job],
    sizes: GpuSizes | int | None = None,
    overheads: Overheads = DEFAULT_OVERHEADS,
) -> dict[str, UserHeld]:
    """Each user of ``active`` (jobs that may hold resources) -> what they hold (``overheads``:
    each task's executor, counted in CPUs and memory as admission counts it)."""
    tally = UserTally(lambda job: job_gpus(policy, job, sizes), overheads)
    for job in active:
        tally.add(job)
    # sums of tenths are not exact in binary: 16.299999999999997 reads as 16.3
    return {user: replace(held, cpus=round(held.cpus, 6), mem_mib=round(held.mem_mib, 6))
            for user in tally.users() for held in [tally.held(user)]}  # fmt: skip
