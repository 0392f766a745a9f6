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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from dlc.errors import JobNotFound, JobSpecError
from dlc.mesos.states import NOT_RUNNING_STATES
from dlc.scheduler.jobs import (
    Job,
    JobSpec,
    JobState,
    TaskPlacement,
    check_container_user,
    check_registry,
    check_volumes,
    job_id_of_task,
    job_state_from_task_state,
)
from dlc.scheduler.placement import (
    NO_TOPOLOGY_POLICY,
    DriverCheck,
    PlacementConfig,
    TopologyOf,
    parse_offers,
    place,
)
from dlc.scheduler.queue import HeadOfLine, queue_order
from dlc.scheduler.store import JobStore

if TYPE_CHECKING:
    from dlc.scheduler.metrics import SchedulerMetrics
from dlc.scheduler.task_info import ExecutorConfig, build_task_info

#: task states in which nothing of the task runs any more (no kill needed)
_TERMINAL_TASK = NOT_RUNNING_STATES

#: reasons meaning a launch never reached an agent: the job may run again for free
_NEVER_LAUNCHED = {"REASON_RECONCILIATION", "REASON_INVALID_OFFERS"}

#: (framework or None, image or None) -> (image, cuda_version); raises DlcError
ImageResolver = Callable[[JobSpec], tuple[str, str | None]]


@dataclass
class Actions:
    """What the framework adapter must do on the Mesos driver.

    Attributes:
        accepts: ``(offer_ids, task_infos)`` per agent.
        declines: offer ids to decline with the refuse filter.
        kills: ``(task_id, agent_id)`` to kill.
        revive: ask the master for offers again (new work queued).
        suppress: stop offers (nothing queued).
    """

    accepts: list[tuple[list[str], list[dict]]] = field(default_factory=list)
    declines: list[str] = field(default_factory=list)
    kills: list[tuple[str, str]] = field(default_factory=list)
    revive: bool = False
    suppress: bool = False


@dataclass(frozen=True)
class CoreConfig:
    """Scheduler settings that shape decisions.

    Attributes:
        placement: allocator policy and executor overheads.
        executor: how executors are launched.
        allowed_volumes: host path prefixes jobs may mount.
        max_skips: head-of-line protection (see :class:`HeadOfLine`).
    """

    placement: PlacementConfig = PlacementConfig()
    executor: ExecutorConfig = ExecutorConfig()
    allowed_volumes: tuple[str, ...] = ()
    max_skips: int = 20


def default_resolver(spec: JobSpec) -> tuple[str, str | None]:
    """Resolve ``framework`` to an image with the catalog (``image`` wins when given).

    Raises:
        DlcError: unknown framework/version (the catalog lists the known ones).
    """
    if spec.image:
        return spec.image, spec.cuda_version
    from dlc.images import resolve

    entry = resolve(spec.framework)
    return entry.image, entry.cuda


