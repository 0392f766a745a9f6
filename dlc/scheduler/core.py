"""The scheduler's brain: jobs in, Mesos actions out, no pymesos inside.

:class:`SchedulerCore` owns the queue, calls :func:`~dlc.scheduler.placement.place`
on offers, turns status updates into job states (with retries), and answers
with :class:`Actions` (accept / decline / kill / revive / suppress) that the
framework adapter carries out on the driver. Tests and the benchmark drive it
with plain dicts.

Ordering that makes restarts safe: a job's tasks are saved as *staging* before
the ACCEPT is sent, so a scheduler that dies in between finds them on restart,
reconciles them, and re-queues a job whose task the master never saw (reason
``REASON_RECONCILIATION``) instead of launching anything twice.

Other rules (``docs/scheduler.md`` has the whole story):

* admission refuses what no known agent could ever run (:mod:`~dlc.scheduler.inventory`)
  and a priority above the caller's grant;
* queued and active jobs live in memory (loaded once from the store), so an offer
  round costs the same with 20,000 finished jobs as with none;
* no job blocks the queue: a big job reserves a few agents for a bounded time
  (:mod:`~dlc.scheduler.queue`), and every waiting job has a reason;
* a kill is stored before it is acknowledged and re-sent until the task is over;
* a task that ended without proof its container stopped keeps its GPUs out of
  offers until that proof or a timeout (:mod:`~dlc.scheduler.draining`);
* ``TASK_UNREACHABLE`` is not an end: the job stays running until the master says.
"""

from __future__ import annotations

from dataclasses import replace

from dlc.scheduler.cluster import AgentView, Holder
from dlc.scheduler.core_config import (
    LIVE_STATES,
    Actions,
    CoreConfig,
    ImageResolver,
    default_resolver,
)
from dlc.scheduler.core_offers import OfferRoundMixin
from dlc.scheduler.core_requests import RequestsMixin
from dlc.scheduler.core_state import _STOPPED, _TERMINAL_TASK, _done
from dlc.scheduler.core_tenancy import TenancyMixin
from dlc.scheduler.draining import confirms_gone, may_still_run
from dlc.scheduler.jobs import Job, JobState, job_id_of_task, job_state_from_task_state
from dlc.scheduler.refusals import refused_resources
from dlc.scheduler.task_states import DOUBLE_ASSIGNMENT_PREFIX
from dlc.scheduler.usage import GpuUsage, JobUsage, UsageRollup, decode_report, job_usage, rollup

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

__all__ = [
    "LIVE_STATES",
    "Actions",
    "CoreConfig",
    "ImageResolver",
    "SchedulerCore",
    "default_resolver",
]


