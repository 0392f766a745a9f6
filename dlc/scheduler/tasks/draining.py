"""GPUs held back from offers until an ended task is confirmed gone.

A task that ends as ``TASK_LOST``, or because its executor or agent went away
(``REASON_EXECUTOR_TERMINATED``, ``REASON_AGENT_DISCONNECTED`` ...), may leave
its container running on the agent: Mesos only knows the executor process is
gone. A retry placed on the same GPUs would then share them with the old
container. So the core *drains* those GPUs: they are cut out of that agent's
offers until a terminal update that confirms the end arrives for the old task
(from its executor, or a plain finished/failed/killed from the agent), or until
a bounded timeout (the executor also removes orphan containers holding its GPUs
before it starts, so the timeout only bounds how long DLC waits for news).

The same uncertainty holds the *job*: its next attempt must not start anywhere
while the previous attempt's container may still run, or the job runs twice at
once (two writers of one checkpoint). :meth:`Drains.job_wait` names such a job's
waiting reason until the old attempt is confirmed gone: a terminal update from
its own executor (which removes the container before it reports), or a bounded
wait of :data:`ORPHAN_STOP_BOUND_S`, the longest the orphan reaper needs to stop
the container of a dead executor. A reconciliation answer does not count: the
master only repeats the state it knows, it never saw the container.

Pure: time is passed in.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from dlc.scheduler.jobs.job import job_id_of_task
from dlc.scheduler.placement.model import OfferView
from dlc.scheduler.tasks.states import NOT_RUNNING_STATES, TaskUpdate
from dlc.topology import gpu_shares
from dlc.topology.gpu_shares import Ranges

#: how long a job waits for an uncertain previous attempt: the orphan reaper
#: (dlc/executor/reaper.py) polls its executor every 0.5 s, then stops the containers
#: with a 5 s SIGTERM grace and removes them, looking again for 8 s for a late create;
#: the rest is margin for a loaded engine.
ORPHAN_STOP_BOUND_S = 20.0

#: how long GPUs stay out of offers without news. Safety does not rest on it: before it
#: creates a container the executor on the node removes every container on its GPUs whose
#: executor is dead and refuses GPUs a live executor's container holds (the GPU claim,
#: dlc/executor/gpu_claim.py). Draining only spares retries that refusal; held longer, GPUs
#: lost in an agent restart sat idle for two minutes while jobs queued for them.
DRAIN_TIMEOUT_S = 30.0

#: ends in which Mesos lost track of the task rather than saw it stop
_UNCERTAIN_STATES = frozenset({"TASK_LOST", "TASK_GONE", "TASK_GONE_BY_OPERATOR", "TASK_UNKNOWN"})

#: reasons meaning the executor or agent went away, not that the container stopped
_UNCERTAIN_REASONS = frozenset(
    {
        "REASON_EXECUTOR_TERMINATED",
        "REASON_EXECUTOR_UNREGISTERED",
        "REASON_EXECUTOR_REREGISTRATION_TIMEOUT",
        "REASON_AGENT_DISCONNECTED",
        "REASON_AGENT_REMOVED",
        "REASON_AGENT_REMOVED_BY_OPERATOR",
        "REASON_AGENT_RESTARTED",
        "REASON_AGENT_UNKNOWN",
        "REASON_SLAVE_DISCONNECTED",
        "REASON_SLAVE_REMOVED",
        "REASON_SLAVE_RESTARTED",
        "REASON_SLAVE_UNKNOWN",
        "REASON_MASTER_DISCONNECTED",
        "REASON_CONTAINER_PREEMPTED",
    }
)


def may_still_run(update: TaskUpdate) -> bool:
    """Whether a terminal update leaves the task's container possibly running (one from the
    task's executor never does: it reports after removing the container)."""
    if not update.stated or update.state not in NOT_RUNNING_STATES or update.from_executor:
        return False
    return update.state in _UNCERTAIN_STATES or update.reason in _UNCERTAIN_REASONS


def confirms_gone(update: TaskUpdate) -> bool:
    """Whether an update proves the task's container has stopped."""
    return update.stated and update.state in NOT_RUNNING_STATES and not may_still_run(update)


@dataclass(frozen=True, kw_only=True)
class Drain:
    """GPUs of one ended task, held until ``until``."""

    task_id: str
    agent_id: str
    gpu_ids: frozenset[int]
    until: float


