"""Mesos task status updates in, explicit reconciliation out (the codec's status side).

:func:`decode_status` reads a v1 ``TaskStatus`` (as pymesos hands it to the framework, or the
simulator and the tests build it) into the core's engine-neutral
:class:`~dlc.scheduler.tasks.states.TaskUpdate`; :func:`reconcile_request` writes the
``[{"task_id": ..., "agent_id": ...}]`` list the driver's ``reconcileTasks`` takes. Both go
through :class:`dlc.mesos.codec.MesosCodec`.

The reads are the ones the core made before it had a codec, with their defaults, so a
malformed update behaves as it did: parts it lacks read as "none" (an update without an agent
is the master's answer about a task it does not know; one without a state is folded as lost),
and a ``task_id`` or ``agent_id`` that is not an object raises ``AttributeError``, which the
framework logs, leaving the update unacknowledged. An ``executor_id`` that is neither empty
nor an object with a text ``value`` does not raise: it makes the update ``malformed`` (its
origin cannot be checked), which the core refuses, counts and logs, and answers by asking the
master for the task's state (:mod:`dlc.scheduler.core.status`); raising would have left it
unacknowledged, so the agent would resend it, and hold back the task's later updates, forever.
Mesos's state and reason names pass as they are: they are the core's vocabulary
(:mod:`dlc.scheduler.tasks.states`).

Status updates are hot (hundreds a second in a busy cluster): a handful of dict reads, no
validation beyond them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlc.scheduler.tasks.states import ASSUMED_STATE, TaskUpdate

#: the update's source when the task's executor sent it itself (not its agent or the master)
SOURCE_EXECUTOR = "SOURCE_EXECUTOR"

#: the absent part of an update (never mutated)
_NONE: Mapping[str, Any] = {}
#: marks an update that names no state (a state of ``None`` is one it names)
_NO_STATE: Any = object()


def decode_status(status: Mapping[str, Any]) -> TaskUpdate:
    """A v1 ``TaskStatus`` as the core's :class:`~dlc.scheduler.tasks.states.TaskUpdate`.

    An ``executor_id`` that is neither empty nor an object with a text ``value`` makes the
    update :attr:`~dlc.scheduler.tasks.states.TaskUpdate.malformed` (the rest is read as usual).

    Raises:
        AttributeError: ``task_id`` or ``agent_id`` is there but not an object (malformed: as
            before the codec).
    """
    get = status.get
    state = get("state", _NO_STATE)
    stated = state is not _NO_STATE
    executor = get("executor_id")
    executor_id, malformed = _executor_id(executor) if executor else ("", "")
    # positional, in the fields' order: a third cheaper than keywords on this hot path
    return TaskUpdate(
        get("task_id", _NONE).get("value", ""),  # task_id
        state if stated else ASSUMED_STATE,  # state
        get("agent_id", _NONE).get("value") or "",  # agent_id
        executor_id,
        get("reason"),  # reason
        get("message") or "",  # message
        get("source") == SOURCE_EXECUTOR,  # from_executor
        stated,
        malformed,
    )


def _executor_id(executor: Any) -> tuple[str, str]:
    """``(executor_id["value"], "")`` of a non-empty ``executor_id`` (``""`` for a value it
    lacks), or ``("", why)`` when it is not an object with a text value."""
    if isinstance(executor, Mapping):
        value = executor.get("value")
        if not value or type(value) is str:
            return value or "", ""
    return "", f"with an executor_id that is not an object with a text value ({executor!r:.60})"


def reconcile_request(tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """The ``reconcileTasks`` list for ``(task id, agent id)`` pairs, in order."""
    return [{"task_id": {"value": task}, "agent_id": {"value": agent}} for task, agent in tasks]
