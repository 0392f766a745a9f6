"""Which running jobs to stop so that a group gets its guarantee back (reclaim), or a
higher-priority job of the same group may run.

Victims are taken lowest priority first, then youngest first (the latest *started*: the
least work lost), and only as many as cover the need: a plan that cannot free enough stops
nothing, and a job that frees none of what is still short is passed over (a CPU-only job holds
no GPU: stopping it never frees GPUs). A job is stopped whole: a multi-node job frees (and is
charged) all its nodes' resources, and every one of its tasks is killed, never some of them.
A victim gets a kill (the executor sends SIGTERM, waits its grace period, then SIGKILL) and is
queued again as ``preempted`` without using a retry (:mod:`dlc.scheduler.core.facade`).

Protected runtime (issue 28, as KAI's minimum runtime and preemption delay): per priority
class, a job may not be chosen before it ran ``min_runtime_s`` (:class:`Protection`), and a
chosen one is evicted ``evict_delay_s`` after the decision; its reason names both. With
fair share on, a group that used more over time (``usage / weight``) is reclaimed first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dlc.errors import TenancyError
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.jobs.spec_fields import PRIORITY_CLASSES
from dlc.scheduler.tenancy.policy import Resources, fmt_span

#: how a reason reads while the eviction waits for its delay; ``EVICTED`` once done
TO_BE_EVICTED = "to be evicted"
EVICTED = "evicted"


@dataclass(frozen=True)
class Protection:
    """A priority class's protected runtime and eviction delay, seconds."""

    min_runtime_s: float = 0.0
    evict_delay_s: float = 0.0


def class_of(job: Job) -> str:
    """The job's priority class: the one it named, else the highest class whose number its
    priority reaches (``low`` below them all)."""
    if job.spec.priority_class:
        return job.spec.priority_class
    reached = [(n, c) for c, n in PRIORITY_CLASSES.items() if n <= job.spec.priority]
    return max(reached)[1] if reached else min((n, c) for c, n in PRIORITY_CLASSES.items())[1]


@dataclass(frozen=True)
class ProtectionRules:
    """Per priority class :class:`Protection` (a class not listed: none, as before)."""

    by_class: Mapping[str, Protection] = field(default_factory=dict)

    def of(self, job: Job) -> Protection:
        """The protection of ``job``'s class."""
        return self.by_class.get(class_of(job), Protection())

    def protected(self, job: Job, ran_s: float) -> bool:
        """Whether a job that ran ``ran_s`` seconds may not be chosen yet."""
        return ran_s < self.of(job).min_runtime_s


def parse_protection(items: Iterable[str]) -> ProtectionRules:
    """``["normal=10m:30s", "low=0:5s"]`` (``CLASS=MIN_RUNTIME[:EVICT_DELAY]``) -> rules."""
    from dlc.scheduler.tenancy.fair_share import parse_span

    out: dict[str, Protection] = {}
    for item in items:
        name, sep, spans = str(item).partition("=")
        if not sep or name not in PRIORITY_CLASSES:
            known = ", ".join(PRIORITY_CLASSES)
            raise TenancyError(
                "protect", f"{str(item)[:40]!r}: write CLASS=MIN_RUNTIME[:DELAY] (CLASS: {known})"
            )
        runtime, _, delay = spans.partition(":")
        out[name] = Protection(parse_span(runtime, "protect"), parse_span(delay or "0", "protect"))
    return ProtectionRules(out)


@dataclass(frozen=True)
class Preemption:
    """One job to stop and why (shown on the job and in its history).

    Attributes:
        reason: the reason as it reads once the job is evicted.
        delay_s: how long after the decision the eviction waits (its class's delay).
    """

    job_id: str
    reason: str
    delay_s: float = 0.0

    @property
    def pending_reason(self) -> str:
        """The reason while the eviction waits for its delay."""
        return self.reason.replace(f", {EVICTED} ", f", {TO_BE_EVICTED} ", 1)


def protected_reason(base: str, ran_s: float, protection: Protection) -> str:
    """``base`` with the victim's runtime, its protection and its eviction delay named
    (unchanged when its class has neither)."""
    if not protection.min_runtime_s and not protection.evict_delay_s:
        return base
    return (f"{base} after {_about(ran_s)} (protected for "
            f"{fmt_span(protection.min_runtime_s)}, {EVICTED} "
            f"{fmt_span(protection.evict_delay_s)} after the decision)")  # fmt: skip


