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
from dlc.scheduler.core_state import _done
from dlc.scheduler.core_status import StatusMixin
from dlc.scheduler.core_tenancy import TenancyMixin
from dlc.scheduler.jobs import Job
from dlc.scheduler.usage import GpuUsage, JobUsage, UsageRollup, decode_report, job_usage, rollup

__all__ = [
    "LIVE_STATES",
    "Actions",
    "CoreConfig",
    "ImageResolver",
    "SchedulerCore",
    "default_resolver",
]


class SchedulerCore(StatusMixin, OfferRoundMixin, RequestsMixin, TenancyMixin):
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

    # -- restarts -------------------------------------------------------------

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
