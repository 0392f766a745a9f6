"""The core's elastic gangs: grow from what an offer round left over, shrink for waiting jobs.

:class:`Elastic`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why components:
:mod:`~dlc.scheduler.core.state`); the rules are the pure ones of
:mod:`~dlc.scheduler.gangs.elastic`. Growth runs after the queue had its turn in the round, on the
agents none of its launches used and no reservation holds, and only while no queued job of the same
or higher priority waits; each new member is saved as a staging task of the running job before its
launch is returned (as a first launch is), so a restart finds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from dlc.scheduler.core.state import CoreState, task_ended
from dlc.scheduler.gangs.elastic import (
    Waiter,
    extras,
    growth_blocker,
    member_order,
    nodes_text,
    not_growing,
    shrink_for,
)
from dlc.scheduler.gangs.topology import Locality
from dlc.scheduler.jobs.job import Job, JobState, TaskPlacement
from dlc.scheduler.placement.inventory import Overheads
from dlc.scheduler.placement.model import Launch, OfferView
from dlc.scheduler.placement.placer import place
from dlc.scheduler.placement.share_launch import ShareFields
from dlc.scheduler.tenancy.held import WITH_EXECUTORS, UserTally, on_agents
from dlc.scheduler.tenancy.job_groups import JobGroups, Key
from dlc.scheduler.tenancy.policy import ZERO, Policy, Resources, fmt
from dlc.scheduler.tenancy.preemption import Preemption
from dlc.scheduler.tenancy.quotas import demand, job_gpus, usage_of

#: how many waiting jobs (highest priority first) a round checks against elastic gangs
WAITERS_LOOKED_AT = 64


def _node(job: Job) -> Resources:
    """What one node of ``job`` holds."""
    return demand(replace(job.spec, nodes=1, nodes_max=None))


def _live_extras(job: Job) -> list[TaskPlacement]:
    return [t for t in extras(job) if not task_ended(t)]


@dataclass(frozen=True)
class _Holdings:
    """What the active jobs hold as a round's growth goes: per (group, pool), and GPUs, CPUs
    and memory per user (the :class:`~dlc.scheduler.tenancy.held.UserTally` admission and the
    views count with). Made once per round (it walks every active job), where each try of each
    member used to walk them again; it counts the jobs the queue launches in the same round
    and each member the round adds (:meth:`add`), so two gangs of one user, or a gang beside
    its user's new job, keep to the limits together (red-team finding 55). A user's CPUs and
    memory count each task's executor (``overheads``), as admission counts them (finding 57);
    the group's, the ask."""

    groups: JobGroups
    by_key: dict[Key, Resources]
    users: UserTally

    @property
    def overheads(self) -> Overheads:
        """Each task's executor, as the users' CPUs and memory count it."""
        return self.users.overheads

    @classmethod
    def of(
        cls, policy: Policy, active: Iterable[Job], groups: JobGroups, overheads: Overheads
    ) -> _Holdings:
        jobs = list(active)
        users = UserTally(lambda job: job_gpus(policy, job, groups=groups), overheads)
        for job in jobs:
            users.add(job)
        return cls(groups, usage_of(policy, jobs, groups=groups), users)

    def member(self, job: Job) -> tuple[float, float]:
        """``(CPUs, memory MiB)`` one more member of ``job`` holds on its agent, its executor
        included: what the user's limits count it as."""
        return on_agents(replace(job.spec, nodes=1, nodes_max=None), self.overheads)

    def add(self, job: Job, node: Resources) -> None:
        """Count one more member of ``job`` holding ``node`` (its ask)."""
        key = self.groups.key(job)
        cpus, mem = self.member(job)
        self.by_key[key] = self.by_key.get(key, ZERO) + node
        self.users.add_amounts(job.user, node.gpus, cpus, mem)


