"""The event loop: a virtual clock, the simulated master, and DLC's scheduler core.

Every decision is the core's: jobs are submitted with :meth:`SchedulerCore.submit`, offers
go through :meth:`SchedulerCore.on_offers` (queue, quotas, borrowing, preemption,
reservations, share placement), task updates through :meth:`SchedulerCore.on_status`, and
its kills are carried out after a grace period. The engine only plays Mesos and the
workload: it launches what the core accepts (refusing what does not fit, as the master
does), ends tasks when their work is done, and records what happened for the metrics.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlc.errors import DlcError
from dlc.mesos.codec import MesosCodec
from dlc.scheduler.core.consolidation import MOVED
from dlc.scheduler.core.facade import Actions, CoreConfig, SchedulerCore
from dlc.scheduler.core.ports import RoundSink
from dlc.scheduler.jobs.job import JobSpec, JobState, job_id_of_task
from dlc.scheduler.tenancy.policy import Policy
from dlc.sim.cluster_sim.master import SimAgentSpec, SimMaster
from dlc.store.memory import MemoryJobStore


@dataclass
class WorkItem:
    """One unit of submitted work.

    Attributes:
        key: a stable name (``s-u03-0017``), the same under every policy for a seed.
        kind: ``session`` or ``training``.
        user, group: who submits it.
        submit_at: virtual seconds.
        spec: what is asked of the core.
        work_s: seconds of work (a session: its length; training: what is left).
        sm: modelled SM activity while it runs (training) or its duty cycle (session).
        mem_mib: modelled memory footprint on its GPU (shares; whole GPUs: the GPU).
        patience_s: a queued item is withdrawn after this long (``None``: never).
    """

    key: str
    kind: str
    user: str
    group: str
    submit_at: float
    spec: JobSpec
    work_s: float
    sm: float = 0.0
    mem_mib: int = 0
    patience_s: float | None = None


@dataclass
class JobRecord:
    """What happened to one item."""

    item: WorkItem
    job_id: str | None = None
    submitted: float = 0.0
    first_start: float | None = None
    attempt_start: float | None = None
    ended: float | None = None
    state: str = "queued"
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    #: of ``preemptions`` and ``lost_gpu_s``: those of consolidation's moves
    moves: int = 0
    moved_lost_gpu_s: float = 0.0
    #: the current attempt is being stopped by a consolidation move
    moving: bool = False
    error: str = ""
    #: the work asked at submission (an isolated run's length)
    work0: float = 0.0


@dataclass
class Interval:
    """One GPU (or part of one) held by one task from ``start`` to ``end``."""

    key: str
    agent_id: str
    gpu: int
    mib: int
    start: float
    end: float | None = None


@dataclass(frozen=True)
class EngineParams:
    """Timing assumptions of the simulated Mesos side (all parameters of the scenario).

    Attributes:
        offer_delay_s: from a change (arrival, task end) to the next offer round (the
            master's allocation interval).
        tick_s: period of the core's housekeeping (reclaim kills, reservations).
        start_s: from ACCEPT to TASK_RUNNING (image pull and container start).
        kill_s: from a kill to TASK_KILLED (the grace period the executor gives).
        checkpoint_loss_s: work a preempted training job loses (since its last checkpoint).
    """

    offer_delay_s: float = 1.0
    tick_s: float = 300.0
    start_s: float = 5.0
    kill_s: float = 30.0
    checkpoint_loss_s: float = 300.0


@dataclass
class SimResult:
    """Everything the metrics read."""

    until: float
    records: dict[str, JobRecord]
    intervals: list[Interval]
    agents: list[SimAgentSpec]
    rounds: int = 0
    round_s: float = 0.0
    placement_s: float = 0.0
    refused: int = 0
    problems: list[str] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    #: ``(jobs moved, GPU-hours lost)`` by the core's consolidation (an upper bound)
    consolidation: tuple[int, float] = (0, 0.0)


#: an item finished: ``(item, now) -> new items`` (a closed loop resubmits)
OnDone = Callable[[WorkItem, float], list[WorkItem]]


class Engine:
    """One simulation run.

    Args:
        agents: the simulated agents.
        config: the core's settings (allocator policy ...).
        tenancy: groups, quotas and limits (``None``: the plain priority queue).
        params: timing assumptions.
        on_done: called when an item finishes, may return items to submit later.
        check_every: run the master's invariant check every N rounds (0: only at the end).
        metrics: the core's round sink (the scale benchmark times placement with it).
    """

    def __init__(
        self,
        agents: list[SimAgentSpec],
        config: CoreConfig,
        tenancy: Policy | None = None,
        params: EngineParams | None = None,
        on_done: OnDone | None = None,
        check_every: int = 0,
        metrics: RoundSink | None = None,
    ):
        self.now = 0.0
        self.params = params or EngineParams()
        self.master = SimMaster(agents)
        # ids in submit order: a batch submitted at one virtual instant keeps its order
        self.store = MemoryJobStore(clock=self.clock, sequential_ids=True)
        self.core = SchedulerCore(
            self.store, config, resolver=lambda spec: (spec.image or "sim/job:1", None),
            clock=self.clock, metrics=metrics, codec=MesosCodec(),
        )  # fmt: skip
        self.core.update_agents(self.master.slaves())
        if tenancy is not None:
            self.core.set_tenancy(tenancy)
        self._on_done = on_done
        self._check_every = check_every
        self._events: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self._round_due = False
        self._killing: set[str] = set()
        self.records: dict[str, JobRecord] = {}
        self._by_job: dict[str, JobRecord] = {}
        self._open: dict[str, list[Interval]] = {}
        self.intervals: list[Interval] = []
        self.result = SimResult(0.0, self.records, self.intervals, agents)

    def clock(self) -> float:
        """The virtual time (seconds): what the core and the store read."""
        return self.now

    # -- the event queue ------------------------------------------------------

    def _at(self, when: float, kind: str, data: object = None) -> None:
        self._seq += 1
        heapq.heappush(self._events, (max(when, self.now), self._seq, kind, data))

    def add(self, item: WorkItem) -> None:
        """Submit ``item`` at its ``submit_at``."""
        self._at(item.submit_at, "submit", item)

    def _want_round(self) -> None:
        if not self._round_due:
            self._round_due = True
            self._at(self.now + self.params.offer_delay_s, "round")

    def run(self, until: float, progress: Callable[[float], None] | None = None) -> SimResult:
        """Play events up to ``until`` virtual seconds; return what happened."""
        self._at(0.0, "tick")
        while self._events and self._events[0][0] <= until:
            when, _, kind, data = heapq.heappop(self._events)
            if when < self.now:
                self.result.problems.append(f"clock went back from {self.now} to {when}")
            self.now = when
            getattr(self, f"_on_{kind}")(data)
            if progress is not None:
                progress(self.now)
        self.now = until
        self.result.consolidation = self.core.consolidation_totals()
        return self._finish(until)

    # -- events ---------------------------------------------------------------

    def _on_submit(self, item: WorkItem) -> None:
        record = JobRecord(item, submitted=self.now, work0=item.work_s)
        self.records[item.key] = record
        try:
            job = self.core.submit(item.user, item.spec, max_priority=None, admin=True)
        except DlcError as exc:
            record.state, record.error = "failed", str(exc)
            return
        record.job_id = job.job_id
        self._by_job[job.job_id] = record
        if item.patience_s is not None:
            self._at(self.now + item.patience_s, "patience", record)
        self._want_round()

    def submit_now(self, item: WorkItem) -> None:
        """Submit ``item`` at the current virtual time (a replay that runs its own rounds)."""
        self._on_submit(item)

    def offer_round_now(self) -> tuple[float, float]:
        """One offer round now, its launches carried out, and no virtual time passing: for a
        replay whose work never ends (``openb_core``), so the events it queues are dropped.

        Returns:
            ``(seconds building the offers, seconds in the core's round)``.
        """
        self._round_due = False
        self._events.clear()
        t0 = time.perf_counter()
        offers = self.master.offers()
        t1 = time.perf_counter()
        actions = self.core.on_offers(offers)
        t2 = time.perf_counter()
        self._apply(actions)
        self._events.clear()
        return t1 - t0, t2 - t1

    def _on_patience(self, record: JobRecord) -> None:
        if record.first_start is None and record.state == "queued" and record.job_id:
            job, actions = self.core.kill(record.job_id, record.item.user, admin=True)
            if job.state is JobState.KILLED:
                record.state, record.ended = "withdrawn", self.now
            self._apply(actions)

    def _on_tick(self, _data: object) -> None:
        self._apply(self.core.pending_kills())
        if self.core.has_queued():
            self._want_round()
        self._at(self.now + self.params.tick_s, "tick")

    def _on_round(self, _data: object) -> None:
        self._round_due = False
        started = time.perf_counter()
        offers = self.master.offers()
        actions = self.core.on_offers(offers)
        self.result.round_s += time.perf_counter() - started
        self.result.rounds += 1
        self.observe_round(actions)
        self._apply(actions)
        if self._check_every and self.result.rounds % self._check_every == 0:
            self.result.problems += self.master.check()

    def observe_round(self, actions: Actions) -> None:
        """Told of each round's decisions before they are carried out (``self.master.free``
        is still what the round was offered); a subclass notes what it measures."""

    def _on_running(self, task_id: str) -> None:
        task = self.master.tasks.get(task_id)
        if task is not None:
            self._status(task_id, task.agent_id, "TASK_RUNNING")

    def _on_end(self, data: tuple[str, str]) -> None:
        task_id, state = data
        task = self.master.tasks.get(task_id)
        if task is None:
            return  # ended already (a kill after the finish, or the reverse)
        record = self._by_job.get((job_id_of_task(task_id) or ("", 0))[0])  # "": not DLC's
        if state == "TASK_KILLED" and record is not None:
            self._preempted(record)
        self.master.release(task_id)
        self._killing.discard(task_id)
        for interval in self._open.pop(task_id, []):
            interval.end = self.now
            self.intervals.append(interval)
        self._status(task_id, task.agent_id, state)
        if record is not None:
            self._settle(record)
        self._want_round()

    # -- carrying out the core's actions ----------------------------------------

    def _status(self, task_id: str, agent_id: str, state: str) -> None:
        status = {
            "task_id": {"value": task_id},
            "agent_id": {"value": agent_id},
            "state": state,
            "source": "SOURCE_EXECUTOR",
        }
        self._apply(self.core.on_status(status))

    def _apply(self, actions: Actions) -> None:
        for offer_ids, infos in actions.accepts:
            for info, (task, why) in zip(infos, self.master.launch(offer_ids, infos), strict=True):
                task_id = info["task_id"]["value"]
                agent_id = info.get("agent_id", {}).get("value", "")
                if task is None:
                    self._at(self.now, "refused", (task_id, agent_id, why))
                    continue
                self._started(task_id, task)
        for task_id, _agent in actions.kills:
            if task_id in self.master.tasks and task_id not in self._killing:
                self._killing.add(task_id)
                self._note_move(task_id)
                self._at(self.now + self.params.kill_s, "end", (task_id, "TASK_KILLED"))
        if actions.revive:
            self._want_round()

    def _on_refused(self, data: tuple[str, str, str]) -> None:
        task_id, agent_id, why = data
        status = {"task_id": {"value": task_id}, "agent_id": {"value": agent_id},
                  "state": "TASK_ERROR", "source": "SOURCE_MASTER", "message": why}  # fmt: skip
        self._apply(self.core.on_status(status))

    def _started(self, task_id: str, task) -> None:
        record = self._by_job.get((job_id_of_task(task_id) or ("", 0))[0])  # "": not DLC's
        if record is None:
            return
        if record.first_start is None:
            record.first_start = self.now
        if record.attempt_start is None:
            record.attempt_start = self.now
        record.state = "running"
        self._open[task_id] = [
            Interval(record.item.key, task.agent_id, gpu, mib, self.now)
            for gpu, mib in sorted(task.gpu_mib.items())
        ]
        start = self.params.start_s
        self._at(self.now + start, "running", task_id)
        self._at(self.now + start + record.item.work_s, "end", (task_id, "TASK_FINISHED"))

    def _note_move(self, task_id: str) -> None:
        """A kill of a job consolidation moves: its loss is counted apart as well."""
        record = self._by_job.get((job_id_of_task(task_id) or ("", 0))[0])  # "": not DLC's
        if record is None or record.attempt_start is None or record.moving:
            return
        assert record.job_id is not None  # submitted: it has a task
        job = self.core.visible_job(record.job_id, record.item.user, admin=True)
        record.moving = MOVED in job.message

    def _preempted(self, record: JobRecord) -> None:
        """The first killed task of an attempt: charge the work lost, keep the rest."""
        if record.attempt_start is None:
            return
        ran = max(0.0, self.now - record.attempt_start - self.params.start_s)
        lost = min(ran, self.params.checkpoint_loss_s)
        item = record.item
        item.work_s = max(1.0, item.work_s - (ran - lost))
        record.preemptions += 1
        charged = (lost + self.params.start_s) * _gpus(item.spec)
        record.lost_gpu_s += charged
        if record.moving:
            record.moves += 1
            record.moved_lost_gpu_s += charged
        record.attempt_start, record.moving = None, False

    def _settle(self, record: JobRecord) -> None:
        """After an update: note the job's state; a finished item may bring the next."""
        assert record.job_id is not None  # submitted before any update
        job = self.core.visible_job(record.job_id, record.item.user, admin=True)
        if job.state is JobState.QUEUED:
            record.state, record.attempt_start = "queued", None
        elif job.state.terminal and record.ended is None:
            record.ended = self.now
            record.state = job.state.value.lower()
            if job.state is JobState.FINISHED and self._on_done is not None:
                for item in self._on_done(record.item, self.now):
                    self.add(item)

    def _finish(self, until: float) -> SimResult:
        for intervals in self._open.values():
            for interval in intervals:
                interval.end = until
                self.intervals.append(interval)
        self._open.clear()
        result = self.result
        result.until = until
        result.refused = self.master.refused
        result.problems += self.master.check()
        states: dict[str, int] = {}
        for record in self.records.values():
            states[record.state] = states.get(record.state, 0) + 1
        result.states = states
        return result


def _gpus(spec: JobSpec) -> float:
    return float(spec.gpus * spec.nodes) if not spec.is_share else spec.gpu_fraction or 0.0
