"""What a job holds, and what each user holds as their per-user limits count it.

One counting rule for the three places that count a user's holdings: the admission planner
(:func:`~dlc.scheduler.tenancy.quotas.plan`, which adds each job it admits in the round), the
views (:func:`~dlc.scheduler.tenancy.user_holdings.held_by_user`: ``GET /v1/quota``, ``dlc
quota``, the dashboard) and elastic growth (``core/elastic.py``, which adds each member it
grows). All of them count with one :class:`UserTally`, so what a user is shown to hold is what
admission held their job against.

This module sits under :mod:`~dlc.scheduler.tenancy.quotas` (which imports it): it knows jobs
and overheads, not policies, pools or GPU sizes; what a job's GPUs count (a share by the GPU it
is charged against) is the caller's ``gpus_of``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.inventory import DEFAULT_OVERHEADS, Overheads

#: what a user's CPU and memory figures say they count (:func:`on_agents`)
WITH_EXECUTORS = " (each task's executor included)"


def held_spec(job: Job) -> JobSpec:
    """The spec of what ``job`` holds: an elastic gang's extra members count too."""
    spec = job.spec
    if spec.nodes_max is None or len(job.tasks) <= spec.nodes:
        return spec
    return replace(spec, nodes=len(job.tasks))


def on_agents(spec: JobSpec, overheads: Overheads = DEFAULT_OVERHEADS) -> tuple[float, float]:
    """``(CPUs, memory MiB)`` a job of ``spec`` holds on the agents over all its nodes (a running
    job's: of its :func:`held_spec`, an elastic gang's extra members too): its ask plus each
    task's executor (``overheads``: what the placement adds to every task, a gang's
    every node, an elastic gang's every member). What a user's ``max_cpus`` and
    ``max_mem_mib`` count: counting the ask alone, 800 jobs of 0.01 CPU were 8 CPUs to the limit
    and held 88 (red-team finding 57). Group quotas count the ask
    (:func:`~dlc.scheduler.tenancy.quotas.demand`)."""
    return ((spec.cpus + overheads.cpus) * spec.nodes,
            float((spec.mem_mib + overheads.mem_mib) * spec.nodes))  # fmt: skip


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


class UserTally:
    """Per user, what their jobs hold, added up job by job (mutable: a round adds what it
    admits or grows).

    One dict per amount, not a :class:`UserHeld` per user: the planner adds every active job
    and every admitted one each round (6,000 and more at openb scale) and reads one amount
    per limit check; a dict update per amount makes no object per job.

    Args:
        gpus_of: the GPUs a job counts (its caller's charge of a share:
            :func:`~dlc.scheduler.tenancy.quotas.job_gpus`).
        overheads: each task's executor, counted with the ask in CPUs and memory
            (:func:`on_agents`).
    """

    __slots__ = ("gpus_of", "overheads", "running", "gpus", "cpus", "mem_mib", "environments")

    def __init__(self, gpus_of: Callable[[Job], float], overheads: Overheads) -> None:
        self.gpus_of = gpus_of
        self.overheads = overheads
        self.running: dict[str, int] = {}
        self.gpus: dict[str, float] = {}
        self.cpus: dict[str, float] = {}
        self.mem_mib: dict[str, float] = {}
        self.environments: dict[str, int] = {}

    def add(self, job: Job) -> None:
        """Count ``job`` (one running job of its user, all it holds)."""
        user = job.user
        cpus, mem = on_agents(held_spec(job), self.overheads)
        self.running[user] = self.running.get(user, 0) + 1
        self.environments[user] = self.environments.get(user, 0) + job.spec.interactive
        self.gpus[user] = self.gpus.get(user, 0.0) + self.gpus_of(job)
        self.cpus[user] = self.cpus.get(user, 0.0) + cpus
        self.mem_mib[user] = self.mem_mib.get(user, 0.0) + mem

    def add_amounts(self, user: str, gpus: float, cpus: float, mem_mib: float) -> None:
        """Count more of ``user``'s holdings without another job (an elastic gang's new
        member)."""
        self.gpus[user] = self.gpus.get(user, 0.0) + gpus
        self.cpus[user] = self.cpus.get(user, 0.0) + cpus
        self.mem_mib[user] = self.mem_mib.get(user, 0.0) + mem_mib

    def held(self, user: str) -> UserHeld:
        """What ``user`` holds (nothing: all zero)."""
        return UserHeld(self.running.get(user, 0), self.gpus.get(user, 0.0),
                        self.cpus.get(user, 0.0), self.environments.get(user, 0),
                        self.mem_mib.get(user, 0.0))  # fmt: skip

    def users(self) -> list[str]:
        """Every user counted, in the order first counted."""
        return list(self.running | self.gpus)
