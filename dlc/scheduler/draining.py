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

Pure: time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dlc.scheduler.placement import OfferView
from dlc.scheduler.task_states import NOT_RUNNING_STATES

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


def may_still_run(status: dict) -> bool:
    """Whether a terminal update leaves the task's container possibly running."""
    state = status.get("state", "")
    if state not in NOT_RUNNING_STATES or status.get("source") == "SOURCE_EXECUTOR":
        return False
    return state in _UNCERTAIN_STATES or status.get("reason") in _UNCERTAIN_REASONS


def confirms_gone(status: dict) -> bool:
    """Whether an update proves the task's container has stopped."""
    return status.get("state") in NOT_RUNNING_STATES and not may_still_run(status)


@dataclass(frozen=True)
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

    def __init__(self, timeout_s: float = 120.0):
        self.timeout_s = timeout_s
        self._by_task: dict[str, Drain] = {}

    def hold(self, task_id: str, agent_id: str, gpu_ids, now: float) -> None:
        """Hold ``gpu_ids`` on ``agent_id`` until ``task_id`` is confirmed gone."""
        if gpu_ids:
            self._by_task[task_id] = Drain(
                task_id, agent_id, frozenset(gpu_ids), now + self.timeout_s
            )

    def confirm(self, task_id: str) -> bool:
        """The task is gone: free its GPUs. Returns whether it was draining."""
        return self._by_task.pop(task_id, None) is not None

    def expire(self, now: float) -> list[Drain]:
        """Drop (and return) drains whose time is up."""
        done = [d for d in self._by_task.values() if d.until <= now]
        for drain in done:
            del self._by_task[drain.task_id]
        return done

    def held(self, agent_id: str) -> frozenset[int]:
        """GPU ids draining on one agent."""
        ids: frozenset[int] = frozenset()
        for drain in self._by_task.values():
            if drain.agent_id == agent_id:
                ids |= drain.gpu_ids
        return ids

    def strip(self, view: OfferView) -> OfferView:
        """The offer without the agent's draining GPUs."""
        held = self.held(view.agent_id) & view.gpu_ids
        if not held:
            return view
        return replace(view, gpu_ids=view.gpu_ids - held, gpus=max(0.0, view.gpus - len(held)))

    def tasks(self) -> list[Drain]:
        """Every drain (for reconciliation)."""
        return list(self._by_task.values())

    def __len__(self) -> int:
        return len(self._by_task)
