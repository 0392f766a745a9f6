"""The core's share hold part: feed :mod:`~dlc.scheduler.placement.share_hold` the core's facts.

:class:`ShareHolds`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). Each offer round with ``--share-hold-reserve``
set, it counts the whole free GPUs over every agent the inventory knows (not only those offered
now), collects the GPU demand of the queued and running jobs (the expected mix: each share's
size, each whole-GPU job's GPUs), and remembers when each held share was first held, so that
``--share-hold-max-wait`` bounds its wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from dlc.scheduler.allocator.shares import MILLI
from dlc.scheduler.core.state import CoreState
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.cluster import Holder
from dlc.scheduler.placement.share_hold import HELD_PREFIX, ShareHold, build
from dlc.scheduler.placement.share_placement import share_milli
from dlc.scheduler.placement.whole_score import WorkloadMix
from dlc.scheduler.tenancy.quotas import largest_gpu_memory


class ShareHolds:
    """:meth:`hold` before a round's decision, :meth:`note_held` after it, and the mix
    whole-GPU placements are scored against (:meth:`placement_mix`)."""

    def __init__(self, state: CoreState) -> None:
        self.state = state

    def hold(self, now: float, queue: list[Job]) -> ShareHold | None:
        """This round's hold (``None``: the setting is off or no share in ``queue``, the jobs
        placed this round); the mix counts every queued job, held by quotas or not."""
        state = self.state
        settings = state.config.placement.share_hold
        if not settings.enabled or not any(j.spec.is_share for j in queue):
            return None
        largest = self.largest_gpu_mib()
        demands = [_demand(j, largest) for j in state.queued.values() if j.spec.gpus]
        taken: dict[str, dict[int, Holder]] = {}
        share_used: dict[tuple[str, int], int] = {}
        for job, task, holder in state.running_tasks():
            if task.gpu_ids:
                demands.append((MILLI, len(task.gpu_ids)))
            for gpu in task.gpu_ids:
                taken.setdefault(task.agent_id, {})[gpu] = holder
            if task.share_gpu is not None:  # what DLC's shares use, whatever offers said
                agent = state.inventory.get(task.agent_id)
                total = (agent.gpu_memory.get(task.share_gpu) if agent else None) or largest
                milli = share_milli(job.spec, total)
                demands.append((milli, 1))
                key = (task.agent_id, task.share_gpu)
                share_used[key] = share_used.get(key, 0) + milli
        state.catch_up_offers()
        draining = {a.agent_id: state.drains.held(a.agent_id) for a in state.inventory.agents()}
        agents = state.inventory.view(taken, draining)
        return build(settings, agents, demands, now, state.share_held_since, share_used)

    def placement_mix(self) -> WorkloadMix | None:
        """The mix whole-GPU placements are scored against
        (:mod:`~dlc.scheduler.placement.whole_score`): every queued job and every running task by
        shape (CPUs with the executor's, GPU thousandths, GPUs), as the job book's
        :class:`~dlc.scheduler.core.mix_book.MixBook` keeps them from every change of a job's record
        (a submit during the round counts). ``None`` when nothing is queued: then nothing is
        placed."""
        state = self.state
        if not state.queued:
            return None
        largest = self.largest_gpu_mib()
        extra = int(state.config.placement.executor_cpus * 1000)

        def gpu_mib(agent_id: str, gpu: int) -> int | None:
            agent = state.inventory.get(agent_id)
            return agent.gpu_memory.get(gpu) if agent is not None else None

        with state.book.lock:  # the book's jobs as they are now (submits go on meanwhile)
            return state.book.mix.mix(largest, gpu_mib, extra)

    def largest_gpu_mib(self) -> int:
        """The largest GPU memory (MiB) of the known agents, 0 when none says, kept per
        inventory version (every round read all 1,213 agents for it, issue 26)."""
        state = self.state
        version, mib = state.inventory_facts.get("largest_gpu_mib", (-1, 0))
        if version != state.inventory.version:
            mib = largest_gpu_memory(state.inventory.agents()) or 0
            state.inventory_facts["largest_gpu_mib"] = (state.inventory.version, mib)
        return cast(int, mib)

    def note_held(self, now: float, waiting: Mapping[str, str]) -> None:
        """Remember when each share now held was first held; forget the jobs no longer
        queued (a placed or killed share starts afresh if it ever queues again)."""
        since = self.state.share_held_since
        for job_id in [j for j in since if j not in self.state.queued]:
            del since[job_id]
        for job_id, reason in waiting.items():
            if reason.startswith(HELD_PREFIX):
                since.setdefault(job_id, now)


def _demand(job: Job, largest_mib: int) -> tuple[int, int]:
    """``(GPU thousandths, GPUs)`` a queued job asks: a share's size, or whole GPUs."""
    if job.spec.is_share:
        return share_milli(job.spec, largest_mib), 1
    return MILLI, job.spec.total_gpus
