"""What each user holds now, counted as their per-user limits count it.

The admission planner (:func:`~dlc.scheduler.tenancy.quotas.plan`) counts the same four
amounts per user at the start of a round before it admits a queued job against the user's
:class:`~dlc.scheduler.tenancy.policy.UserLimits`; this is the read-only side of it, for
views (``GET /v1/quota`` lists it beside each user's limits, the dashboard shows "held /
cap").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.inventory import DEFAULT_OVERHEADS, Overheads
from dlc.scheduler.tenancy.policy import Policy
from dlc.scheduler.tenancy.quotas import held_spec, job_gpus, on_agents
from dlc.scheduler.tenancy.share_charge import GpuSizes


@dataclass(frozen=True)
class UserHeld:
    """One user's running jobs, GPUs, CPUs and memory held, interactive environments running.

    Attributes:
        running: jobs holding resources (staging, running, or stopping after preemption).
        gpus: GPUs held, shares counted by their charged part (``max_gpus``).
        cpus: CPUs held on the agents over all nodes, GPU jobs included, each task's executor
            too (``max_cpus``).
        environments: interactive environments among ``running`` (``max_interactive``).
        mem_mib: memory (MiB) held on the agents over all nodes, each task's executor too
            (``max_mem_mib``).
    """

    running: int = 0
    gpus: float = 0.0
    cpus: float = 0.0
    environments: int = 0
    mem_mib: float = 0.0

    def plus(self, other: UserHeld) -> UserHeld:
        """Both amounts added."""
        return UserHeld(self.running + other.running, self.gpus + other.gpus,
                        self.cpus + other.cpus, self.environments + other.environments,
                        self.mem_mib + other.mem_mib)  # fmt: skip


def held_by_user(
    policy: Policy,
    active: Iterable[Job],
    sizes: GpuSizes | int | None = None,
    overheads: Overheads = DEFAULT_OVERHEADS,
) -> dict[str, UserHeld]:
    """Each user of ``active`` (jobs that may hold resources) -> what they hold (``overheads``:
    each task's executor, counted in CPUs and memory as admission counts it)."""
    out: dict[str, UserHeld] = {}
    for job in active:
        cpus, mem = on_agents(held_spec(job), overheads)
        one = UserHeld(1, job_gpus(policy, job, sizes), cpus, int(job.spec.interactive), mem)
        out[job.user] = out.get(job.user, UserHeld()).plus(one)
    # sums of tenths are not exact in binary: 16.299999999999997 reads as 16.3
    return {user: replace(held, cpus=round(held.cpus, 6), mem_mib=round(held.mem_mib, 6))
            for user, held in out.items()}  # fmt: skip