class SchedulerCore:
    """Thread-safe job lifecycle and placement on top of a :class:`JobStore`.

    Args:
        store: persistence.
        config: decisions' settings.
        resolver: framework -> image lookup (default: :mod:`dlc.images`).
        topology_of, driver_ok: passed to :func:`place` (defaults there).
        clock: time source.
    """

    def __init__(
        self,
        store: JobStore,
        config: CoreConfig | None = None,
        resolver: ImageResolver | None = None,
        topology_of: TopologyOf | None = None,
        driver_ok: DriverCheck | None = None,
        clock: Callable[[], float] = time.time,
        metrics: SchedulerMetrics | None = None,
    ):
        self.store = store
        #: optional monitoring sink (:mod:`dlc.scheduler.metrics`); counts offers and placements
        self.metrics = metrics
        self.config = config or CoreConfig()
        self._resolver = resolver or default_resolver
        self._topology_of = topology_of
        self._driver_ok = driver_ok
        self._clock = clock
        self._lock = threading.RLock()
        self._head = HeadOfLine(self.config.max_skips)
        self._agent_gpus: dict[str, set[int]] = {}
        self.framework_id: str | None = store.framework_id
        self.offers_suppressed = False

    # -- user requests --------------------------------------------------------

    def submit(self, user: str, spec: JobSpec) -> Job:
        """Validate, resolve the image, and queue a job.

        Raises:
            JobSpecError, ImageNotFound: the spec cannot run here; the message says why.
        """
        check_volumes(spec, self.config.allowed_volumes)
        check_container_user(spec, self.config.executor.policy)
        most = self.max_agent_gpus()
        if most and spec.gpus > most:
            raise JobSpecError(
                "gpus",
                f"asked for {spec.gpus} but no agent has more than {most}; use --gpus {most}",
            )
        image, cuda = self._resolver(spec)
        check_registry(spec, image, self.config.executor.policy.allowed_registries)
        spec = replace(spec, image=image, cuda_version=cuda or spec.cuda_version)
        with self._lock:
            job = Job(self.store.new_job_id(), user, spec, submitted_at=self._clock())
            return self.store.add_job(job)

    def kill(self, job_id: str, user: str, admin: bool = False) -> tuple[Job, Actions]:
        """Kill a job the caller owns (an admin may kill any).

        Raises:
            JobNotFound: no such job visible to the caller.
        """
        with self._lock:
            job = self.visible_job(job_id, user, admin)
            actions = Actions()
            if job.state.terminal:
                return job, actions
            if job.state is JobState.QUEUED:
                self._head.forget(job_id)
                job = self.store.save_job(
                    replace(job, state=JobState.KILLED, kill_requested=True, message="killed")
                )
                return job, actions
            job = self.store.save_job(
                replace(job, kill_requested=True, message=f"kill requested by {user}"),
                event="kill requested",
            )
            actions.kills = [(t.task_id, t.agent_id) for t in job.tasks if not _done(t)]
            return job, actions

    def visible_job(self, job_id: str, user: str, admin: bool = False) -> Job:
        """The job if the caller may see it.

        Raises:
            JobNotFound: missing, or owned by someone else (not revealed).
        """
        job = self.store.get_job(job_id)
        if not admin and job.user != user:
            raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")
        return job

    # -- Mesos events ---------------------------------------------------------

    def on_offers(self, offers: list[dict]) -> Actions:
        """Place queued jobs on ``offers``; persist launches before returning them."""
        with self._lock:
            views, bad = parse_offers(offers)
            for view in views:
                self._agent_gpus.setdefault(view.agent_id, set()).update(view.gpu_ids)
            jobs = {
                j.job_id: j for j in queue_order(self.store.list_jobs(states={JobState.QUEUED}))
            }
            started = time.perf_counter()
            result = place(
                views,
                list(jobs.values()),
                self.config.placement,
                self._topology_of,
                self._driver_ok,
                self._head.blocks,
            )
            latency = time.perf_counter() - started
            actions = Actions(declines=bad + result.declined)
            per_agent: dict[str, tuple[list[str], list[dict]]] = {}
            for job_id in result.placed_jobs:
                launches = [x for x in result.launches if x.job_id == job_id]
                job = self._start(jobs[job_id], launches)
                for launch in launches:
                    self._agent_gpus.setdefault(launch.agent_id, set()).update(launch.gpu_ids)
                    entry = per_agent.setdefault(launch.agent_id, (list(launch.offer_ids), []))
                    entry[1].append(
                        build_task_info(job, launch, self.framework_id, self.config.executor)
                    )
            actions.accepts = list(per_agent.values())
            if self.metrics is not None:
                placed = [
                    (jobs[j], [x for x in result.launches if x.job_id == j])
                    for j in result.placed_jobs
                ]
                self.metrics.record_round(
                    views, len(offers), len(actions.declines), latency, placed
                )
            self._head.record_round(result.placed_jobs, result.waiting)
            for job_id, reason in result.waiting.items():
                job = jobs[job_id]
                message = f"waiting: {reason}"
                if job.message != message:
                    self.store.save_job(replace(job, message=message))
            if not result.waiting and len(result.placed_jobs) == len(jobs):
                actions.suppress = True
            return actions

    def _start(self, job: Job, launches) -> Job:
        tasks = tuple(
            TaskPlacement(x.task_id, x.agent_id, x.hostname, x.gpu_ids, x.offer_ids[0], x.rank)
            for x in launches
        )
        gpus = "; ".join(f"{t.hostname} GPUs {','.join(map(str, t.gpu_ids))}" for t in tasks)
        if any(x.policy == NO_TOPOLOGY_POLICY for x in launches):
            gpus += " (first-fit: the agent has no dlc_topo attribute)"
        return self.store.save_job(
            replace(job, state=JobState.STAGING, tasks=tasks, message=f"launching on {gpus}")
        )

    def on_status(self, status: dict) -> Actions:
        """Fold one ``TaskStatus`` into its job; may retry, or kill gang mates."""
        with self._lock:
            task_id = status.get("task_id", {}).get("value", "")
            state = status.get("state", "TASK_LOST")
            parsed = job_id_of_task(task_id)
            agent_id = status.get("agent_id", {}).get("value", "")
            try:
                job = self.store.get_job(parsed[0]) if parsed else None
            except JobNotFound:
                job = None
            stale = job is None or parsed[1] != job.attempt or job.state is JobState.QUEUED
            if stale:
                # Not ours any more (old attempt, unknown): make sure it does not run.
                live = state not in _TERMINAL_TASK
                return Actions(kills=[(task_id, agent_id)] if live and agent_id else [])
            return self._apply_status(job, task_id, state, status)

    def _apply_status(self, job: Job, task_id: str, state: str, status: dict) -> Actions:
        sandbox = _label(status, "dlc.sandbox") or ""
        tasks = tuple(
            replace(t, state=state, sandbox=sandbox or t.sandbox) if t.task_id == task_id else t
            for t in job.tasks
        )
        message = status.get("message") or state
        prior = next((t.state for t in job.tasks if t.task_id == task_id), "")
        never_seen = (
            status.get("reason") in _NEVER_LAUNCHED
            and state in _TERMINAL_TASK
            and prior == "TASK_STAGING"
        )
        job = replace(job, tasks=tasks)
        new_state = _job_state(job)
        actions = Actions()
        if new_state in (JobState.FAILED, JobState.LOST, JobState.KILLED):
            actions.kills = [(t.task_id, t.agent_id) for t in tasks if not _done(t)]
        if job.kill_requested and new_state.terminal and not actions.kills:
            new_state = JobState.KILLED
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
        self.store.save_job(job.with_state(new_state, message))
        return actions

    def _requeue(self, job: Job, message: str, failure: int) -> Actions:
        job = replace(
            job,
            state=JobState.QUEUED,
            attempt=job.attempt + 1,
            failures=job.failures + failure,
            tasks=(),
            message=message,
        )
        self.store.save_job(job)
        return Actions(revive=True)

    def reconcile_tasks(self) -> list[dict]:
        """``{task_id, agent_id}`` of every task that may be alive (explicit reconciliation)."""
        with self._lock:
            active = self.store.list_jobs(states={JobState.STAGING, JobState.RUNNING})
            return [
                {"task_id": {"value": t.task_id}, "agent_id": {"value": t.agent_id}}
                for job in active
                for t in job.tasks
                if not _done(t)
            ]

    def has_queued(self) -> bool:
        """Whether any job waits for offers."""
        return bool(queue_order(self.store.list_jobs(states={JobState.QUEUED})))

    def set_framework_id(self, framework_id: str | None) -> None:
        """Persist the framework id before anything uses it (``None`` forgets it)."""
        with self._lock:
            self.store.framework_id = framework_id
            self.framework_id = framework_id

    def max_agent_gpus(self) -> int:
        """Most GPUs any known agent has (0 when no agent is known yet)."""
        with self._lock:
            return max((len(ids) for ids in self._agent_gpus.values()), default=0)

    def note_agent(self, agent_id: str, gpu_ids: set[int]) -> None:
        """Record an agent's GPUs (from an offer) for the ``--gpus`` check at submit."""
        with self._lock:
            self._agent_gpus.setdefault(agent_id, set()).update(gpu_ids)


def _done(task: TaskPlacement) -> bool:
    return task.state in _TERMINAL_TASK


def _label(status: dict, key: str) -> str | None:
    for item in (status.get("labels") or {}).get("labels", ()):
        if item.get("key") == key:
            return item.get("value")
    return None


def _job_state(job: Job) -> JobState:
    """Fold the task states of a (possibly multi-node) job into one job state."""
    states = [job_state_from_task_state(t.state) for t in job.tasks]
    for bad in (JobState.FAILED, JobState.LOST, JobState.KILLED):
        if bad in states:
            return bad
    if states and all(s is JobState.FINISHED for s in states):
        return JobState.FINISHED
    if states and all(s in (JobState.RUNNING, JobState.FINISHED) for s in states):
        return JobState.RUNNING
    return JobState.STAGING