class SchedulerCore(OfferRoundMixin, RequestsMixin, TenancyMixin):
    """Thread-safe job lifecycle and placement on top of a :class:`JobStore`.

    Args:
        store: persistence (read once at start; written on every change).
        config: decisions' settings.
        resolver: framework -> image lookup (default: :mod:`dlc.images`).
        topology_of, driver_ok: passed to :func:`place` (defaults there).
        clock: time source.
        metrics: optional monitoring sink (:mod:`dlc.api.metrics`).
    """

    # -- user requests --------------------------------------------------------

    # -- the queue ------------------------------------------------------------

    def queue_reason(self, job_id: str) -> str | None:
        """``position 3 of 7; waiting behind job j1 which reserves agent a1`` for a queued
        job (``None`` when it is not queued)."""
        with self._lock:
            if job_id not in self._queued:
                return None
            order = [j.job_id for j in self.queued_jobs()]
            reason = self._reasons.get(job_id) or "waiting for the first offers"
            return f"position {order.index(job_id) + 1} of {len(order)}; {reason}"

    # -- reads for the API and the dashboard (they never open the store) ------

    def all_jobs(self) -> list[Job]:
        """Every stored job, oldest first (the dashboard's and the metrics' view)."""
        return self.store.list_jobs()

    def job_history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        return self.store.history(job_id)

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        return self.store.state_events()

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid API token, else ``None``."""
        return self.store.authenticate(token)

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid API token, else ``None``."""
        return self.store.user_for_token(token)

    # -- Mesos events ---------------------------------------------------------

    # -- tenancy hooks (dlc/scheduler/quotas.py) --------------------------------

    # -- reservations and reasons ---------------------------------------------

    # -- status updates -------------------------------------------------------

    def on_status(self, status: dict) -> Actions:
        """Fold one ``TaskStatus`` into its job; may retry, or kill gang mates."""
        with self._lock:
            task_id = status.get("task_id", {}).get("value", "")
            state = status.get("state", "TASK_LOST")
            parsed = job_id_of_task(task_id)
            agent_id = status.get("agent_id", {}).get("value", "")
            job = self._find(parsed[0]) if parsed else None
            stale = job is None or parsed[1] != job.attempt or job.state is JobState.QUEUED
            if stale:
                return self._on_stale(task_id, agent_id, state, status)
            return self._apply_status(job, task_id, state, status)

    def _on_stale(self, task_id: str, agent_id: str, state: str, status: dict) -> Actions:
        """An update of a task that is not the job's current attempt: make sure it ends,
        and keep its GPUs out of offers until it has."""
        if confirms_gone(status):
            self._drains.confirm(task_id, status)
            return Actions()
        if state in _TERMINAL_TASK:
            return Actions()
        where = self._previous.get(task_id)
        if where is not None:
            self._drains.hold(task_id, where[0], where[1], self._clock())
        return Actions(kills=[(task_id, agent_id)] if agent_id else [])

    def _apply_status(self, job: Job, task_id: str, state: str, status: dict) -> Actions:
        sandbox = _label(status, "dlc.sandbox") or ""
        task = next((t for t in job.tasks if t.task_id == task_id), None)
        prior = task.state if task else ""
        tasks = tuple(
            replace(t, state=state, sandbox=sandbox or t.sandbox) if t.task_id == task_id else t
            for t in job.tasks
        )
        message = status.get("message") or state
        if state == _UNREACHABLE:
            message = f"agent of task {task_id} unreachable; the task may still run, waiting"
        never_seen = (
            status.get("reason") in _NEVER_LAUNCHED
            and state in _TERMINAL_TASK
            and prior == "TASK_STAGING"
        )
        refused = state == "TASK_FAILED" and message.startswith(DOUBLE_ASSIGNMENT_PREFIX)
        if task is not None and (refused or (may_still_run(status) and not never_seen)):
            self._drains.hold(task_id, task.agent_id, task.gpu_ids, self._clock(), not refused)
        elif confirms_gone(status):
            self._drains.confirm(task_id, status)
        job = replace(job, tasks=tasks)
        if job.state is JobState.PREEMPTED and not job.kill_requested:
            return self._preempted_update(job)
        new_state = _job_state(job)
        actions = Actions()
        if new_state in (JobState.FAILED, JobState.LOST, JobState.KILLED):
            actions.kills = [(t.task_id, t.agent_id) for t in tasks if not _done(t)]
        elif job.kill_requested and state not in _TERMINAL_TASK and task is not None:
            actions.kills = [(task_id, task.agent_id)]  # a live task of a killed job: again
        if job.kill_requested and new_state.terminal and not actions.kills:
            new_state = JobState.KILLED
            if job.message.startswith(_STOPPED):  # the core stopped it: keep saying why
                message = job.message
        elif refused and not actions.kills and not job.kill_requested:
            # Another live container holds these GPUs (the node refused to share them): the
            # job did nothing wrong. Retry without a failure; its GPUs drain meanwhile.
            return self._requeue(job, f"relaunching elsewhere: {message}", 0)
        elif refused_resources(status) and task is not None and not actions.kills:
            # The master refused the task's resources (a role or reservation mismatch): not
            # the job's fault. Retry elsewhere without a failure; the cause is logged once.
            message = self._refusals.note(task.agent_id, task.hostname, status, self._clock())
            return self._requeue(job, message, 0)
        elif never_seen and not actions.kills:
            # The task never started (the launch was lost or refused before it reached an
            # agent): queue again without using a retry.
            return self._requeue(job, "relaunching: the master never saw the launch", 0)
        elif new_state in (JobState.FAILED, JobState.LOST, JobState.KILLED) and not actions.kills:
            if job.failures < job.spec.retries and not job.kill_requested:
                left = job.spec.retries - job.failures
                return self._requeue(job, f"retrying ({left} left) after: {message}", 1)
            if new_state is JobState.KILLED and not job.kill_requested:
                new_state = JobState.FAILED  # killed by someone else: the job did not finish
        elif new_state.terminal and actions.kills:
            new_state = JobState.RUNNING if job.state is JobState.RUNNING else job.state
        self._save(job.with_state(new_state, message))
        return actions

    def _preempted_update(self, job: Job) -> Actions:
        """A task of a preempted job changed: once every task is over, queue the job again
        without using a retry (it did nothing wrong), keeping the reason."""
        if all(_done(t) for t in job.tasks):
            reason = job.message.split("; queued again")[0]
            return self._requeue(job, f"{reason}; queued again (no retry used)", 0)
        self._save(job)
        return Actions()

    def _requeue(self, job: Job, message: str, failure: int) -> Actions:
        for task in job.tasks:
            self._previous[task.task_id] = (task.agent_id, task.gpu_ids)
        while len(self._previous) > _PREVIOUS_KEPT:
            self._previous.pop(next(iter(self._previous)))
        job = replace(
            job,
            state=JobState.QUEUED,
            attempt=job.attempt + 1,
            failures=job.failures + failure,
            tasks=(),
            message=message,
        )
        self._save(job)
        return Actions(revive=True)

    # -- restarts -------------------------------------------------------------

    def reconcile_tasks(self) -> list[dict]:
        """``{task_id, agent_id}`` of every task that may be alive (explicit reconciliation):
        those of active jobs and those whose GPUs drain."""
        with self._lock:
            tasks = {
                t.task_id: t.agent_id
                for job in self._active.values()
                for t in job.tasks
                if not _done(t)
            }
            tasks.update({d.task_id: d.agent_id for d in self._drains.tasks()})
            return [{"task_id": {"value": t}, "agent_id": {"value": a}} for t, a in tasks.items()]

    def pending_kills(self) -> Actions:
        """Kills to (re-)send: every live task of a job whose kill was requested. The
        framework sends them after each (re)registration and periodically until the
        tasks are over, so a kill accepted just before a crash is carried out."""
        with self._lock:
            # Reclaim needs no offer: a full cluster sends none, yet a lender may wait.
            fresh = self._preempt(self.plan_queue()) if self.tenancy.enabled else []
            fresh += self._stop_overdue_environments()
            return Actions(
                kills=fresh
                + [
                    (t.task_id, t.agent_id)
                    for job in self._active.values()
                    if job.kill_requested or job.state is JobState.PREEMPTED
                    for t in job.tasks
                    if not _done(t) and (t.task_id, t.agent_id) not in fresh
                ]
            )

    # -- agents ---------------------------------------------------------------

    def update_agents(self, slaves: list[dict]) -> None:
        """Take agent totals from the master (``GET /master/slaves`` ``slaves`` list)."""
        with self._lock:
            self.inventory.update_from_master(slaves)
            for job in self._active.values():  # keep what DLC's own tasks prove exists
                for task in job.tasks:
                    self.inventory.note_gpus(task.agent_id, task.gpu_ids, task.hostname)

    def cluster(self) -> list[AgentView]:
        """The cluster's one picture: every known agent, each GPU with its facts and state
        (free, taken by which task, or draining), by hostname."""
        with self._lock:
            taken: dict[str, dict[int, Holder]] = {}
            for job in self._active.values():
                for task in job.tasks:
                    if _done(task):
                        continue
                    holder = Holder(job.job_id, task.task_id, job.user)
                    for gpu in task.gpu_ids:
                        taken.setdefault(task.agent_id, {})[gpu] = holder
            draining = {a.agent_id: self._drains.held(a.agent_id) for a in self.inventory.agents()}
            return self.inventory.view(taken, draining)

    def cluster_agent(self, agent_id: str) -> AgentView | None:
        """One agent of :meth:`cluster`, or ``None``."""
        return next((a for a in self.cluster() if a.agent_id == agent_id), None)

    # -- allocated versus used ------------------------------------------------

    def on_usage(self, agent_id: str, data: str | bytes) -> int:
        """Keep an executor's usage report (a framework message); readings of tasks that
        are not running on that agent are dropped. Returns how many tasks were kept."""
        readings = decode_report(data, agent_id)
        with self._lock:
            live = self._live_tasks()
            self._usage.prune(lambda t: t in live)
            return self._usage.record(readings, lambda t, a: live.get(t) == a)

    def _live_tasks(self) -> dict[str, str]:
        return {
            t.task_id: t.agent_id
            for job in self._active.values()
            for t in job.tasks
            if not _done(t)
        }

    def job_usage(self, job_id: str) -> JobUsage | None:
        """What a running job's GPUs did lately (``None``: not running or not reported)."""
        with self._lock:
            job = self._active.get(job_id)
            if job is None:
                return None
            readings = [self._usage.of(t.task_id) for t in job.tasks if not _done(t)]
            return job_usage(r for r in readings if r is not None)

    def gpu_usage(self) -> dict[tuple[str, int], GpuUsage]:
        """(agent id, GPU index) -> the latest reading of a running task's GPU."""
        with self._lock:
            live = self._live_tasks()
            return {
                (r.agent_id, g.gpu_index): g
                for r in self._usage.tasks()
                if live.get(r.task_id) == r.agent_id
                for g in r.gpus
            }

    def usage_rollups(self, by: str, viewer: str | None = None) -> list[UsageRollup]:
        """Allocated versus used per ``user``, ``group`` or ``job`` over running jobs
        (``viewer``: only that user's own row, group or jobs; ``None``: everything)."""
        with self._lock:
            held = []
            group_of = self.tenancy.group_of
            for job in self._active.values():
                if viewer is not None and (
                    group_of(job.user) != group_of(viewer) if by == "group" else job.user != viewer
                ):
                    continue
                owner = job.job_id if by == "job" else job.user
                for t in job.tasks:
                    if _done(t) or t.state != "TASK_RUNNING":
                        continue
                    gpus = len(t.gpu_ids) or (1 if t.share_gpu is not None else 0)
                    if gpus:
                        held.append((owner, gpus, self._usage.of(t.task_id)))
            key_of = self.tenancy.group_of if by == "group" else (lambda owner: owner)
            return rollup(held, key_of)

    def max_agent_gpus(self) -> int:
        """Most GPUs any known agent has (0 when no agent is known yet)."""
        with self._lock:
            return self.inventory.max_gpus()

    def note_agent(self, agent_id: str, gpu_ids: set[int]) -> None:
        """Record GPUs an agent has (lower bound) for admission."""
        with self._lock:
            self.inventory.note_gpus(agent_id, gpu_ids)

    def draining_gpus(self, agent_id: str) -> frozenset[int]:
        """GPUs of an agent held back until an ended task is confirmed gone."""
        with self._lock:
            return self._drains.held(agent_id)


def _label(status: dict, key: str) -> str | None:
    for item in (status.get("labels") or {}).get("labels", ()):
        if item.get("key") == key:
            return item.get("value")
    return None


def _job_state(job: Job) -> JobState:
    """Fold the task states of a (possibly multi-node) job into one job state
    (an unreachable task counts as running: its agent may come back)."""
    states = [
        JobState.RUNNING if t.state == _UNREACHABLE else job_state_from_task_state(t.state)
        for t in job.tasks
    ]
    for bad in (JobState.FAILED, JobState.LOST, JobState.KILLED):
        if bad in states:
            return bad
    if states and all(s is JobState.FINISHED for s in states):
        return JobState.FINISHED
    if states and all(s in (JobState.RUNNING, JobState.FINISHED) for s in states):
        return JobState.RUNNING
    return JobState.STAGING
