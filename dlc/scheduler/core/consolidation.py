"""The core's consolidation part: move preemptible jobs for a job fragmentation denies.

:class:`Consolidation`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). The pure planning is
:func:`~dlc.scheduler.placement.consolidation.plan_consolidation`; this part feeds it the core's
agents, free GPUs and running jobs, and carries a plan out through the preemption path (SIGTERM, the
policy's grace, queued again without a retry) and the queue's reservation (the cleared agent is
held for the waiting job, so the moved jobs and the backfill cannot take it back). Off unless
``CoreConfig.consolidation_moves_per_hour`` is above 0 (``dlc scheduler
--consolidation-moves-per-hour N``; docs/scheduler.md).

Moves respect the priority classes' protection (``--protect``): a job inside its protected
runtime is not moved, and a moved job's eviction waits its class's delay.

Which waiting job: a single-node whole-GPU job the queue has passed over long enough to
reserve agents (``--max-skips`` rounds), the same moment the reservation starts; one plan
at a time, and none while an earlier plan's moved jobs are still stopping.
"""

from __future__ import annotations

from dataclasses import replace

from dlc.scheduler.core.state import CoreState, task_ended
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.jobs.job import Job, JobState
from dlc.scheduler.placement.consolidation import (
    AgentGpus,
    ConsolidationPlan,
    ConsolidationRequest,
    MoveBudget,
    NoPlan,
    RunningJob,
    plan_consolidation,
)
from dlc.scheduler.placement.inventory import AgentTotals
from dlc.scheduler.placement.model import OfferView
from dlc.scheduler.tenancy.preemption import Preemption, protected_reason
from dlc.scheduler.tenancy.quotas import QueuePlan, agent_pool

#: seconds before a job whose planning found no plan is planned for again (a planning looks
#: at every running job; a waiting job is passed over every round)
RETRY_S = 60.0

#: in the reason of a job consolidation moved (the simulator tells moves from reclaims by it)
MOVED = "a place is free on"


#: the budget, plans under way (job id -> plan), when jobs were moved and may plan again
_State = tuple[MoveBudget, dict[str, ConsolidationPlan], dict[str, float], dict[str, float]]


