"""Quotas with borrowing and reclaim, per-user limits, and the fair run order.

:func:`plan` is the one call the core makes per offer round (pure: jobs, a
:class:`~dlc.scheduler.tenancy.policy.Policy` and pool totals in, a :class:`QueuePlan` out):

* each queued job is charged to ``(group, pool)``; a job that fits in the group's guarantee
  is admitted (the quota is held for it, as Kueue does, so a big job is not starved by
  small ones behind it);
* beyond the guarantee a job *borrows*: admitted only if the pool has that much that no
  other group holds or claims back for its own waiting jobs, and never past the ceiling;
* groups take turns by dominant-resource fairness on what they borrow
  (:mod:`dlc.scheduler.tenancy.fairness`);
* per-user limits (running jobs, GPUs, CPUs and memory held, the last two with each task's
  executor: :func:`~dlc.scheduler.tenancy.held.on_agents`) hold a user's job without
  blocking others;
* when a lender's admitted job does not fit because borrowers fill the pool, borrowed jobs
  are picked for preemption (:mod:`dlc.scheduler.tenancy.preemption`), lowest priority and
  youngest first; with ``preempt_within`` a group's higher-priority job may stop its
  lower-priority ones;
* with fair share over time (:mod:`dlc.scheduler.tenancy.fair_share`, a :class:`Tenure`), borrowers
  go in order of decayed GPU-hours over weight (lower first), victims of the groups that
  used most first, and within a group (same priority) the user who used less first;
  a victim inside its class's protected runtime is not chosen, and one chosen is evicted
  after its class's delay (:class:`~dlc.scheduler.tenancy.preemption.ProtectionRules`);
* every job not admitted gets a true reason (``team-a at its quota in pool train, 6 of 6
  GPUs; ...``) and its position in its group.

An empty policy admits the queue unchanged (the plain priority queue of ``jobs/queue.py``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from dlc.errors import JobSpecError
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.inventory import DEFAULT_OVERHEADS, Overheads
from dlc.scheduler.tenancy.fair_share import FairView
from dlc.scheduler.tenancy.fairness import claim, group_key
from dlc.scheduler.tenancy.held import WITH_EXECUTORS, UserTally, held_spec, on_agents
from dlc.scheduler.tenancy.job_groups import JobGroups, Key
from dlc.scheduler.tenancy.policy import DEFAULT_POOL, POOL_ATTRIBUTE, ZERO, Policy, Resources, fmt
from dlc.scheduler.tenancy.preemption import (
    Preemption,
    ProtectionRules,
    VictimChoice,
    VictimChooser,
)
from dlc.scheduler.tenancy.share_charge import GpuSizes, as_sizes

#: a group's place in the planning heap (see ``_Planner._push``)
_Order = tuple[int, float, float, int, float, str]
_V = TypeVar("_V", bound="PoolView")


class PoolView(Protocol):
    """Anything placed in a pool by its agent's attributes (an offer view, an agent)."""

    @property
    def attributes(self) -> Mapping[str, str]: ...


class PoolAgent(PoolView, Protocol):
    """What :func:`pool_capacity` sums (e.g.
    :class:`~dlc.scheduler.placement.inventory.AgentTotals`)."""

    @property
    def gpu_ids(self) -> Collection[int]: ...

    @property
    def cpus(self) -> float: ...

    @property
    def mem_mib(self) -> float: ...


def gpu_amount(spec: JobSpec, gpu_mib: int | None = None) -> float:
    """GPUs a job holds, a share counted by its part of one GPU.

    ``--gpus 0.5`` counts 0.5. A memory share counts its memory over ``gpu_mib`` (the GPU
    it runs on, or at admission the smallest GPU of its pool:
    :class:`~dlc.scheduler.tenancy.share_charge.GpuSizes`); with both, the larger of the two parts.
    A memory share with no GPU size known counts one GPU: it cannot be placed before an
    agent advertises its memory anyway.
    """
    if not spec.is_share:
        return float(spec.gpus * spec.nodes)
    part = spec.gpu_fraction or 0.0
    if spec.gpu_memory is not None:
        part = max(part, spec.gpu_memory / gpu_mib if gpu_mib else 1.0)
    return min(1.0, part)


