"""Who holds which GPU share right now: one reading of the jobs for every view that needs it
(the dashboard's cells split by job, the share metrics on ``/metrics``)."""

from __future__ import annotations

from collections.abc import Iterable

from dlc.scheduler.jobs.job import Job, TaskPlacement, job_state_from_task_state

#: (agent id, GPU index) -> the live share tasks on that GPU, with their jobs
ShareHolders = dict[tuple[str, int], list[tuple[Job, TaskPlacement]]]


def share_holders(jobs: Iterable[Job]) -> ShareHolders:
    """The live tasks of active jobs that run on part of a GPU, keyed by (agent, GPU).

    A task whose last state is terminal holds nothing any more, even while its job is still
    active (a gang member that ended, a task the master refused)."""
    held: ShareHolders = {}
    for job in jobs:
        if not job.state.active:
            continue
        for task in job.tasks:
            if task.share_gpu is None:
                continue
            if task.state and job_state_from_task_state(task.state).terminal:
                continue
            held.setdefault((task.agent_id, task.share_gpu), []).append((job, task))
    return held
