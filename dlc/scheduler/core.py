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
from dlc.scheduler.core_views import ViewsMixin
from dlc.scheduler.usage import GpuUsage, JobUsage, UsageRollup, decode_report, job_usage, rollup

__all__ = [
    "LIVE_STATES",
    "Actions",
    "CoreConfig",
    "ImageResolver",
    "SchedulerCore",
    "default_resolver",
]


class SchedulerCore(ViewsMixin, StatusMixin, OfferRoundMixin, RequestsMixin, TenancyMixin):
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

    # -- reads for the API and the dashboard (they never open the store) ------

    # -- Mesos events ---------------------------------------------------------

    # -- tenancy hooks (dlc/scheduler/quotas.py) --------------------------------

    # -- reservations and reasons ---------------------------------------------

    # -- status updates -------------------------------------------------------

    # -- restarts -------------------------------------------------------------

    # -- agents ---------------------------------------------------------------

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