def _about(seconds: float) -> str:
    """A run time as people say it: ``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{max(0, round(seconds))} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600, 1):g} h"


def victim_order(
    jobs: Iterable[Job],
    started_of: Callable[[Job], float] | None = None,
    ratio_of: Callable[[Job], float] | None = None,
) -> list[Job]:
    """Lowest priority first, then (with fair share) the group that used most over time
    for its weight, then youngest (latest started) first.

    Args:
        started_of: when a job's current run started (default: its submission time, for
            callers that know no start times).
        ratio_of: the job's group's decayed usage over its weight (default: none).
    """
    started = started_of or (lambda j: j.submitted_at)
    ratio = ratio_of or (lambda j: 0.0)
    return sorted(jobs, key=lambda j: (j.spec.priority, -ratio(j), -started(j), j.job_id))


def pick_victims(
    candidates: Iterable[Job],
    need: Resources,
    demand_of: Callable[[Job], Resources],
    eligible: Callable[[Job], bool] = lambda job: True,
    on_pick: Callable[[Job], None] = lambda job: None,
    started_of: Callable[[Job], float] | None = None,
    ratio_of: Callable[[Job], float] | None = None,
) -> list[Job] | None:
    """Victims (in :func:`victim_order`) whose demands cover ``need``, or ``None``.

    Args:
        candidates: running jobs that may be stopped.
        need: what must be freed (amounts <= 0 need nothing).
        demand_of: what a job holds (over all its nodes: a gang is taken whole).
        eligible: re-checked before each pick (e.g. "its group still borrows").
        on_pick: told of each pick (so ``eligible`` sees the updated accounting).
        started_of, ratio_of: for :func:`victim_order`.
    """
    freed = Resources()
    picked: list[Job] = []
    for job in victim_order(candidates, started_of, ratio_of):
        if need.fits(freed):
            break
        if not eligible(job):
            continue
        held = demand_of(job)
        if not _frees_any(held, need.over(freed)):
            continue  # stopping it frees none of what is short (a CPU-only job, for GPUs)
        picked.append(job)
        freed = freed + held
        on_pick(job)
    return picked if need.fits(freed) else None


def _frees_any(held: Resources, short: Resources) -> bool:
    """Whether a job holding ``held`` gives back some of a resource still ``short``."""
    return (
        (short.gpus > 0 and held.gpus > 0)
        or (short.cpus > 0 and held.cpus > 0)
        or (short.mem_mib > 0 and held.mem_mib > 0)
    )


@dataclass(frozen=True, kw_only=True)
class VictimChoice:
    """What :meth:`VictimChooser.choose` decided for one need.

    Attributes:
        victims: the running jobs to stop, in the order picked (empty: none covers the need,
            and nothing is stopped).
        preemptions: each victim's :class:`Preemption` (its reason and eviction delay), for
            the core to carry out.
        shielded: whether some candidates were left out for their protected runtime.
    """

    victims: tuple[Job, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    shielded: bool = False


@dataclass(frozen=True, kw_only=True)
class VictimChooser:
    """Whom to stop for a need the quota planner found (:func:`~.quotas.plan` makes one per
    plan and says *when* and *how much*; this says *who* and *why*).

    Attributes:
        demand_of: what a job holds, as the planner charges it.
        started_of: when a job's current run started (victims: youngest first).
        now: the plan's time (``None``: no tenure, so no protection and no runtimes).
        protection: per priority class, the protected runtime and eviction delay.
    """

    demand_of: Callable[[Job], Resources]
    started_of: Callable[[Job], float]
    now: float | None = None
    protection: ProtectionRules = ProtectionRules()

    def choose(
        self,
        candidates: list[Job],
        need: Resources,
        reason: Callable[[Job], str],
        eligible: Callable[[Job], bool] = lambda job: True,
        on_pick: Callable[[Job], None] = lambda job: None,
        ratio_of: Callable[[Job], float] | None = None,
    ) -> VictimChoice:
        """Victims among ``candidates`` past their protected runtime that cover ``need``
        (:func:`pick_victims`), each with ``reason(victim)`` and its protection named."""
        free = self._unprotected(candidates)
        shielded = len(free) < len(candidates)
        victims = pick_victims(
            free, need, self.demand_of, eligible, on_pick, self.started_of, ratio_of
        )
        if not victims:
            return VictimChoice(shielded=shielded)
        chosen = tuple(self._preemption(v, reason(v)) for v in victims)
        return VictimChoice(victims=tuple(victims), preemptions=chosen, shielded=shielded)

    def _ran_s(self, job: Job) -> float:
        return self.now - self.started_of(job) if self.now is not None else 0.0

    def _unprotected(self, jobs: list[Job]) -> list[Job]:
        """Jobs past their class's protected runtime (all of them without a tenure)."""
        if self.now is None or not self.protection.by_class:
            return jobs
        return [j for j in jobs if not self.protection.protected(j, self._ran_s(j))]

    def _preemption(self, victim: Job, reason: str) -> Preemption:
        guard = self.protection.of(victim)
        why = protected_reason(reason, self._ran_s(victim), guard)
        return Preemption(victim.job_id, why, guard.evict_delay_s)
