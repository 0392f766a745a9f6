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
framework logs, leaving the update unacknowledged. Mesos's state and reason names pass as they
are: they are the core's vocabulary (:mod:`dlc.scheduler.tasks.states`).

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

    Raises:
        AttributeError: ``task_id`` or ``agent_id`` is there but not an object, or
            ``executor_id`` is neither an object nor empty (malformed: as before the codec).
    """
    get = status.get
    state = get("state", _NO_STATE)
    stated = state is not _NO_STATE
    # positional, in the fields' order: a third cheaper than keywords on this hot path
    return TaskUpdate(
        get("task_id", _NONE).get("value", ""),  # task_id
        state if stated else ASSUMED_STATE,  # state
        get("agent_id", _NONE).get("value") or "",  # agent_id
        (get("executor_id") or _NONE).get("value") or "",  # executor_id
        get("reason"),  # reason
        get("message") or "",  # message
        get("source") == SOURCE_EXECUTOR,  # from_executor
        stated,
    )


def reconcile_request(tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """The ``reconcileTasks`` list for ``(task id, agent id)`` pairs, in order."""
    return [{"task_id": {"value": task}, "agent_id": {"value": agent}} for task, agent in tasks]