def largest_gpu_memory(agents: Iterable[object]) -> int | None:
    """The largest GPU memory (MiB) of ``agents`` (with ``gpu_memory``: index -> MiB)."""
    sizes = [m for a in agents for m in getattr(a, "gpu_memory", {}).values()]
    return max(sizes) if sizes else None


def demand(spec: JobSpec, gpu_mib: int | None = None) -> Resources:
    """What a job holds while it runs, over all its nodes (a share: its part of a GPU)."""
    return Resources(gpu_amount(spec, gpu_mib), spec.cpus * spec.nodes, spec.mem_mib * spec.nodes)


def job_demand(
    policy: Policy, job: Job, sizes: GpuSizes | int | None = None,
    groups: JobGroups | None = None,
) -> Resources:  # fmt: skip
    """:func:`demand` of ``job`` with its share charged as
    :mod:`~dlc.scheduler.tenancy.share_charge` says (the GPU it runs on; waiting: the smallest
    GPU of its pool). ``groups``: the round's map, where the share's pool is read."""
    return demand(held_spec(job), _charged_mib(policy, job, sizes, groups))


def job_gpus(
    policy: Policy, job: Job, sizes: GpuSizes | int | None = None,
    groups: JobGroups | None = None,
) -> float:  # fmt: skip
    """:func:`gpu_amount` of ``job``, charged as in :func:`job_demand`."""
    return gpu_amount(held_spec(job), _charged_mib(policy, job, sizes, groups))


def _charged_mib(
    policy: Policy, job: Job, sizes: GpuSizes | int | None, groups: JobGroups | None
) -> int | None:
    if not job.spec.is_share or job.spec.gpu_memory is None:
        return None  # whole GPUs and fractions do not depend on the GPU size
    if groups is not None and groups.policy is policy:  # the round's pool, resolved once
        return as_sizes(sizes).charged_mib(job, groups.key(job)[1])
    return as_sizes(sizes).charged_mib(job, policy.pool_of(job.user, job.spec.pool))


def agent_pool(attributes: Mapping[str, str]) -> str:
    """The pool an agent is in (its ``dlc_pool`` attribute, else ``default``)."""
    return attributes.get(POOL_ATTRIBUTE) or DEFAULT_POOL


def pool_capacity(agents: Iterable[PoolAgent]) -> dict[str, Resources]:
    """Pool -> totals over agents (anything with ``attributes``, ``gpu_ids``, ``cpus``,
    ``mem_mib``, e.g. :class:`~dlc.scheduler.placement.inventory.AgentTotals`)."""
    out: dict[str, Resources] = {}
    for agent in agents:
        pool = agent_pool(agent.attributes)
        out[pool] = out.get(pool, ZERO) + Resources(len(agent.gpu_ids), agent.cpus, agent.mem_mib)
    return out


def split_by_pool(
    views: Sequence[_V], jobs: Sequence[Job], policy: Policy, groups: JobGroups | None = None
) -> list[tuple[list[_V], list[Job]]]:
    """``[(offer views, jobs)]`` per pool: a pool's agents take only that pool's jobs.
    One batch of everything when no policy applies and no job names a pool. ``groups``: the
    round's map of each job's group and pool (default: one made here)."""
    if not policy.enabled and not any(j.spec.pool for j in jobs):
        return [(list(views), list(jobs))]
    if groups is None or groups.policy is not policy:
        groups = JobGroups(policy)
    batches: dict[str, tuple[list[_V], list[Job]]] = {}
    for view in views:
        batches.setdefault(agent_pool(view.attributes), ([], []))[0].append(view)
    for job in jobs:
        batches.setdefault(groups.key(job)[1], ([], []))[1].append(job)
    return list(batches.values()) or [([], [])]


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    """One waiting job as ``dlc queue`` shows it."""

    job: Job
    group: str
    pool: str
    position: int  # 1-based, within its group
    admitted: bool
    reason: str  # why it is not admitted ("" when admitted)