class Drains:
    """The draining GPUs per agent.

    Args:
        timeout_s: the longest GPUs are held without news.
    """

    def __init__(self, timeout_s: float = DRAIN_TIMEOUT_S, job_wait_s: float = ORPHAN_STOP_BOUND_S):
        self.timeout_s = timeout_s
        self.job_wait_s = min(job_wait_s, timeout_s)
        self._by_task: dict[str, Drain] = {}
        #: task id -> (job id, attempt, until): attempts that may still run
        self._attempts: dict[str, tuple[str, int, float]] = {}

    def hold(
        self,
        task_id: str,
        agent_id: str,
        gpu_ids: Collection[int],
        now: float,
        started: bool = True,
    ) -> None:
        """Hold ``gpu_ids`` on ``agent_id`` until ``task_id`` is confirmed gone; its job
        waits for that too (at most :attr:`job_wait_s`) unless the task never ``started``
        a container (a refused launch)."""
        if gpu_ids:
            self._by_task[task_id] = Drain(
                task_id=task_id,
                agent_id=agent_id,
                gpu_ids=frozenset(gpu_ids),
                until=now + self.timeout_s,
            )
        parsed = job_id_of_task(task_id)
        if parsed is not None and started:
            self._attempts[task_id] = (parsed[0], parsed[1], now + self.job_wait_s)

    def confirm(self, task_id: str, update: TaskUpdate | None = None) -> bool:
        """The task is gone: free its GPUs. Returns whether it was draining.

        Its job stops waiting only when ``update`` comes from the task's own executor
        (``None``: the caller knows it is gone)."""
        if update is None or update.from_executor:
            self._attempts.pop(task_id, None)
        return self._by_task.pop(task_id, None) is not None

    def waiting_jobs(self, now: float) -> bool:
        """Whether any job must not be placed now (:meth:`job_wait`): an offer round asks
        each queued job only then."""
        return any(until > now for _, _, until in self._attempts.values())

    def job_wait(self, job_id: str, now: float) -> str | None:
        """Why ``job_id`` must not be placed now (an earlier attempt may still run), or None."""
        waits = [a for j, a, until in self._attempts.values() if j == job_id and until > now]
        if not waits:
            return None
        return (
            f"attempt {max(waits) + 1} may still run (its executor or agent went away): "
            f"not started again until its container is confirmed gone, "
            f"at most {self.job_wait_s:g} s"
        )

    def expire(self, now: float) -> list[Drain]:
        """Drop (and return) drains whose time is up."""
        done = [d for d in self._by_task.values() if d.until <= now]
        for drain in done:
            del self._by_task[drain.task_id]
        for task_id in [t for t, (_, _, until) in self._attempts.items() if until <= now]:
            del self._attempts[task_id]
        return done

    def held(self, agent_id: str) -> frozenset[int]:
        """GPU ids draining on one agent."""
        ids: frozenset[int] = frozenset()
        for drain in self._by_task.values():
            if drain.agent_id == agent_id:
                ids |= drain.gpu_ids
        return ids

    def strip(self, view: OfferView) -> OfferView:
        """The offer without the agent's draining GPUs: their ids, and their ``gpu_mem`` /
        ``gpu_core`` blocks, so no share is placed on them either (the fault suite found a
        share started on a GPU whose previous whole-GPU container, orphaned by a killed
        executor, still ran)."""
        held = self.held(view.agent_id)
        if not held:
            return view
        ids = held & view.gpu_ids
        mem, core = _without(view.gpu_mem, held), _without(view.gpu_core, held)
        if not ids and mem is view.gpu_mem and core is view.gpu_core:
            return view
        return replace(
            view,
            gpu_ids=view.gpu_ids - ids,
            gpus=max(0.0, view.gpus - len(ids)),
            gpu_mem=mem,
            gpu_core=core,
        )

    def tasks(self) -> list[Drain]:
        """Every drain (for reconciliation)."""
        return list(self._by_task.values())

    def __len__(self) -> int:
        return len(self._by_task)


def _without(ranges: Ranges, gpus: frozenset[int]) -> Ranges:
    """``ranges`` less the blocks of ``gpus`` (the same object when none is there)."""
    parts = gpu_shares.per_gpu(ranges)
    if not gpus & parts.keys():
        return ranges
    return tuple(r for index, block in parts.items() if index not in gpus for r in block)