class Elastic:
    """Growth and shrink of elastic gangs (``--nodes MIN:MAX``)."""

    def __init__(self, state: CoreState) -> None:
        self.state = state

    def gangs(self) -> list[Job]:
        """Running elastic gangs that may change size (not being killed or preempted)."""
        return [
            j for j in self.state.active.values()
            if j.spec.nodes_max is not None and j.state is JobState.RUNNING
            and not j.kill_requested
        ]  # fmt: skip

    def growable(self) -> list[Job]:
        """Running elastic gangs below MAX whose node 0 keeps the rendezvous."""
        return [j for j in self.gangs() if len(j.tasks) < (j.spec.nodes_max or 0) and _anchor(j)]

    def wants_offers(self) -> bool:
        """Whether offers are needed: a job waits, or an elastic gang could grow."""
        with self.state.lock:
            return self.state.has_queued() or bool(self.growable())

    def _waiters(self, placeable: dict[str, str], floor: int) -> list[Waiter]:
        """The queued jobs that waited this round (placeable, not held) of priority >= floor,
        highest first, with the agents able to run them (looked up once per shape, for the
        first :data:`WAITERS_LOOKED_AT` only: a bound on the round's cost)."""
        jobs = [j for j in map(self.state.queued.get, placeable)
                if j is not None and j.spec.priority >= floor]  # fmt: skip
        jobs.sort(key=lambda j: -j.spec.priority)
        able: dict[tuple[object, ...], frozenset[str] | None] = {}
        out = []
        for job in jobs[:WAITERS_LOOKED_AT]:
            spec = job.spec
            shape = (spec.gpus, spec.gpu_model, spec.gpu_vendor, spec.cpus, spec.mem_mib,
                     spec.disk_mib, spec.cuda_version, spec.is_share, spec.gpu_memory)  # fmt: skip
            if shape not in able:
                agents = frozenset(a.agent_id for a in self.state.inventory.able_agents(spec))
                able[shape] = agents or None  # no agent known yet: any
            out.append(Waiter(job.job_id, spec.priority, able[shape]))
        return out

    def resize(
        self, views: list[OfferView], used: set[str], placeable: dict[str, str],
        launching: Iterable[Job] = (),
    ) -> tuple[list[tuple[Job, Launch]], list[tuple[str, str]]]:  # fmt: skip
        """This round's growth launches and shrink kills.

        Args:
            views: the round's usable offers.
            used: agents the queue's launches took this round.
            placeable: queued jobs that waited this round though they could run (id -> why).
            launching: the queued jobs this round launches (not active yet): what they hold
                counts against the limits growth keeps to.
        """
        gangs = self.gangs()
        if not gangs:
            return [], []
        waiters = self._waiters(placeable, min(j.spec.priority for j in gangs))
        kills = self._shrink(gangs, waiters)
        growable = [j for j in self.growable() if not _live_extras_killed(j, kills)]
        growth = self._grow(growable, views, used, waiters, launching) if growable else []
        return growth, kills

    def _shrink(self, gangs: list[Job], waiters: list[Waiter]) -> list[tuple[str, str]]:
        kills = []
        live = [replace(j, tasks=tuple(t for t in j.tasks if not task_ended(t))) for j in gangs]
        for job, task, why in shrink_for(live, waiters):
            current = self.state.active[job.job_id]
            if current.message != why:
                self.state.save(replace(current, message=why), event=why)
            kills.append((task.task_id, task.agent_id))
        return kills

    def _grow(
        self, gangs: list[Job], views: list[OfferView], used: set[str], waiters: list[Waiter],
        launching: Iterable[Job] = (),
    ) -> list[tuple[Job, Launch]]:  # fmt: skip
        reserved = self.state.reservations.held()
        by_agent: dict[str, list[OfferView]] = {}
        for view in views:
            if view.agent_id not in used and view.agent_id not in reserved:
                by_agent.setdefault(view.agent_id, []).append(view)
        out: list[tuple[Job, Launch]] = []
        gangs.sort(key=lambda j: (-j.spec.priority, j.submitted_at, j.job_id))
        holdings = self._growth_holdings(launching)
        for job in gangs:
            # never on an agent a waiting job of the same or higher priority could use
            first = [w for w in waiters if w.priority >= job.spec.priority]
            free = {a: v for a, v in by_agent.items() if not any(w.could_use(a) for w in first)}
            held = {t.rank for t in job.tasks}
            top = job.spec.nodes_max or job.spec.nodes  # growable: MAX is set
            ranks = [r for r in range(job.spec.nodes, top) if r not in held]
            for rank in ranks:
                why = self._growth_limit(job, holdings)
                launch = None if why else self._place_member(job, rank, free)
                if launch is None:
                    blocked = len(free) < len(by_agent)  # waiting jobs could use the others
                    note = f"not growing: {why}" if why else None
                    self._note_growth(job, note or _no_room(job, rank, first if blocked else []))
                    break
                free.pop(launch.agent_id, None)
                by_agent.pop(launch.agent_id, None)
                out.append((job, launch))
                if holdings is not None:
                    holdings.add(job, _node(job))
        return out

    def _growth_holdings(self, launching: Iterable[Job] = ()) -> _Holdings | None:
        """The round's :class:`_Holdings`: the active jobs and those the round's queue
        launches (``None`` without a tenancy policy)."""
        state = self.state
        if not state.tenancy.enabled:
            return None
        jobs = dict(state.active)
        for job in launching:
            jobs.setdefault(job.job_id, job)
        return _Holdings.of(state.tenancy, jobs.values(), state.groups(), state.inventory.overheads)

    def _growth_limit(self, job: Job, holdings: _Holdings | None = None) -> str | None:
        """Why one more node would pass the group's ceiling or the user's GPU, CPU or memory
        limit (growth may borrow others' idle guarantees: a reclaim takes extra members back
        first). ``holdings``: the round's, with the members it added so far; else made
        here."""
        state = self.state
        policy = state.tenancy
        if not policy.enabled:
            return None
        if holdings is None:
            holdings = _Holdings.of(policy, state.active.values(), state.groups(),
                                    state.inventory.overheads)  # fmt: skip
        node = _node(job)
        node_cpus, node_mem = holdings.member(job)
        key = holdings.groups.key(job)
        ceiling = policy.quota(*key).ceiling
        held = holdings.by_key.get(key, ZERO)
        name = (held + node).first_excess(ceiling) if ceiling is not None else None
        if ceiling is not None and name is not None:
            return (f"{key[0]} would pass its ceiling in pool {key[1]} "
                    f"({fmt(held.amount(name), name)} of {fmt(ceiling.amount(name), name)} {name} "
                    "held)")  # fmt: skip
        limits = policy.limits.get(job.user)
        if limits is not None and limits.max_gpus is not None:
            mine = holdings.users.gpus.get(job.user, 0.0)
            if mine + node.gpus > limits.max_gpus + 1e-9:
                return (f"user {job.user} holds {fmt(mine)} of {fmt(limits.max_gpus)} GPUs "
                        "allowed")  # fmt: skip
        if limits is not None and limits.max_cpus is not None:
            cpus = holdings.users.cpus.get(job.user, 0.0)
            if cpus + node_cpus > limits.max_cpus + 1e-9:
                return (f"user {job.user} holds {fmt(cpus, 'CPUs')} of "
                        f"{fmt(limits.max_cpus, 'CPUs')} CPUs allowed{WITH_EXECUTORS}")  # fmt: skip
        if limits is not None and limits.max_mem_mib is not None:
            mem = holdings.users.mem_mib.get(job.user, 0.0)
            if mem + node_mem > limits.max_mem_mib + 1e-9:
                return (f"user {job.user} holds {fmt(mem, 'memory')} of "
                        f"{fmt(limits.max_mem_mib, 'memory')} memory allowed"
                        f"{WITH_EXECUTORS}")  # fmt: skip
        return None

    def _place_member(
        self, job: Job, rank: int, by_agent: dict[str, list[OfferView]]
    ) -> Launch | None:
        """One new member of ``job`` on the nearest agent (to node 0) that holds it and runs
        none of the gang's nodes."""
        state = self.state
        anchor = _anchor(job)
        if anchor is None:  # node 0 keeps the rendezvous: without it nothing joins
            return None
        mine = {t.agent_id for t in job.tasks}
        candidates = [a for a in by_agent if a not in mine]
        near = member_order(candidates, self._place_of, self._place_of(anchor.agent_id),
                            job.spec.gang_topology)  # fmt: skip
        one = replace(job, spec=replace(job.spec, nodes=1), tasks=())
        for agent_id in near:
            result = place(by_agent[agent_id], [one], state.config.placement,
                           state.topology_of, state.driver_ok)  # fmt: skip
            if result.launches:
                return replace(result.launches[0], task_id=f"{job.task_prefix()}{rank}",
                               rank=rank, peers=(anchor.rendezvous,))  # fmt: skip
        return None

    def _place_of(self, agent_id: str) -> Locality:
        agent = self.state.inventory.get(agent_id)
        return agent.locality if agent is not None else Locality()

    def _note_growth(self, job: Job, why: str) -> None:
        """Keep why a gang does not grow on the job (stored only when it changes)."""
        current = self.state.active.get(job.job_id)
        if current is not None and current.message != why:
            self.state.save(replace(current, message=why))

    def add_member(self, job: Job, launch: Launch, fields: ShareFields) -> None:
        """Save the new member as a staging task of the running job (before its launch)."""
        current = self.state.active.get(job.job_id, job)
        task = TaskPlacement(
            task_id=launch.task_id,
            agent_id=launch.agent_id,
            hostname=launch.hostname,
            gpu_ids=launch.gpu_ids,
            offer_id=launch.offer_ids[0],
            rank=launch.rank,
            rendezvous=launch.peers[0],
            **fields,
        )
        grown = replace(current, tasks=(*current.tasks, task))
        why = f"growing: node {launch.rank} on {launch.hostname} ({nodes_text(grown)} nodes)"
        self.state.save(replace(grown, message=why), event=why)

    def member_left(self, job: Job, task: TaskPlacement, message: str) -> Job:
        """An extra member ended: the gang goes on without it (its GPUs drain as usual)."""
        self.state.previous[task.task_id] = (task.agent_id, task.gpus_used)
        rest = replace(job, tasks=tuple(t for t in job.tasks if t.task_id != task.task_id))
        why = f"node {task.rank} left ({message}); running on {nodes_text(rest)} nodes"
        if job.message.startswith("shrinking: "):
            why = f"{job.message}; running on {nodes_text(rest)} nodes"
        return self.state.save(replace(rest, message=why), event=why)

    def shrink_instead(self, victims: Iterable[Preemption]) -> list[tuple[str, str]]:
        """Shrink-first for a quota plan: the planned victims that are elastic gangs above
        MIN give back their extra members; the plan's whole evictions wait for the next
        round (which sees the smaller gangs). Empty: no victim has extra members."""
        kills = []
        for victim in victims:
            job = self.state.active.get(victim.job_id)
            if job is None or job.spec.nodes_max is None or job.kill_requested:
                continue
            for task in _live_extras(job):
                why = f"shrinking: gave back node {task.rank} on {task.hostname} ({victim.reason})"
                if job.message != why:
                    job = self.state.save(replace(job, message=why), event=why)
                kills.append((task.task_id, task.agent_id))
        return kills


def _no_room(job: Job, rank: int, blockers: list[Waiter]) -> str:
    """Why node ``rank`` was not placed: an agent kept for a waiting job, or no room."""
    blocker = growth_blocker(job, blockers)
    if blocker is not None:
        return not_growing(job, blocker)
    spec = job.spec
    gpus = "" if spec.is_cpu_only else f"{spec.gpus} GPUs, "  # a CPU-only gang asks none
    return (f"not growing: no offer has room for node {rank} ({gpus}"
            f"{spec.cpus:g} cpus, {spec.mem_mib} MiB) away from its other nodes")  # fmt: skip


def _anchor(job: Job) -> TaskPlacement | None:
    """Node 0 when it runs and carries the rendezvous address (else the gang cannot grow)."""
    node0 = next((t for t in job.tasks if t.rank == 0), None)
    if node0 is None or not node0.rendezvous or task_ended(node0):
        return None
    return node0


def _live_extras_killed(job: Job, kills: list[tuple[str, str]]) -> bool:
    killed = {k for k, _ in kills}
    return any(t.task_id in killed for t in job.tasks)