class Consolidation:
    """Consolidation hooks of the core: plan for a fragmented waiting job, move, hold.

    Args:
        state: the core's shared state.
        tenancy_ops: the preemption path the moves go through.
    """

    def __init__(self, state: CoreState, tenancy_ops: TenancyOps) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops
        #: the budget and plans (:meth:`_consolidation`), made on first use
        self._plans: _State | None = None
        #: jobs moved and the GPU-hours they lost (:meth:`totals`)
        self._moved: tuple[int, float] = (0, 0.0)

    def _consolidation(self) -> _State:
        """The budget, the plans under way (waiting job id -> plan), when each job was last
        moved, and when a job without a plan may be planned for again (made on first use, so
        the core's construction stays as it was)."""
        plans = self._plans
        if plans is None:
            budget = MoveBudget(self.state.config.consolidation_moves_per_hour)
            plans = (budget, {}, {}, {})
            self._plans = plans
        return plans

    def totals(self) -> tuple[int, float]:
        """``(jobs moved, GPU-hours they lost)`` since this core started."""
        return self._moved

    def consolidate(
        self, now: float, queue: list[Job], waiting: dict[str, str], views: list[OfferView]
    ) -> list[tuple[str, str]]:
        """Plan and carry out at most one consolidation this round.

        Args:
            queue: the round's runnable jobs in queue order.
            waiting: job id -> why it waits (placeable jobs only).
            views: the round's usable offers.

        Returns:
            the kills of the moved jobs' tasks.
        """
        state = self.state
        if state.config.consolidation_moves_per_hour <= 0:
            return []
        budget, under_way, _, retry = self._consolidation()
        for job_id in [j for j in retry if j not in state.queued]:
            del retry[job_id]
        for job_id in list(under_way):
            if job_id not in state.queued or not self._holds(job_id):
                del under_way[job_id]  # placed, gone, or its hold ended: it may plan again
        if under_way or budget.left(now) <= 0:
            return []
        active = state.reservations.active
        for job in queue:
            if not self._wants_consolidation(job, waiting):
                continue
            if active is not None and active.job_id != job.job_id:
                return []  # one hold at a time: the freed set could not be kept for it
            if now < retry.get(job.job_id, now - 1):
                continue  # nothing found for it a moment ago
            plan = plan_consolidation(self._consolidation_request(now, job, views))
            if isinstance(plan, NoPlan):
                retry[job.job_id] = now + RETRY_S
                continue
            return self._move(now, job, plan)
        return []

    def _holds(self, job_id: str) -> bool:
        active = self.state.reservations.active
        return active is not None and active.job_id == job_id

    def _wants_consolidation(self, job: Job, waiting: dict[str, str]) -> bool:
        """A waiting single-node whole-GPU job passed over long enough to reserve."""
        spec = job.spec
        if job.job_id not in waiting or spec.is_share or spec.nodes != 1 or spec.gpus < 1:
            return False
        return self._holds(job.job_id) or (
            self.state.reservations.skips(job.job_id) >= self.state.reservations.reserve_after
        )

    def _consolidation_request(
        self, now: float, job: Job, views: list[OfferView]
    ) -> ConsolidationRequest:
        """The planner's view: agents able to run the job, free GPUs (and CPUs and memory
        where the agents' totals are known), movable jobs."""
        state = self.state
        free = state.free_gpus(views)
        # offers were made before this round's launches: take out every GPU a live task holds
        # (whole, or a share of it), including the ones launched a moment ago; and count the
        # CPUs and memory live tasks hold (a CPU-only job holds no GPU but may hold them all)
        shared: dict[str, set[int]] = {}
        used: dict[str, tuple[float, float]] = {}
        for other in state.active.values():
            cpus, mem = self._task_size(other)
            for task in other.tasks:
                if not task_ended(task):
                    taken = shared.setdefault(task.agent_id, set())
                    taken.update(task.gpu_ids)
                    if task.share_gpu is not None:
                        taken.add(task.share_gpu)
                    was = used.get(task.agent_id, (0.0, 0.0))
                    used[task.agent_id] = (was[0] + cpus, was[1] + mem)
        held = state.reservations.held()
        agents = [
            _agent_view(a, free.get(a.agent_id, frozenset()) - shared.get(a.agent_id, set()),
                        used.get(a.agent_id, (0.0, 0.0)))
            for a in state.inventory.agents()
            if held.get(a.agent_id, job.job_id) == job.job_id
        ]  # fmt: skip
        able = self._able(job)
        # the waiting job's set may only come from agents able to run it
        agents = [a if a.agent_id in able else _no_room(a) for a in agents]
        running = [r for r in (self._movable(now, j, job) for j in state.active.values()) if r]
        return ConsolidationRequest(
            job_id=job.job_id,
            gpus=job.spec.gpus,
            priority=job.spec.priority,
            agents=agents,
            running=running,
            moves_left=self._consolidation()[0].left(now),
            cpus=self._task_size(job)[0],
            mem_mib=self._task_size(job)[1],
        )

    def _task_size(self, job: Job) -> tuple[float, float]:
        """``(CPUs, MiB)`` one task of ``job`` holds, its executor's share included."""
        placement = self.state.config.placement
        spec = job.spec
        return spec.cpus + placement.executor_cpus, spec.mem_mib + placement.executor_mem_mib

    def _movable(self, now: float, job: Job, waiting: Job) -> RunningJob | None:
        """The job as the planner sees it, or ``None`` when it is no candidate at all.

        Movable: a running batch job (environments hold a user's session, and do not
        checkpoint), on one node with whole GPUs, of a priority not above the waiting job's,
        and not moved in the last hour (a job is not moved twice for the same hole)."""
        state = self.state
        spec = job.spec
        if job.state is not JobState.RUNNING or job.kill_requested or len(job.tasks) != 1:
            return None
        if spec.nodes_max is not None:  # an elastic gang gives back members instead
            return None
        task = job.tasks[0]
        if spec.is_share or spec.interactive or task_ended(task) or not task.gpu_ids:
            return None
        moved_at = self._consolidation()[2].get(job.job_id)
        recently = moved_at is not None and now - moved_at < 3600.0
        ran_s = max(0.0, now - state.started.get(job.job_id, now))
        if state.config.protection.protected(job, ran_s):
            return None  # its class's protected runtime (--protect) holds for moves too
        grace = state.tenancy.grace_s if state.tenancy.enabled else 0.0
        ran = ran_s + grace
        return RunningJob(
            job_id=job.job_id,
            agent_id=task.agent_id,
            gpu_ids=tuple(task.gpu_ids),
            priority=spec.priority,
            lost_gpu_h=len(task.gpu_ids) * ran / 3600.0,
            preemptible=not recently,
            allowed=self._able(job),
            cpus=self._task_size(job)[0],
            mem_mib=self._task_size(job)[1],
        )

    def _able(self, job: Job) -> frozenset[str]:
        """Agents that could run ``job`` when idle and are in its pool (kept per shape until
        the agents change: a planning asks for every running job)."""
        state = self.state
        spec = job.spec
        pools = state.tenancy.enabled or spec.pool is not None  # as split_by_pool decides
        pool = state.groups().key(job)[1] if pools else None
        key = (spec.gpus, spec.gpu_model, spec.is_share, spec.gpu_memory, spec.cuda_version,
               spec.cpus, spec.mem_mib, spec.disk_mib, pool)  # fmt: skip
        cache: dict[tuple[object, ...], frozenset[str]] = state.per_inventory(
            "consolidation_able", lambda agents: {}
        )
        if key not in cache:
            cache[key] = frozenset(
                a.agent_id for a in state.inventory.able_agents(spec)
                if pool is None or agent_pool(a.attributes) == pool
            )  # fmt: skip
        return cache[key]

    def _move(self, now: float, job: Job, plan: ConsolidationPlan) -> list[tuple[str, str]]:
        """Stop the plan's jobs (preemption path) and hold the cleared agent for ``job``."""
        state = self.state
        budget, under_way, moved_at, _ = self._consolidation()
        why = plan.reason()
        victims = []
        for move in plan.moves:
            lost = f"{move.lost_gpu_h:.2f} GPU-hours at most"
            text = f"preempted: {why}; {MOVED} {self._host(move.to_agent)} ({lost})"
            victim = state.active[move.job_id]
            protection = state.config.protection.of(victim)
            ran_s = max(0.0, now - state.started.get(move.job_id, now))
            text = protected_reason(text, ran_s, protection)
            victims.append(Preemption(move.job_id, text, protection.evict_delay_s))
            moved_at[move.job_id] = now
        for job_id in [j for j, at in moved_at.items() if now - at >= 3600.0]:
            del moved_at[job_id]  # only the last hour's moves matter
        kills = self.tenancy_ops.preempt(QueuePlan(preemptions=victims))
        budget.spend(now, len(plan.moves))
        under_way[job.job_id] = plan
        moved, lost_h = self.totals()
        self._moved = (moved + len(plan.moves), lost_h + plan.lost_gpu_h)
        sink = getattr(state.metrics, "consolidation_moved", None)
        if sink is not None:
            sink(len(plan.moves), plan.lost_gpu_h)
        state.reservations.reserve(job.job_id, [plan.agent_id], now)
        names = ", ".join(
            f"{m.job_id} ({self._host(m.from_agent)} -> {self._host(m.to_agent)})"
            for m in plan.moves
        )
        event = (
            f"consolidation: moving {len(plan.moves)} job(s) to make room for "
            f"{len(plan.gpu_ids)} GPUs on {plan.hostname}: {names}; "
            f"{plan.lost_gpu_h:.2f} GPU-hours lost at most; {plan.hostname} held for this job"
        )
        state.save(job, event=event)
        return kills

    def _host(self, agent_id: str) -> str:
        agent = self.state.inventory.get(agent_id)
        return (agent.hostname if agent is not None else "") or agent_id


def _no_room(agent: AgentGpus) -> AgentGpus:
    """``agent`` as a destination only (total 0: never cleared for the waiting job)."""
    return replace(agent, total=0)


def _agent_view(agent: AgentTotals, free: frozenset[int], used: tuple[float, float]) -> AgentGpus:
    """``agent`` as the planner sees it: its free GPUs, and its totals less the ``(CPUs,
    MiB)`` live tasks hold where the totals are the master's (lower bounds from offers are
    not checked)."""
    exact = agent.exact
    return AgentGpus(
        agent_id=agent.agent_id, free=frozenset(free), total=len(agent.gpu_ids),
        hostname=agent.hostname, cpus_free=agent.cpus - used[0] if exact else None,
        mem_free=agent.mem_mib - used[1] if exact else None,
    )  # fmt: skip
