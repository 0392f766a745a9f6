"""The core's task vocabulary: task state names, and one status update as the core reads it.

The state names are Mesos's ``TaskState`` names, kept as plain strings: they are the core's
vocabulary (stored in jobs, shown to users, shared with the emulator and the executor), and an
engine codec other than Mesos's maps its own states onto them, as it maps its reasons onto
Mesos's ``REASON_*`` names (:class:`TaskUpdate`). One definition, so that the emulator (which
decides when a task is over) and the scheduler (which decides when a job's task no longer
needs killing) cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

#: States after which Mesos never sends another update for the task (Mesos's
#: ``protobuf::isTerminalState``).
TERMINAL_STATES = frozenset(
    {
        "TASK_FINISHED",
        "TASK_FAILED",
        "TASK_KILLED",
        "TASK_ERROR",
        "TASK_LOST",
        "TASK_DROPPED",
        "TASK_GONE",
        "TASK_GONE_BY_OPERATOR",
    }
)

#: Not terminal in Mesos, but what reconciliation answers for a task the master does
#: not know: nothing runs under that id, so a scheduler need not kill it.
TASK_UNKNOWN = "TASK_UNKNOWN"

#: States in which no process of the task can be running (terminal, or unknown to the master).
NOT_RUNNING_STATES = TERMINAL_STATES | {TASK_UNKNOWN}

#: The state the core folds an update that names none as (the worst for the job).
ASSUMED_STATE = "TASK_LOST"


#: How an executor's TASK_FAILED message starts when it refused to start a container because
#: another live task's container holds one of its GPUs. The scheduler retries such a task
#: without counting a failure, on other GPUs (the refused ones drain first).
DOUBLE_ASSIGNMENT_PREFIX = "GPU double assignment refused"


def is_terminal(state: str) -> bool:
    """Whether Mesos sends no further update after ``state``."""
    return state in TERMINAL_STATES


@dataclass(frozen=True, slots=True)
class TaskUpdate:
    """One task status update, engine-neutral: what the core reads of it (an engine codec
    decodes the engine's update: :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_status`; for
    Mesos :func:`dlc.mesos.status.decode_status`).

    Nothing path-like or executor-chosen beyond the state and message is kept: a status update
    is trusted for a task's state only (:mod:`~dlc.scheduler.core.status`).

    Attributes:
        task_id: the task's id (``""`` when the update names none).
        state: its state, one of this module's names; :data:`ASSUMED_STATE` when the update
            names none (``stated`` is then false).
        agent_id: the agent the update came from (``""``: none, as in the master's answers
            about tasks it does not know).
        executor_id: the executor it names (``""``: none; Mesos names it only in the agent's
            own updates).
        reason: why the state changed, a Mesos ``REASON_*`` name (``None``: none given).
        message: the update's text (``""``: none).
        from_executor: whether the task's executor sent it itself (Mesos ``SOURCE_EXECUTOR``),
            rather than its agent or the master.
        stated: whether the update named a state. One that names none (a malformed update)
            is folded into its job as :data:`ASSUMED_STATE` but proves nothing about the
            task's container: it holds or frees no GPU, and is no infrastructure loss and no
            refusal.
        malformed: why the update's origin cannot be checked (``""``: it can): a part the
            codec found malformed (for Mesos an ``executor_id`` that is not an object). The
            core applies no such update; it counts and logs it like one of foreign origin
            and asks the engine for the task's state again (``Actions.reconcile``).
    """

    task_id: str
    state: str
    agent_id: str = ""
    executor_id: str = ""
    reason: str | None = None
    message: str = ""
    from_executor: bool = False
    stated: bool = True
    malformed: str = ""
