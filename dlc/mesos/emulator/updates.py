"""Status updates, acknowledgements and reconciliation of the emulated master.

Mixed into :class:`~dlc.mesos.emulator.master.Master`; every method runs under the emulator lock.
Like the Mesos agent's status update manager, a task's next update is sent only after the
previous one was acknowledged, and an unacknowledged one is resent with backoff (10 s doubling
to 10 min). Master-generated updates (reconciliation, TASK_ERROR, TASK_LOST) carry no uuid and
need no acknowledgement.
"""

from __future__ import annotations

import time
from typing import Any

from dlc.mesos.emulator.model import Framework, Task, dig, make_status
from dlc.scheduler.tasks.states import TASK_UNKNOWN

MAX_UPDATE_RETRY_SECONDS = 600.0


class StatusUpdates:
    """Update routing for the master (uses its ``tasks``, ``frameworks``, ``runtime``, ``send``)."""

    tasks: dict[tuple[str, str], Task]
    frameworks: dict[str, Framework]
    completed_tasks: list[Task]
    runtime: Any
    allocator: Any
    clock: Any
    send: Any  # Master.send(framework, event)
    send_to: Any  # Master.send_to(framework_id, event)

    def _acknowledge(self, framework: Framework, ack: dict[str, Any]) -> None:
        task = self.tasks.get((framework.framework_id, str(dig(ack, "task_id", "value"))))
        if task is None or not task.pending or task.pending[0].get("uuid") != ack.get("uuid"):
            return
        acked = task.pending.pop(0)
        self.runtime.acknowledged(task, acked)
        if task.pending:
            self._deliver(task)
        elif task.terminal:
            self._remove_task(task)

    def _reconcile(self, framework: Framework, reconcile: dict[str, Any]) -> None:
        wanted = reconcile.get("tasks") or []
        if not wanted:
            known = [t for t in self.tasks.values() if t.framework_id == framework.framework_id]
            for each in known:
                self._send_reconciled(framework, each)
            return
        for item in wanted:
            task_id = str(dig(item, "task_id", "value"))
            task = self.tasks.get((framework.framework_id, task_id))
            if task is not None:
                self._send_reconciled(framework, task)
                continue
            partition_aware = framework.has_capability("PARTITION_AWARE")
            status = make_status(
                task_id,
                TASK_UNKNOWN if partition_aware else "TASK_LOST",
                "SOURCE_MASTER",
                reason="REASON_RECONCILIATION",
                message="Reconciliation: Task is unknown",
                with_uuid=False,
            )
            self.send(framework, {"type": "UPDATE", "update": {"status": status}})

    def _send_reconciled(self, framework: Framework, task: Task) -> None:
        status = make_status(
            task.task_id,
            task.state,
            "SOURCE_MASTER",
            agent_id=task.agent_id,
            reason="REASON_RECONCILIATION",
            message="Reconciliation: Latest task state",
            with_uuid=False,
        )
        self.send(framework, {"type": "UPDATE", "update": {"status": status}})

    def status_update(self, task: Task, status: dict[str, Any]) -> None:
        """Records an agent/executor status update and forwards it, one unacked at a time.

        Like the Mesos agent's status update manager, the next update of a task is sent only
        after the previous one was acknowledged, and an unacknowledged one is resent with
        backoff.
        """
        status.setdefault("agent_id", {"value": task.agent_id})
        status.setdefault("timestamp", time.time())
        task.state = status["state"]
        task.statuses.append(status)
        if "uuid" not in status:
            self.send_to(task.framework_id, {"type": "UPDATE", "update": {"status": status}})
            return
        task.pending.append(status)
        if len(task.pending) == 1:
            task.retry_interval = 10.0
            self._deliver(task)
        if task.terminal:
            self.allocator.request()

    def _deliver(self, task: Task) -> None:
        task.retry_at = self.clock() + task.retry_interval
        self.send_to(task.framework_id, {"type": "UPDATE", "update": {"status": task.pending[0]}})

    def _remove_task(self, task: Task) -> None:
        self.tasks.pop((task.framework_id, task.task_id), None)
        self.completed_tasks.append(task)
        del self.completed_tasks[:-1000]

    def executor_lost(self, framework_id: str, agent_id: str, executor_id: str, code: int) -> None:
        """Sends the FAILURE event Mesos sends when a custom executor exits."""
        failure = {
            "agent_id": {"value": agent_id},
            "executor_id": {"value": executor_id},
            "status": code,
        }
        self.send_to(framework_id, {"type": "FAILURE", "failure": failure})
        self.allocator.request()

    def framework_message(self, framework_id: str, agent_id: str, executor_id: str, data: str):
        """Relays an executor's MESSAGE call to its scheduler."""
        message = {
            "agent_id": {"value": agent_id},
            "executor_id": {"value": executor_id},
            "data": data,
        }
        self.send_to(framework_id, {"type": "MESSAGE", "message": message})

    def retry_updates(self, now: float) -> None:
        """Resends the oldest unacknowledged update of each task whose retry time came."""
        for task in self.tasks.values():
            if task.pending and now >= task.retry_at and self.frameworks.get(task.framework_id):
                task.retry_interval = min(task.retry_interval * 2, MAX_UPDATE_RETRY_SECONDS)
                self._deliver(task)
