"""Consolidation: move a few preemptible jobs so that a job fragmentation denies can run.

A waiting whole-GPU job may find enough free GPUs in the cluster, yet no single agent with
its whole set: 8 free GPUs spread as 2+2+2+2 run no 8-GPU job. The queue's reservation
(:mod:`~dlc.scheduler.jobs.queue`) waits for an agent to drain by itself, which may take as long
as the longest job there. Consolidation shortens that wait: it stops a few *preemptible*
jobs on one agent (they get SIGTERM and the grace period, checkpoint, and are queued again
without using a retry) so that the agent holds the waiting job's whole set.

The rule (as KAI's consolidation action has it): a plan moves jobs **only if every moved job
has a place elsewhere at once and the waiting job gets its set**. The check is joint, not one
job at a time: all moved jobs are packed together onto the other agents' free GPUs, none of
them onto the agent being cleared, and two moved jobs never share a destination GPU. A plan
that leaves one moved job without a place moves nothing. Where an agent's free CPUs and
memory are known they count too: the cleared agent must hold the waiting job's once the
moved jobs are gone, and each moved job's destination its own (a CPU-only job, which frees
no GPU and is never moved, may hold them: red-team finding 52, docs/security.md).

Among the plans that pass, the cheapest wins: the fewest GPU-hours lost (each moved job's
GPUs times the time since its run started, plus the grace it spends stopping: an upper
bound, since a job that checkpoints loses only the work since its last checkpoint, which
DLC does not know), then the fewest moves. A budget bounds the moves (per hour, kept by
:class:`MoveBudget`).

Pure: plain data in, a :class:`ConsolidationPlan` or a :class:`NoPlan` out. The scheduler
core (:mod:`~dlc.scheduler.core.consolidation`) feeds it and carries the plan out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

#: ``(agent id, free GPU ids, count) -> the ids to use, or None``: how a set is chosen on an
#: agent (the default takes any ``count`` ids; a topology-aware one may insist on one NVLink
#: group and refuse a set that spans two)
Chooser = Callable[[str, frozenset[int], int], "tuple[int, ...] | None"]

#: victims per agent a plan considers (subsets are enumerated; 12 gives 4,095 at most)
MAX_CANDIDATES_PER_AGENT = 12


def any_ids(agent_id: str, free: frozenset[int], count: int) -> tuple[int, ...] | None:
    """The lowest ``count`` free ids, or ``None`` when fewer are free (no topology)."""
    del agent_id
    if len(free) < count:
        return None
    return tuple(sorted(free)[:count])


@dataclass(frozen=True, kw_only=True)
class AgentGpus:
    """One agent's GPUs as consolidation sees them.

    Attributes:
        agent_id: the agent.
        free: GPU ids free now (neither used nor draining nor shared).
        total: GPUs the agent has.
        hostname: for reasons (defaults to the id).
        cpus_free, mem_free: CPUs and MiB no live task holds (``None``: not known, not
            checked).
    """

    agent_id: str
    free: frozenset[int]
    total: int
    hostname: str = ""
    cpus_free: float | None = None
    mem_free: float | None = None

    @property
    def name(self) -> str:
        """The hostname, else the id."""
        return self.hostname or self.agent_id


@dataclass(frozen=True, kw_only=True)
class RunningJob:
    """A running single-node whole-GPU job that consolidation may move.

    Attributes:
        job_id: the job.
        agent_id: where it runs.
        gpu_ids: the GPUs it holds there.
        priority: its priority (never above the waiting job's is moved).
        lost_gpu_h: GPU-hours a move would lose (its GPUs times time since start and grace).
        preemptible: whether it may be moved at all (a batch job that checkpoints on
            SIGTERM; not an environment, not a gang, not a share, not moved recently).
        allowed: the agents it may run on (GPU model, pool, CPUs, memory); ``None``: any.
        cpus, mem_mib: what its task holds (its executor's share included).
    """

    job_id: str
    agent_id: str
    gpu_ids: tuple[int, ...]
    priority: int = 0
    lost_gpu_h: float = 0.0
    preemptible: bool = True
    allowed: frozenset[str] | None = None
    cpus: float = 0.0
    mem_mib: float = 0.0

    @property
    def gpus(self) -> int:
        """GPUs it holds."""
        return len(self.gpu_ids)


@dataclass(frozen=True, kw_only=True)
class ConsolidationRequest:
    """A waiting job fragmentation denies, and the cluster around it.

    Attributes:
        job_id: the waiting job.
        gpus: the whole GPUs it needs on one agent.
        priority: its priority.
        agents: every agent that may take GPUs (the waiting job's and the moved jobs').
        running: the jobs running on those agents.
        moves_left: the most jobs this plan may move (the hourly budget's remainder).
        choose: how a set is picked on an agent (topology; default :func:`any_ids`).
        cpus, mem_mib: what the waiting job's task needs (its executor's share included).
    """

    job_id: str
    gpus: int
    priority: int
    agents: Sequence[AgentGpus]
    running: Sequence[RunningJob]
    moves_left: int
    choose: Chooser = any_ids
    cpus: float = 0.0
    mem_mib: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Move:
    """One job stopped on ``from_agent`` that has a place on ``to_agent`` (``gpu_ids``)."""

    job_id: str
    from_agent: str
    to_agent: str
    gpu_ids: tuple[int, ...]
    lost_gpu_h: float


@dataclass(frozen=True, kw_only=True)
class ConsolidationPlan:
    """The moves that give the waiting job ``gpu_ids`` on ``agent_id``.

    Attributes:
        job_id: the waiting job.
        agent_id: the agent cleared for it; ``hostname`` names it.
        gpu_ids: its set there once the moved jobs are gone.
        moves: the jobs to stop, each with a place elsewhere (all at once).
    """

    job_id: str
    agent_id: str
    hostname: str
    gpu_ids: tuple[int, ...]
    moves: tuple[Move, ...]

    @property
    def lost_gpu_h(self) -> float:
        """GPU-hours the moves lose (an upper bound; see the module docstring)."""
        return sum(m.lost_gpu_h for m in self.moves)

    def reason(self) -> str:
        """What a moved job is told: ``moved to make room for job j9 (consolidation; 8 GPUs
        on one node, h1)``."""
        return (
            f"moved to make room for job {self.job_id} (consolidation; "
            f"{len(self.gpu_ids)} GPUs on one node, {self.hostname})"
        )


@dataclass(frozen=True)
class NoPlan:
    """Why nothing is moved (kept as a note; the job keeps its placement reason)."""

    reason: str


def plan_consolidation(request: ConsolidationRequest) -> ConsolidationPlan | NoPlan:
    """The cheapest set of moves that gives the waiting job a whole set on one agent.

    Returns:
        a plan whose every moved job has a place elsewhere at once (packed jointly), or
        :class:`NoPlan` with the reason: the set fits already, too few GPUs are free in the
        whole cluster (no move makes room then), no budget, or no agent can be cleared with
        movable jobs that all find a place.
    """
    need = request.gpus
    agents = {a.agent_id: a for a in request.agents}
    if request.moves_left <= 0:
        return NoPlan("no consolidation moves left this hour")
    if any(a.total >= need and request.choose(a.agent_id, a.free, need) for a in agents.values()):
        return NoPlan(f"{need} GPUs fit on one agent already")
    free_total = sum(len(a.free) for a in agents.values())
    if free_total < need:
        return NoPlan(f"only {free_total} GPUs free in the cluster: moving jobs frees none")
    movable: dict[str, list[RunningJob]] = {}
    for job in request.running:
        if job.preemptible and job.priority <= request.priority and job.agent_id in agents:
            movable.setdefault(job.agent_id, []).append(job)
    best: tuple[tuple[float, int, str], ConsolidationPlan] | None = None
    for agent in sorted(agents.values(), key=lambda a: a.agent_id):
        if agent.total < need:
            continue
        candidates = sorted(movable.get(agent.agent_id, ()), key=_cost)
        found = _clear_agent(request, agent, candidates[:MAX_CANDIDATES_PER_AGENT], agents)
        if found is None:
            continue
        key = (round(found.lost_gpu_h, 9), len(found.moves), agent.agent_id)
        if best is None or key < best[0]:
            best = (key, found)
    if best is None:
        return NoPlan(
            f"no agent can be cleared for {need} GPUs by moving at most "
            f"{request.moves_left} preemptible jobs that all find a place elsewhere"
        )
    return best[1]


def _cost(job: RunningJob) -> tuple[float, int, str]:
    return (job.lost_gpu_h, job.gpus, job.job_id)


def _clear_agent(
    request: ConsolidationRequest,
    agent: AgentGpus,
    candidates: list[RunningJob],
    agents: dict[str, AgentGpus],
) -> ConsolidationPlan | None:
    """The cheapest subset of ``candidates`` whose leaving gives ``agent`` the set and whose
    members all fit on the other agents together."""
    deficit = request.gpus - len(agent.free)
    others = [a for a in agents.values() if a.agent_id != agent.agent_id]
    subsets = []
    for size in range(1, min(request.moves_left, len(candidates)) + 1):
        for subset in combinations(candidates, size):
            if sum(j.gpus for j in subset) >= deficit:
                subsets.append(subset)
    subsets.sort(key=lambda s: (sum(j.lost_gpu_h for j in s), len(s), [j.job_id for j in s]))
    for subset in subsets:
        freed = agent.free.union(*(j.gpu_ids for j in subset))
        target = request.choose(agent.agent_id, frozenset(freed), request.gpus)
        if target is None or not _room_left(agent, subset, request):
            continue
        moves = _pack(subset, others, request.choose)
        if moves is not None:
            return ConsolidationPlan(
                job_id=request.job_id,
                agent_id=agent.agent_id,
                hostname=agent.name,
                gpu_ids=tuple(target),
                moves=tuple(moves),
            )
    return None


#: an agent's free ``(CPUs, MiB)`` as a plan sees them (``None``: not known, not checked)
Room = tuple[float | None, float | None]


def _room_left(
    agent: AgentGpus, subset: Sequence[RunningJob], request: ConsolidationRequest
) -> bool:
    """Whether ``agent``, once ``subset`` is gone, has the waiting job's CPUs and memory."""
    cpus = None if agent.cpus_free is None else agent.cpus_free + sum(j.cpus for j in subset)
    mem = None if agent.mem_free is None else agent.mem_free + sum(j.mem_mib for j in subset)
    return _fits((request.cpus, request.mem_mib), (cpus, mem))


def _fits(want: tuple[float, float], room: Room) -> bool:
    cpus, mem = room
    return (cpus is None or want[0] <= cpus + 1e-9) and (mem is None or want[1] <= mem + 1e-9)


def _less(room: Room, job: RunningJob) -> Room:
    cpus, mem = room
    return (None if cpus is None else cpus - job.cpus, None if mem is None else mem - job.mem_mib)


def _pack(
    jobs: Iterable[RunningJob], others: list[AgentGpus], choose: Chooser
) -> list[Move] | None:
    """Places for all ``jobs`` at once on ``others``, or ``None`` when one has none.

    Largest job first, each onto the agent with the fewest free GPUs that still fits it
    (best fit keeps the large holes whole) and has its CPUs and memory (where known); what
    one job is given is gone for the next.
    First-fit decreasing may miss a packing that exists; it never claims one that does not.
    """
    free = {a.agent_id: a.free for a in others}
    room: dict[str, Room] = {a.agent_id: (a.cpus_free, a.mem_free) for a in others}
    moves = []
    for job in sorted(jobs, key=lambda j: (-j.gpus, j.job_id)):
        spots = sorted(free.items(), key=lambda kv: (len(kv[1]), kv[0]))
        for agent_id, ids in spots:
            if job.allowed is not None and agent_id not in job.allowed:
                continue
            if not _fits((job.cpus, job.mem_mib), room[agent_id]):
                continue
            chosen = choose(agent_id, ids, job.gpus) if len(ids) >= job.gpus else None
            if chosen is not None:
                free[agent_id] = ids - frozenset(chosen)
                room[agent_id] = _less(room[agent_id], job)
                moves.append(
                    Move(
                        job_id=job.job_id,
                        from_agent=job.agent_id,
                        to_agent=agent_id,
                        gpu_ids=chosen,
                        lost_gpu_h=job.lost_gpu_h,
                    )
                )
                break
        else:
            return None
    return moves


@dataclass
class MoveBudget:
    """Consolidation moves allowed per rolling hour (``per_hour`` 0: consolidation off).

    Attributes:
        per_hour: jobs that may be moved in any 3,600 s window.
        moved: when each recent move happened.
    """

    per_hour: int = 0
    moved: deque[float] = field(default_factory=deque)

    def left(self, now: float) -> int:
        """Moves still allowed now."""
        while self.moved and now - self.moved[0] >= 3600.0:
            self.moved.popleft()
        return max(0, self.per_hour - len(self.moved))

    def spend(self, now: float, moves: int) -> None:
        """Count ``moves`` made now."""
        self.moved.extend([now] * moves)