@dataclass
class QueuePlan:
    """What :func:`plan` decided for one round.

    Attributes:
        runnable: admitted jobs in run order (what placement should try, in this order).
        held: job id -> why it may not run now (quota, ceiling, user limit).
        rows: every queued job in run order.
        preemptions: running jobs to stop now.
        notes: job id -> what an admitted job waits for (a reclaim under way).
        usage: (group, pool) -> held by running jobs (before this round's admissions).
        capacity: pool -> totals.
    """

    runnable: list[Job] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    rows: list[QueueRow] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    usage: dict[Key, Resources] = field(default_factory=dict)
    capacity: dict[str, Resources] = field(default_factory=dict)


@dataclass(frozen=True)
class Tenure:
    """Time in the policy (issue 28): fair share over time and protected runtimes.

    Attributes:
        now: the round's time (how long victims ran).
        fair: decayed usage over weights (``None``: fair share off, DRF on borrowing only).
        protection: per priority class, the protected runtime and eviction delay.
    """

    now: float
    fair: FairView | None = None
    protection: ProtectionRules = ProtectionRules()


def key_of(policy: Policy, job: Job) -> Key:
    """The (group, pool) a job is charged to (one job, once; a round reads its
    :class:`~dlc.scheduler.tenancy.job_groups.JobGroups` instead)."""
    return policy.charged_to(job.user, job.spec.pool)


def usage_of(
    policy: Policy,
    active: Iterable[Job],
    gpu_mib: GpuSizes | int | None = None,
    groups: JobGroups | None = None,
) -> dict[Key, Resources]:
    """(group, pool) -> what active jobs hold (``gpu_mib``: as in :func:`job_demand`;
    ``groups``: the round's map of each job's group and pool, else one made here)."""
    if groups is None:
        groups = JobGroups(policy)
    usage: dict[Key, Resources] = {}
    for job in active:
        key = groups.key(job)
        usage[key] = usage.get(key, ZERO) + job_demand(policy, job, gpu_mib, groups)
    return usage


def plan(
    queue: Sequence[Job],
    active: Iterable[Job],
    policy: Policy,
    capacity: Mapping[str, Resources],
    started: Mapping[str, float] | None = None,
    gpu_mib: GpuSizes | int | None = None,
    tenure: Tenure | None = None,
    rows: bool = True,
    groups: JobGroups | None = None,
    overheads: Overheads = DEFAULT_OVERHEADS,
) -> QueuePlan:
    """Order, admit or hold every queued job and pick preemptions (see the module doc).

    Args:
        queue: queued jobs in queue order (priority, submission time).
        active: jobs whose tasks may hold resources (staging, running, preempted).
        policy: groups, quotas, limits.
        capacity: pool -> totals (a pool missing or all zero: not known yet, so borrowing
            and reclaim are not limited by it).
        started: job id -> when its current run started (victims: youngest first); a job
            missing counts from its submission.
        gpu_mib: the GPU sizes memory shares are charged against
            (:class:`~dlc.scheduler.tenancy.share_charge.GpuSizes`; an int: one size for all).
        tenure: fair share over time and protected runtimes (``None``: neither).
        rows: whether to list :attr:`QueuePlan.rows` without a policy (an offer round does
            not read them: building 10,000 was a large part of a round at openb scale).
        groups: each job's group and pool under ``policy``, resolved once for the round
            (:class:`~dlc.scheduler.tenancy.job_groups.JobGroups`); default: a map made here.
        overheads: each task's executor, counted with the ask in the users' ``max_cpus`` and
            ``max_mem_mib`` (:func:`~dlc.scheduler.tenancy.held.on_agents`; the core's: its
            placement config's).
    """
    active = list(active)
    if not policy.enabled:
        listed = [QueueRow(job=j, group="-", pool=j.spec.pool or DEFAULT_POOL, position=i + 1,
                           admitted=True, reason="")
                  for i, j in enumerate(queue)] if rows else []  # fmt: skip
        return QueuePlan(runnable=list(queue), rows=listed, capacity=dict(capacity))
    if groups is None or groups.policy is not policy:
        groups = JobGroups(policy)
    return _Planner(queue, active, groups, capacity, started or {}, gpu_mib, tenure,
                    overheads).run()  # fmt: skip


