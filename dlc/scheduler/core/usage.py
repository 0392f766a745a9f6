"""The core's allocated-versus-used part: executors' GPU readings of running tasks.

:class:`UsageReadings`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). Readings live in memory only
(:class:`~dlc.scheduler.tasks.usage.UsageBook`); a reading of a task that no longer runs on the
agent that sent it is dropped.
"""

from __future__ import annotations

from dlc.scheduler.core.state import CoreState, task_ended
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.tasks.usage import (
    GpuUsage,
    JobUsage,
    TaskUsage,
    UsageRollup,
    decode_report,
    job_usage,
    rollup,
)
from dlc.scheduler.tenancy.quotas import job_gpus


class UsageReadings:
    """GPU usage of running jobs: reports in, per-job, per-GPU and rolled-up reads out.

    Args:
        state: the core's shared state.
        tenancy_ops: the GPU sizes a share's part of a GPU is counted against.
    """

    def __init__(self, state: CoreState, tenancy_ops: TenancyOps) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops

    def on_usage(self, agent_id: str, data: str | bytes) -> int:
        """Keep an executor's usage report (a framework message); readings of tasks that
        are not running on that agent are dropped. Returns how many tasks were kept."""
        state = self.state
        readings = decode_report(data, agent_id)
        with state.lock:
            live = self._live_tasks()
            state.usage.prune(lambda t: t in live)
            return state.usage.record(readings, lambda t, a: live.get(t) == a)

    def _live_tasks(self) -> dict[str, str]:
        return {
            t.task_id: t.agent_id
            for job in self.state.active.values()
            for t in job.tasks
            if not task_ended(t)
        }

    def job_usage(self, job_id: str) -> JobUsage | None:
        """What a running job's GPUs did lately (``None``: not running or not reported)."""
        state = self.state
        with state.lock:
            job = state.active.get(job_id)
            if job is None:
                return None
            readings = [state.usage.of(t.task_id) for t in job.tasks if not task_ended(t)]
            return job_usage(r for r in readings if r is not None)

    def gpu_usage(self) -> dict[tuple[str, int], GpuUsage]:
        """(agent id, GPU index) -> the latest reading of a running task's GPU."""
        with self.state.lock:
            live = self._live_tasks()
            return {
                (r.agent_id, g.gpu_index): g
                for r in self.state.usage.tasks()
                if live.get(r.task_id) == r.agent_id
                for g in r.gpus
            }

    def usage_rollups(self, by: str, viewer: str | None = None) -> list[UsageRollup]:
        """Allocated versus used per ``user``, ``group`` or ``job`` over running jobs
        (``viewer``: only that user's own row, group or jobs; ``None``: everything)."""
        state = self.state
        with state.lock:
            held: list[tuple[str, float, TaskUsage | None]] = []
            group_of = state.tenancy.group_of
            sizes = self.tenancy_ops.gpu_sizes()
            for job in state.active.values():
                if viewer is not None and (
                    group_of(job.user) != group_of(viewer) if by == "group" else job.user != viewer
                ):
                    continue
                owner = job.job_id if by == "job" else job.user
                for t in job.tasks:
                    if task_ended(t) or t.state != "TASK_RUNNING":
                        continue
                    # a share counts its part of a GPU, as quotas and fair share count it
                    gpus = len(t.gpu_ids) or (
                        job_gpus(state.tenancy, job, sizes) if t.share_gpu is not None else 0
                    )
                    if gpus:
                        held.append((owner, gpus, state.usage.of(t.task_id)))
            key_of = state.tenancy.group_of if by == "group" else (lambda owner: owner)
            return rollup(held, key_of)
