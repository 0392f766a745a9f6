"""The core's status handling: task updates into job states, retries, refusals, restarts.

:class:`StatusUpdates`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). A task that ended without proof its container
stopped keeps its GPUs out of offers (:mod:`~dlc.scheduler.tasks.draining`); a launch the master
never saw, or whose resources it refused (:mod:`~dlc.scheduler.tasks.refusals`), queues the job
again without using a retry; ``TASK_UNREACHABLE`` is not an end. Kills are re-sent and tasks
reconciled after every (re)registration.

Updates come in as the engine sends them and are read through the core's codec
(:meth:`~dlc.scheduler.core.ports.EngineCodec.decode_status`; for Mesos :mod:`dlc.mesos.status`)
into a :class:`~dlc.scheduler.tasks.states.TaskUpdate`; the reconciliation request is the codec's
too (:meth:`~dlc.scheduler.core.ports.EngineCodec.reconcile_request`).

Status updates are not trusted for more than a task's state (red-team finding 2026-11-26,
forged updates): an update is applied only when it comes from the agent the task was placed on
and, when it names one, from the executor DLC launched it with (:func:`foreign_origin`); nothing
path-like is taken from it (the sandbox comes from the agent's layout and DLC's own ids:
:mod:`dlc.api.logs`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from dlc.scheduler.core.config import Actions
from dlc.scheduler.core.elastic import Elastic
from dlc.scheduler.core.state import _STOPPED, _TERMINAL_TASK, CoreState, task_ended
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.jobs.job import (
    Job,
    JobState,
    TaskPlacement,
    job_id_of_task,
    job_state_from_task_state,
)
from dlc.scheduler.tasks.draining import confirms_gone, may_still_run
from dlc.scheduler.tasks.infra_loss import LostAttempts, lost_by_infrastructure, may_relaunch_free
from dlc.scheduler.tasks.refusals import refused_resources
from dlc.scheduler.tasks.states import DOUBLE_ASSIGNMENT_PREFIX, TaskUpdate

#: reasons meaning a launch never reached an agent: the job may run again for free
#: (only with a terminal state while DLC still saw the task as staging: a task the
#: master knew answers reconciliation with its real state, never with these)
_NEVER_LAUNCHED = {
    "REASON_RECONCILIATION",
    "REASON_INVALID_OFFERS",
    # "Task launched during agent restart": the recovering agent dropped a queued launch
    "REASON_SLAVE_RESTARTED",
    "REASON_AGENT_RESTARTED",
}

#: not an end: the agent is partitioned away; the task may well still run
_UNREACHABLE = "TASK_UNREACHABLE"

#: how many ended tasks' placements are remembered (to drain GPUs of late stale updates)
_PREVIOUS_KEPT = 4096
#: how many task ids whose foreign updates were logged are remembered (one line per task)
_FOREIGN_LOGGED_KEPT = 4096

log = logging.getLogger(__name__)


def _job_state(job: Job) -> JobState:
    """Fold the task states of a (possibly multi-node) job into one job state
    (an unreachable task counts as running: its agent may come back). An elastic gang's
    state is its first MIN nodes'; its extra members only keep a finished gang running
    until they end too."""
    if job.spec.nodes_max is None:
        return _fold(job.tasks)
    state = _fold([t for t in job.tasks if t.rank < job.spec.nodes])
    if state is JobState.FINISHED and not all(task_ended(t) for t in job.tasks):
        return JobState.RUNNING
    return state


def _fold(tasks: Iterable[TaskPlacement]) -> JobState:
    states = [
        JobState.RUNNING if t.state == _UNREACHABLE else job_state_from_task_state(t.state)
        for t in tasks
    ]
    for bad in (JobState.FAILED, JobState.LOST, JobState.KILLED):
        if bad in states:
            return bad
    if states and all(s is JobState.FINISHED for s in states):
        return JobState.FINISHED
    if states and all(s in (JobState.RUNNING, JobState.FINISHED) for s in states):
        return JobState.RUNNING
    return JobState.STAGING


def _with_task_state(
    tasks: tuple[TaskPlacement, ...], task_id: str, state: str
) -> tuple[TaskPlacement, ...]:
    """The job's tasks with ``task_id`` in its new state.

    Nothing else is taken from the update: a ``dlc.sandbox`` label (which older stand-ins sent)
    is ignored, because whoever reaches an executor API could put any path there and the
    scheduler would then read ``<path>/stdout`` (red-team finding 2026-11-26)."""
    return tuple(replace(t, state=state) if t.task_id == task_id else t for t in tasks)


def foreign_origin(task: TaskPlacement, update: TaskUpdate) -> str | None:
    """Why ``update`` cannot be ``task``'s own, or ``None`` when it may be.

    The master stamps every update with the agent it came from; an update from another agent
    than the one the task was placed on, or naming another executor than the one DLC launched
    it with (Mesos names the executor only in the agent's own updates), is not the task's.
    Updates without an agent (the master's answers about tasks it does not know) pass.
    """
    agent_id = update.agent_id
    if agent_id and task.agent_id and agent_id != task.agent_id:
        return f"from agent {shown(agent_id)}, but the task runs on agent {task.agent_id}"
    executor_id = update.executor_id
    if executor_id and executor_id != task.executor_id:
        return f"from executor {shown(executor_id)}, but the task's executor is {task.executor_id}"
    return None


def shown(text: str, most: int = 80) -> str:
    """``text`` from an update as a log line may show it: as it is when short and printable,
    else quoted, escaped and cut (red-team #51: a made-up task id with newlines wrote lines of
    its own into the scheduler's log, and a long one a line as long)."""
    return text if len(text) <= most and text.isprintable() else f"{text!r:.{most}}"


class IgnoredUpdates:
    """Counts the updates refused by :func:`foreign_origin` and logs the first per task."""

    def __init__(self) -> None:
        self.count = 0
        self._logged: dict[str, None] = {}

    def note(self, task_id: str, state: str, why: str) -> None:
        """Count one refused update; log it unless this task's were logged already."""
        self.count += 1
        if task_id in self._logged:
            return
        self._logged[task_id] = None
        while len(self._logged) > _FOREIGN_LOGGED_KEPT:
            self._logged.pop(next(iter(self._logged)))
        log.warning(
            "ignored %s for task %s: it came %s (a forged or misrouted update; further ones "
            "for this task are counted, not logged)",
            shown(state, 40), shown(task_id), why,
        )  # fmt: skip


#: task states in which a node of a gang ended on its own (its mates are then killed)
_NODE_FAILED = frozenset({"TASK_FAILED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED", "TASK_GONE"})


def _gang_cause(
    job: Job, task: TaskPlacement | None, state: str, message: str, killing: bool
) -> str:
    """The job's message for a node's update: a node of a gang that failed is named (its
    mates are killed for it); once one has, every later update of a mate (a late "running",
    its kill) keeps that failure as the cause (not "container ... running" or "killed on
    request")."""
    if task is None or len(job.tasks) < 2 or job.kill_requested:
        return message
    failed = [t for t in job.tasks if t.task_id != task.task_id and t.state in _NODE_FAILED]
    if failed and job.message:
        return job.message
    if state in _NODE_FAILED and killing:
        return f"node {task.rank} failed: {message}"
    return message


class StatusUpdates:
    """Status updates and the kills and reconciliation that follow restarts.

    Args:
        state: the core's shared state.
        tenancy_ops: preemptions, evictions and environments' time limits.
        elastic: an elastic gang's member that ends leaves the gang.
    """

    def __init__(self, state: CoreState, tenancy_ops: TenancyOps, elastic: Elastic) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops
        self.elastic = elastic
        #: the updates refused because they did not come from the task's agent and executor
        self.ignored_updates = IgnoredUpdates()
        #: the attempts in flight that lost a task to the infrastructure
        self.lost_attempts = LostAttempts()

    def on_status(self, status: Mapping[str, Any]) -> Actions:
        """Fold one engine status update (Mesos: a v1 ``TaskStatus``), read through the core's
        codec, into its job; may retry, or kill gang mates. An update too malformed to read
        raises what the codec raises, before anything changes; one whose origin cannot be
        checked (``malformed``) is refused (:meth:`_refuse_malformed`)."""
        update = self.state.codec.decode_status(status)  # pure: no need of the lock
        with self.state.lock:
            if update.malformed:
                return self._refuse_malformed(update)
            task_id = update.task_id
            parsed = job_id_of_task(task_id)
            job = self.state.find(parsed[0]) if parsed else None
            # an ended job's attempt is over too: a late or repeated update (reconciliation
            # echoes the latest state) must not reopen it, only confirm or end its task
            if (
                job is None
                or parsed is None
                or parsed[1] != job.attempt
                or job.state is JobState.QUEUED
                or job.state.terminal
            ):
                return self._on_stale(update)
            task = next((t for t in job.tasks if t.task_id == task_id), None)
            why = foreign_origin(task, update) if task is not None else None
            if why is not None:
                self._ignore_update(task_id, update.state, why)
                return Actions()
            return self._apply_status(job, update)

    def _refuse_malformed(self, update: TaskUpdate) -> Actions:
        """Refuse an update whose origin cannot be checked, as one of foreign origin is
        (counted, logged once per task), and ask the engine for the task's state instead:
        applying it would skip the origin check, and raising would leave it unacknowledged
        (Mesos resends it, holding back the task's later updates, for ever). The engine's
        answer is checked like any update, so the task's state still arrives; for a task
        that ended, Mesos may have forgotten it by then and answer that it is gone, which
        ends the attempt as a loss rather than as the refused update said. Only a task DLC
        placed is asked after, on the agent it placed it on: the update's own ids are not
        trusted (red-team #48: any task id a broken agent made up was reconciled)."""
        task_id = update.task_id
        why = f"{update.malformed}; its state is asked of the engine again"
        self._ignore_update(task_id, update.state, why)
        agent_id = self._placed_on(task_id)
        return Actions(reconcile=[(task_id, agent_id)] if task_id and agent_id else [])

    def _placed_on(self, task_id: str) -> str:
        """The agent the task was placed on (``""``: no such task of a known job)."""
        parsed = job_id_of_task(task_id)
        job = self.state.find(parsed[0]) if parsed else None
        task = next((t for t in job.tasks if t.task_id == task_id), None) if job else None
        return task.agent_id if task is not None else ""

    def _ignore_update(self, task_id: str, state: str, why: str) -> None:
        self.ignored_updates.note(task_id, state, why)
        hook = getattr(self.state.metrics, "status_update_ignored", None)
        if hook is not None:
            hook()

    def _on_stale(self, update: TaskUpdate) -> Actions:
        """An update of a task that is not the job's current attempt: make sure it ends,
        and keep its GPUs out of offers until it has."""
        task_id, agent_id = update.task_id, update.agent_id
        if confirms_gone(update):
            self.state.drains.confirm(task_id, update)
            return Actions()
        if update.state in _TERMINAL_TASK:
            return Actions()
        where = self.state.previous.get(task_id)
        if where is not None:
            self.state.drains.hold(task_id, where[0], where[1], self.state.clock())
        return Actions(kills=[(task_id, agent_id)] if agent_id else [])

    def _apply_status(self, job: Job, update: TaskUpdate) -> Actions:
        """Fold an update of the job's current attempt into the job: end it, retry it,
        queue it again for free, or keep it (killing gang mates of a task that failed)."""
        task_id, state = update.task_id, update.state
        task = next((t for t in job.tasks if t.task_id == task_id), None)
        message, never_seen, refused = self._note_task_end(task, update)
        if job.spec.nodes_max is not None:
            left = self._elastic_update(job, task, update, message)
            if left is not None:
                return left
        if state in _TERMINAL_TASK and lost_by_infrastructure(update):
            self.lost_attempts.note(job.task_prefix())
        job = replace(job, tasks=_with_task_state(job.tasks, task_id, state))
        if (
            job.state is JobState.PREEMPTED
            and not job.kill_requested
            and (
                # a victim still in its eviction delay that ended on its own ends as it ended
                not self.tenancy_ops.awaiting_eviction(job.job_id) or not _job_state(job).terminal
            )
        ):
            return self._preempted_update(job)
        new_state = _job_state(job)
        actions = Actions()
        if new_state in (JobState.FAILED, JobState.LOST, JobState.KILLED):
            actions.kills = [(t.task_id, t.agent_id) for t in job.tasks if not task_ended(t)]
        elif job.kill_requested and state not in _TERMINAL_TASK and task is not None:
            actions.kills = [(task_id, task.agent_id)]  # a live task of a killed job: again
        message = _gang_cause(job, task, state, message, bool(actions.kills))
        if job.kill_requested and new_state.terminal and not actions.kills:
            new_state = JobState.KILLED
            if job.message.startswith(_STOPPED):  # the core stopped it: keep saying why
                message = job.message
        elif refused and not actions.kills and not job.kill_requested:
            # Another live container holds these GPUs (the node refused to share them): the
            # job did nothing wrong. Retry without a failure; its GPUs drain meanwhile.
            return self._requeue(job, f"relaunching elsewhere: {message}", 0)
        elif refused_resources(update) and task is not None and not actions.kills:
            # The master refused the task's resources (a role or reservation mismatch): not
            # the job's fault. Retry elsewhere without a failure; the cause is logged once.
            message = self.state.refusals.note(
                task.agent_id, task.hostname, update.message, self.state.clock()
            )
            return self._requeue(job, message, 0)
        elif never_seen and not actions.kills:
            # The task never started (the launch was lost or refused before it reached an
            # agent): queue again without using a retry.
            return self._requeue(job, "relaunching: the master never saw the launch", 0)
        elif new_state in (JobState.FAILED, JobState.LOST, JobState.KILLED) and not actions.kills:
            lost = self.lost_attempts.pop(job.task_prefix())
            if lost and not job.kill_requested and may_relaunch_free(job.attempt, job.failures):
                # Its agent, executor or the master's record of it went, not its command:
                # queue again without using one of the user's retries (bounded).
                return self._requeue(job, f"relaunching, no retry used: {message}", 0)
            if job.failures < job.spec.retries and not job.kill_requested:
                tries = job.spec.retries - job.failures
                return self._requeue(job, f"retrying ({tries} left) after: {message}", 1)
            if new_state is JobState.KILLED and not job.kill_requested:
                new_state = JobState.FAILED  # killed by someone else: the job did not finish
        elif new_state.terminal and actions.kills:
            new_state = JobState.RUNNING if job.state is JobState.RUNNING else job.state
        if new_state.terminal:
            self.lost_attempts.pop(job.task_prefix())
        self.state.save(job.with_state(new_state, message))
        if new_state.terminal and self.elastic.growable():
            actions.revive = True  # its agents are free: an elastic gang may grow there
        return actions

    def _elastic_update(
        self, job: Job, task: TaskPlacement | None, update: TaskUpdate, message: str
    ) -> Actions | None:
        """An update that only changes an elastic gang's size: an extra member (rank >= MIN)
        that ended leaves the gang, which goes on (``None``: fold the update as usual)."""
        task_id, state, agent_id = update.task_id, update.state, update.agent_id
        if task is None:  # a member that already left: make sure it is gone
            live = state not in _TERMINAL_TASK and agent_id
            return Actions(kills=[(task_id, agent_id)] if live else [])
        if task.rank < job.spec.nodes or state not in _TERMINAL_TASK or job.kill_requested:
            return None
        if job.state is not JobState.RUNNING:
            return None
        core = [t for t in job.tasks if t.rank < job.spec.nodes]
        if any(t.state in _NODE_FAILED for t in core) or all(task_ended(t) for t in core):
            return None  # the gang itself failed or ended: its members end with it
        self.elastic.member_left(job, task, message)
        return Actions(revive=True)

    def _note_task_end(
        self, task: TaskPlacement | None, update: TaskUpdate
    ) -> tuple[str, bool, bool]:
        """Hold the task's GPUs until it is proven gone, or free them; returns the job's
        message, whether the master never saw the launch, and whether the node refused
        to share the task's GPUs."""
        task_id, state = update.task_id, update.state
        prior = task.state if task else ""
        message = update.message or state
        if state == _UNREACHABLE:
            message = f"agent of task {task_id} unreachable; the task may still run, waiting"
        never_seen = (
            update.reason in _NEVER_LAUNCHED and state in _TERMINAL_TASK and prior == "TASK_STAGING"
        )
        refused = state == "TASK_FAILED" and message.startswith(DOUBLE_ASSIGNMENT_PREFIX)
        if task is not None and (refused or (may_still_run(update) and not never_seen)):
            self.state.drains.hold(
                task_id, task.agent_id, task.gpus_used, self.state.clock(), not refused
            )
        elif confirms_gone(update):
            self.state.drains.confirm(task_id, update)
        return message, never_seen, refused

    def _preempted_update(self, job: Job) -> Actions:
        """A task of a preempted job changed: once every task is over, queue the job again
        without using a retry (it did nothing wrong), keeping the reason."""
        if all(task_ended(t) for t in job.tasks):
            reason = job.message.split("; queued again")[0]
            return self._requeue(job, f"{reason}; queued again (no retry used)", 0)
        self.state.save(job)
        return Actions()

    def _requeue(self, job: Job, message: str, failure: int) -> Actions:
        state = self.state
        self.lost_attempts.pop(job.task_prefix())
        for task in job.tasks:
            state.previous[task.task_id] = (task.agent_id, task.gpus_used)
        while len(state.previous) > _PREVIOUS_KEPT:
            state.previous.pop(next(iter(state.previous)))
        job = replace(
            job,
            state=JobState.QUEUED,
            attempt=job.attempt + 1,
            failures=job.failures + failure,
            tasks=(),
            message=message,
        )
        state.save(job)
        return Actions(revive=True)

    def reconcile_tasks(self) -> list[dict[str, Any]]:
        """The engine's reconciliation request (the codec's
        :meth:`~dlc.scheduler.core.ports.EngineCodec.reconcile_request`; Mesos: ``{task_id,
        agent_id}`` each) for every task that may be alive: those of active jobs and those
        whose GPUs drain."""
        state = self.state
        with state.lock:
            tasks = {
                t.task_id: t.agent_id
                for job in state.active.values()
                for t in job.tasks
                if not task_ended(t)
            }
            tasks.update({d.task_id: d.agent_id for d in state.drains.tasks()})
            return state.codec.reconcile_request(tasks.items())

    def pending_kills(self) -> Actions:
        """Kills to (re-)send: every live task of a job whose kill was requested. The
        framework sends them after each (re)registration and periodically until the
        tasks are over, so a kill accepted just before a crash is carried out."""
        state = self.state
        with state.lock:
            # Reclaim needs no offer: a full cluster sends none, yet a lender may wait.
            fresh = (
                self.tenancy_ops.preempt(self.tenancy_ops.plan_queue())
                if state.tenancy.enabled
                else []
            )
            fresh += self.tenancy_ops.stop_overdue_environments()
            return Actions(
                kills=fresh
                + [
                    (t.task_id, t.agent_id)
                    for job in state.active.values()
                    if job.kill_requested
                    or (
                        job.state is JobState.PREEMPTED
                        and not self.tenancy_ops.awaiting_eviction(job.job_id)
                    )
                    for t in job.tasks
                    if not task_ended(t) and (t.task_id, t.agent_id) not in fresh
                ]
            )