def _fair_order(
    group: str, used: Mapping[tuple[str, str], float]
) -> Callable[[Job], tuple[int, float]]:
    """Sort key within one group: priority first, then the user who used less over time."""
    return lambda j: (-j.spec.priority, used.get((group, j.user), 0.0))


class _Planner:
    """The state of one :func:`plan` call."""

    def __init__(
        self, queue: Sequence[Job], active: Sequence[Job], groups: JobGroups,
        capacity: Mapping[str, Resources], started: Mapping[str, float],
        gpu_mib: GpuSizes | int | None = None, tenure: Tenure | None = None,
        overheads: Overheads = DEFAULT_OVERHEADS,
    ) -> None:  # fmt: skip
        self.policy = policy = groups.policy
        self.groups = groups
        self.overheads = overheads
        self.gpu_mib = gpu_mib
        self.started_of: Callable[[Job], float] = lambda job: started.get(
            job.job_id, job.submitted_at
        )
        self.tenure = tenure
        self.chooser = VictimChooser(
            demand_of=self._demand, started_of=self.started_of,
            now=tenure.now if tenure else None,
            protection=tenure.protection if tenure else ProtectionRules(),
        )  # fmt: skip
        fair = tenure.fair if tenure else None
        self.fair = fair
        self.ratio_of: Callable[[Job], float] | None = (
            (lambda job: fair.ratio(groups.group(job))) if fair else None
        )
        self.capacity = dict(capacity)
        self.usage = usage_of(policy, active, gpu_mib, groups)
        self.out = QueuePlan(usage=dict(self.usage), capacity=self.capacity)
        self.freeing: dict[str, Resources] = {}
        self.freeing_key: dict[Key, Resources] = {}
        self.running: dict[Key, list[Job]] = {}
        # what each user holds, counted as held_by_user counts it for the views (one tally)
        self.users = UserTally(self._gpus, overheads)
        for job in active:
            key = groups.key(job)
            if job.state is JobState.PREEMPTED:
                self.freeing[key[1]] = self.freeing.get(key[1], ZERO) + self._demand(job)
                self.freeing_key[key] = self.freeing_key.get(key, ZERO) + self._demand(job)
            else:
                self.running.setdefault(key, []).append(job)
            self.users.add(job)
        self.queues: dict[Key, list[Job]] = {}
        self.pending: dict[Key, Resources] = {}
        for job in queue:
            key = groups.key(job)
            self.queues.setdefault(key, []).append(job)
            self.pending[key] = self.pending.get(key, ZERO) + self._demand(job)
        if fair is not None:  # same priority: the user who used less over time first
            for (group, _), jobs in self.queues.items():
                used = fair.user_usage
                jobs.sort(key=_fair_order(group, used))
        self.keys_in_pool: dict[str, list[Key]] = {}
        for key in set(self.queues) | set(self.usage):
            self.keys_in_pool.setdefault(key[1], []).append(key)
        self.positions: dict[str, int] = {}
        # each key's claim (fairness.claim) and their sum per pool, kept up to date so that a
        # borrowing check costs O(1) instead of a pass over every group
        self.claims: dict[Key, Resources] = {}
        self.claim_total: dict[str, Resources] = {}
        self.claimable = self._claimable_guarantees()
        for key in set(self.queues) | set(self.usage):
            self._refresh(key)

    def _claimable_guarantees(self) -> dict[Key, Resources]:
        """Each group's guarantee as far as the pool can honour it, for claims.

        Guarantees that add up to more than a pool holds (a CPU guarantee of "all of
        them" for every group) are scaled down in that resource, in proportion: otherwise
        every waiting group claims the whole pool, and whether a group may borrow would
        depend on the order the groups are visited in, not on their fair order.
        """
        totals: dict[str, Resources] = {}
        for (_, pool), quota in self.policy.quotas.items():
            totals[pool] = totals.get(pool, ZERO) + quota.guaranteed

        def part(cap: float, total: float) -> float:
            return cap / total if total > cap > 0 else 1.0

        out: dict[Key, Resources] = {}
        for key, quota in self.policy.quotas.items():
            cap, total, g = self._cap(key[1]), totals[key[1]], quota.guaranteed
            out[key] = Resources(
                g.gpus * part(cap.gpus, total.gpus),
                g.cpus * part(cap.cpus, total.cpus),
                g.mem_mib * part(cap.mem_mib, total.mem_mib),
            )
        return out

    def _refresh(self, key: Key) -> None:
        guaranteed = self.claimable.get(key) or self.policy.quota(*key).guaranteed
        new = claim(self.usage.get(key, ZERO), guaranteed, self.pending.get(key, ZERO))
        old = self.claims.get(key, ZERO)
        self.claims[key] = new
        self.claim_total[key[1]] = self.claim_total.get(key[1], ZERO) + new - old

    def _demand(self, job: Job) -> Resources:
        return job_demand(self.policy, job, self.gpu_mib, self.groups)

    def _gpus(self, job: Job) -> float:
        return job_gpus(self.policy, job, self.gpu_mib, self.groups)

    def run(self) -> QueuePlan:
        heap: list[tuple[_Order, Key]] = []
        heads = {key: 0 for key in self.queues}
        for key in self.queues:
            self._push(heap, key, 0)
        while heap:
            _, key = heapq.heappop(heap)
            job = self.queues[key][heads[key]]
            heads[key] += 1
            self._decide(key, job)
            if heads[key] < len(self.queues[key]):
                self._push(heap, key, heads[key])
        return self.out

    def _push(
        self, heap: list[tuple[_Order, Key]], key: Key,
        index: int,
    ) -> None:  # fmt: skip
        job = self.queues[key][index]
        quota = self.policy.quota(*key)
        within, share = group_key(
            self.usage.get(key, ZERO), quota.guaranteed, self._cap(key[1]), self._demand(job)
        )
        # fair share over time: among borrowers, less used over time for its weight first
        ratio = self.fair.ratio(key[0]) if within and self.fair is not None else 0.0
        order = (within, ratio, share, -job.spec.priority, job.submitted_at, job.job_id)
        heapq.heappush(heap, (order, key))

    def _cap(self, pool: str) -> Resources:
        return self.capacity.get(pool, ZERO)

    def _known(self, pool: str) -> bool:
        cap = self._cap(pool)
        return cap.gpus > 0 or cap.cpus > 0

    # -- one job ---------------------------------------------------------------

    def _decide(self, key: Key, job: Job) -> None:
        group, pool = key
        need = self._demand(job)
        self.pending[key] = self.pending[key] - need
        self._refresh(key)
        position = self.positions[group] = self.positions.get(group, 0) + 1
        why = self._user_limit(job) or self._ceiling(key, need)
        if why is None and not (self.usage.get(key, ZERO) + need).fits(
            self.policy.quota(*key).guaranteed
        ):
            why = self._borrow(key, job, need)
        if why is not None:
            where = group if group != "-" else "the queue (no group)"
            self.out.held[job.job_id] = f"position {position} in {where}; {why}"
            self.out.rows.append(
                QueueRow(
                    job=job, group=group, pool=pool, position=position, admitted=False, reason=why
                )
            )
            return
        self.usage[key] = self.usage.get(key, ZERO) + need
        self._refresh(key)
        self.users.add(job)
        self.out.runnable.append(job)
        self.out.rows.append(
            QueueRow(job=job, group=group, pool=pool, position=position, admitted=True, reason="")
        )
        self._reclaim_if_full(key, job)

    def _user_limit(self, job: Job) -> str | None:
        """Why ``job`` would pass a limit of its user (CPUs and memory: the ask and each
        task's executor, as they hold them on the agents)."""
        limits = self.policy.limits.get(job.user)
        if limits is None:
            return None
        users = self.users
        running = users.running.get(job.user, 0)
        if limits.max_running is not None and running + 1 > limits.max_running:
            return f"user {job.user} at their limit: {running} of {limits.max_running} jobs running"
        held = users.gpus.get(job.user, 0.0)
        if limits.max_gpus is not None and held + self._gpus(job) > limits.max_gpus + 1e-9:
            return (f"user {job.user} holds {fmt(held)} of {fmt(limits.max_gpus)} GPUs allowed; "
                    f"this job needs {fmt(self._gpus(job))}")  # fmt: skip
        need_cpus, need_mem = on_agents(held_spec(job), self.overheads)
        cpus = users.cpus.get(job.user, 0.0)
        if limits.max_cpus is not None and cpus + need_cpus > limits.max_cpus + 1e-9:
            return (f"user {job.user} holds {fmt(cpus, 'CPUs')} of {fmt(limits.max_cpus, 'CPUs')}"
                    f" CPUs allowed; this job needs {fmt(need_cpus, 'CPUs')}"
                    f"{WITH_EXECUTORS}")  # fmt: skip
        mem = users.mem_mib.get(job.user, 0.0)
        if limits.max_mem_mib is not None and mem + need_mem > limits.max_mem_mib + 1e-9:
            return (f"user {job.user} holds {fmt(mem, 'memory')} of "
                    f"{fmt(limits.max_mem_mib, 'memory')} memory allowed; this job needs "
                    f"{fmt(need_mem, 'memory')}{WITH_EXECUTORS}")  # fmt: skip
        envs = users.environments.get(job.user, 0)
        if job.spec.interactive and limits.max_interactive is not None \
                and envs + 1 > limits.max_interactive:  # fmt: skip
            return (f"user {job.user} at their limit: {envs} of {limits.max_interactive} "
                    "interactive environments running")  # fmt: skip
        return None

    def _ceiling(self, key: Key, need: Resources) -> str | None:
        ceiling = self.policy.quota(*key).ceiling
        if ceiling is None:
            return None
        used = self.usage.get(key, ZERO)
        name = (used + need).first_excess(ceiling)
        if name is None:
            return None
        return (f"{key[0]} at its ceiling in pool {key[1]}: holds {fmt(used.amount(name), name)}"
                f" of {fmt(ceiling.amount(name), name)} {name}, this job needs "
                f"{fmt(need.amount(name), name)}")  # fmt: skip

    def _borrow(self, key: Key, job: Job, need: Resources) -> str | None:
        """Admit beyond the guarantee only from what nobody holds or claims back."""
        group, pool = key
        used = self.usage.get(key, ZERO)
        guaranteed = self.policy.quota(*key).guaranteed
        if not self._known(pool):
            return None
        others = self.claim_total.get(pool, ZERO) - self.claims.get(key, ZERO)
        room = self._cap(pool) - others
        if (used + need).fits(room):
            return None
        within = self._within_group(key, job, need, room)
        if within is not None:
            return within
        name = (used + need).first_excess(guaranteed) or "GPUs"
        idle = max(0.0, room.amount(name) - used.amount(name))
        return (f"{group} at its quota in pool {pool}, {fmt(used.amount(name), name)} of "
                f"{fmt(guaranteed.amount(name), name)} {name}; borrowing needs "
                f"{fmt(need.amount(name), name)} idle, {fmt(idle, name)} are")  # fmt: skip

    # -- preemption ------------------------------------------------------------

    def _within_group(self, key: Key, job: Job, need: Resources, room: Resources) -> str | None:
        """With ``preempt_within``: stop lower-priority jobs of the same group."""
        group = self.policy.groups.get(key[0])
        if group is None or not group.preempt_within:
            return None
        quota = self.policy.quota(*key)
        limit = Resources(
            max(quota.guaranteed.gpus, room.gpus),
            max(quota.guaranteed.cpus, room.cpus),
            max(quota.guaranteed.mem_mib, room.mem_mib),
        )
        # jobs already stopping free their share soon: never stop more for the same need
        held = self.usage.get(key, ZERO) - self.freeing_key.get(key, ZERO)
        excess = (held + need).over(limit)
        if excess.fits(ZERO):
            return f"waiting for preempted jobs of {key[0]} to stop ({self._grace()})"
        lower = [j for j in self.running.get(key, ()) if j.spec.priority < job.spec.priority]
        why = (f"preempted: job {job.job_id} of {key[0]} has a higher priority "
               f"({job.spec.priority} > {{prio}})")  # fmt: skip
        choice = self.chooser.choose(lower, excess, lambda v: why.format(prio=v.spec.priority))
        if not choice.victims:
            return None
        self._stop(choice)
        names = ", ".join(v.job_id for v in choice.victims)
        return f"waiting for lower-priority job {names} to stop ({self._grace()})"

    def _reclaim_if_full(self, key: Key, job: Job) -> None:
        """An admitted job within its guarantee that the pool cannot hold: take back
        what other groups borrow."""
        group, pool = key
        if not self._known(pool):
            return
        total = ZERO
        for other in self.keys_in_pool.get(pool, ()):
            total = total + self.usage.get(other, ZERO)
        total = total - self.freeing.get(pool, ZERO)
        excess = total.over(self._cap(pool))
        if excess.fits(ZERO):
            return
        usage = dict(self.usage)

        def borrows(victim: Job) -> bool:
            vkey = self.groups.key(victim)
            held = usage.get(vkey, ZERO)
            return not held.fits(self.policy.quota(*vkey).guaranteed)

        def take(victim: Job) -> None:
            vkey = self.groups.key(victim)
            usage[vkey] = usage.get(vkey, ZERO) - self._demand(victim)

        candidates = [
            j for other, jobs in self.running.items()
            if other[1] == pool and other[0] != group for j in jobs
        ]  # fmt: skip
        why = f"preempted: {group} reclaims its guarantee in pool {pool} for job {job.job_id}"
        choice = self.chooser.choose(candidates, excess, lambda v: why, borrows, take,
                                     self.ratio_of)  # fmt: skip
        if not choice.victims:
            guarded = " (borrowed jobs are in their protected runtime)" if choice.shielded else ""
            self.out.notes[job.job_id] = (
                f"{group} is within its quota in pool {pool}; waiting for running jobs to end"
                + guarded
            )
            return
        self._stop(choice)
        names = ", ".join(v.job_id for v in choice.victims)
        self.out.notes[job.job_id] = (
            f"{group} reclaims its guarantee: stopping borrowed job {names} ({self._grace()})"
        )

    def _stop(self, choice: VictimChoice) -> None:
        """Count the chosen victims as stopped, and hand their preemptions to the core."""
        for victim in choice.victims:
            vkey = self.groups.key(victim)
            self.running[vkey] = [j for j in self.running[vkey] if j.job_id != victim.job_id]
            self.usage[vkey] = self.usage.get(vkey, ZERO) - self._demand(victim)
            self._refresh(vkey)
        self.out.preemptions.extend(choice.preemptions)

    def _grace(self) -> str:
        return f"SIGTERM, then {fmt(self.policy.grace_s)} s grace"


