"""Which task ends are the infrastructure's fault, and the bound on relaunching them for free.

A job's ``retries`` are for its own command failing. A task lost with its agent, its
executor or the master's record of it (a ``dlc local`` or agent crash, a partition that
outlived the timeout, an executor killed under it) says nothing about the command, so the
job is queued again without using a retry, as Kubernetes' pod failure policy treats a
disruption. The relaunches are bounded (:data:`FREE_RELAUNCHES`) so that a job whose
tasks always die with their node cannot loop forever: past the bound a loss counts as a
failure again.
"""

from __future__ import annotations

from dlc.scheduler.tasks.states import TASK_UNKNOWN, TaskUpdate

#: states that by themselves say the task was lost, not that its command ended
_LOSS_STATES = frozenset(
    {"TASK_LOST", "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR", TASK_UNKNOWN}
)

#: reasons (from the agent or master, not the executor) that say the same of any state
#: (not ``REASON_RECONCILIATION``: reconciliation echoes the latest state, a loss only when
#: that state is one; "unknown to the master" comes as TASK_LOST or TASK_UNKNOWN)
_LOSS_REASONS = frozenset(
    {
        "REASON_EXECUTOR_TERMINATED",
        "REASON_EXECUTOR_REREGISTRATION_TIMEOUT",
        "REASON_EXECUTOR_UNREGISTERED",
        "REASON_AGENT_DISCONNECTED",
        "REASON_AGENT_REMOVED",
        "REASON_AGENT_REMOVED_BY_OPERATOR",
        "REASON_AGENT_RESTARTED",
        "REASON_AGENT_REREGISTERED",
        "REASON_SLAVE_DISCONNECTED",
        "REASON_SLAVE_REMOVED",
        "REASON_SLAVE_RESTARTED",
        "REASON_SLAVE_REREGISTERED",
        "REASON_MASTER_DISCONNECTED",
    }
)

#: reasons that blame the task itself, whatever the state (the master refused its spec)
_SPEC_REASONS = frozenset(
    {
        "REASON_TASK_INVALID",
        "REASON_TASK_UNAUTHORIZED",
        "REASON_TASK_GROUP_INVALID",
        "REASON_TASK_GROUP_UNAUTHORIZED",
    }
)

#: free relaunches (of any kind: losses, preemptions, refused launches) after which a
#: loss counts against the job's retries again
FREE_RELAUNCHES = 10


def lost_by_infrastructure(update: TaskUpdate) -> bool:
    """Whether a terminal update says the infrastructure lost the task.

    An executor's own report is never a loss (DLC's executor reports the command's end, or
    its own error, which may follow the job anywhere); an agent's or master's is when its
    state or reason says so.
    """
    reason = update.reason
    if reason in _SPEC_REASONS or update.from_executor:
        return False
    return (update.stated and update.state in _LOSS_STATES) or reason in _LOSS_REASONS


class LostAttempts:
    """The current attempts (task id prefixes) that lost a task to the infrastructure.

    A gang's other nodes end as killed by DLC after one node is lost; the attempt is
    remembered so the job is still relaunched for free once the last node has ended.
    Entries go when the attempt is relaunched or the job ends; the set is small (attempts
    in flight) and not persisted: after a scheduler restart such an attempt counts as a
    failure, the conservative side.
    """

    def __init__(self) -> None:
        self._prefixes: set[str] = set()

    def note(self, prefix: str) -> None:
        """Remember that attempt ``prefix`` lost a task."""
        self._prefixes.add(prefix)

    def pop(self, prefix: str) -> bool:
        """Whether attempt ``prefix`` lost a task; forgets it."""
        if prefix in self._prefixes:
            self._prefixes.discard(prefix)
            return True
        return False


def may_relaunch_free(attempt: int, failures: int) -> bool:
    """Whether a job on ``attempt`` with ``failures`` may still be relaunched without a
    failure (see :data:`FREE_RELAUNCHES`)."""
    return attempt - failures < FREE_RELAUNCHES
