"""The Mesos ``TaskState`` vocabulary, shared by the emulator and the scheduler.

One definition so that the emulator (which decides when a task is over) and the
scheduler (which decides when a job's task no longer needs killing) cannot drift.
"""

from __future__ import annotations

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


#: How an executor's TASK_FAILED message starts when it refused to start a container because
#: another live task's container holds one of its GPUs. The scheduler retries such a task
#: without counting a failure, on other GPUs (the refused ones drain first).
DOUBLE_ASSIGNMENT_PREFIX = "GPU double assignment refused"


def is_terminal(state: str) -> bool:
    """Whether Mesos sends no further update after ``state``."""
    return state in TERMINAL_STATES