def check_submit(
    policy: Policy,
    user: str,
    spec: JobSpec,
    capacity: Mapping[str, Resources],
    gpu_mib: GpuSizes | int | None = None,
    overheads: Overheads = DEFAULT_OVERHEADS,
) -> None:
    """Refuse at once what the policy can never run: an unknown pool, more than the group's
    ceiling, more than the pool has, more GPUs, CPUs or memory than the user may hold (CPUs and
    memory with each task's executor, ``overheads``, as :func:`plan` counts them).

    Raises:
        JobSpecError: naming the field and the fix.
    """
    if not policy.enabled and spec.pool is None:
        return
    group = policy.group_of(user)
    pool = policy.pool_of(user, spec.pool)
    need = demand(spec, as_sizes(gpu_mib).admission_mib(pool))
    known = {p for p, cap in capacity.items() if cap.gpus > 0 or cap.cpus > 0}
    if known and pool not in known:
        raise JobSpecError(
            "pool",
            f"no agent is in pool {pool!r} (pools: {', '.join(sorted(known))}); pass "
            "--pool with one of them, or ask an admin to run `dlc node-config --pool "
            f"{pool}` on some agents",
        )
    ceiling = policy.quota(group, pool).ceiling
    name = need.first_excess(ceiling) if ceiling is not None else None
    if ceiling is not None and name is not None:
        raise JobSpecError(
            "gpus" if name == "GPUs" else ("cpus" if name == "CPUs" else "mem_mib"),
            f"the job needs {fmt(need.amount(name), name)} {name} but {group}'s ceiling in "
            f"pool {pool} is {fmt(ceiling.amount(name), name)}; ask for less or ask an admin "
            "to raise it (`dlc quota set`)",
        )
    if pool in known and need.gpus > capacity[pool].gpus + 1e-9:
        raise JobSpecError(
            "gpus",
            f"the job needs {fmt(need.gpus)} GPUs but pool {pool} has "
            f"{fmt(capacity[pool].gpus)} in all; ask for <= {fmt(capacity[pool].gpus)} "
            "or pick another --pool",
        )
    limits = policy.limits.get(user)
    if limits and limits.max_gpus is not None and need.gpus > limits.max_gpus + 1e-9:
        raise JobSpecError(
            "gpus",
            f"the job needs {fmt(need.gpus)} GPUs but user {user} may hold at most "
            f"{fmt(limits.max_gpus)}; ask for less or ask an admin to raise the limit",
        )
    cpus, mem = on_agents(spec, overheads)
    if limits and limits.max_cpus is not None and cpus > limits.max_cpus + 1e-9:
        raise JobSpecError(
            "cpus",
            f"the job needs {fmt(cpus, 'CPUs')} CPUs over all its nodes ({fmt(need.cpus, 'CPUs')} "
            f"asked and {fmt(overheads.cpus, 'CPUs')} a node for its executor) but user {user} may "
            f"hold at most {fmt(limits.max_cpus, 'CPUs')}; ask for less or ask an admin to raise "
            "the limit (`dlc groups limit --max-cpus`)",
        )
    if limits and limits.max_mem_mib is not None and mem > limits.max_mem_mib + 1e-9:
        raise JobSpecError(
            "mem_mib",
            f"the job needs {fmt(mem, 'memory')} of memory over all its nodes "
            f"({fmt(need.mem_mib, 'memory')} asked and {fmt(overheads.mem_mib, 'memory')} a node "
            f"for its executor) but user {user} may hold at most "
            f"{fmt(limits.max_mem_mib, 'memory')}; ask for less or ask an admin to raise the "
            "limit (`dlc groups limit --max-mem`)",
        )
