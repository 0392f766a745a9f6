"""Tasks the Mesos master refused because of their resources: retried elsewhere, explained once.

When a TaskInfo's resources do not match the offer (unreserved ``gpus`` against GPUs reserved
for a role, another role's ``allocation_info``, an agent whose resources changed under the
offer), the master answers ``TASK_ERROR``/``REASON_TASK_INVALID`` (or ``TASK_DROPPED``) with
"Total resources ... required by task and its executor is more than available ...". The job did
nothing wrong: the core queues it again without using a retry, keeps the agent out of
placement for a while so the retry lands elsewhere, and logs the cause and the fix once per
agent (the master's message is a screenful; the job's message is one line).

Pure: no I/O beyond the one log line, no clock of its own.
"""

from __future__ import annotations

import logging

from dlc.scheduler.tasks.states import TaskUpdate

log = logging.getLogger(__name__)

#: the master's wording for a task whose resources the offers do not hold
MORE_THAN_AVAILABLE = "more than available"
_STATES = ("TASK_ERROR", "TASK_DROPPED", "TASK_LOST")

FIX = (
    "start `dlc scheduler --role ROLE` with the role the agent's resources are reserved for "
    "(mesos-agent --resources='gpus(ROLE):N;...'), or unreserve them; docs/roles.md"
)


def refused_resources(update: TaskUpdate) -> bool:
    """Whether an update says the master refused the task's resources (not the job's fault)."""
    return update.stated and update.state in _STATES and MORE_THAN_AVAILABLE in str(update.message)


class Refusals:
    """Agents whose master refused a task's resources, kept out of placement for ``hold_s``.

    Args:
        hold_s: how long an agent takes no task after a refusal (the retry goes elsewhere;
            afterwards it is tried again, since offers change).
    """

    def __init__(self, hold_s: float = 60.0):
        self.hold_s = hold_s
        self._until: dict[str, float] = {}
        self._logged: set[str] = set()

    def note(self, agent_id: str, hostname: str, message: str, now: float) -> str:
        """Record a refusal on ``agent_id`` (``message``: the master's, logged once per agent);
        returns the job's one-line message."""
        self._until[agent_id] = now + self.hold_s
        where = hostname or agent_id
        if agent_id not in self._logged:
            self._logged.add(agent_id)
            log.warning(
                "the Mesos master refused a task's resources on agent %s (%s): %s; fix: %s",
                where, agent_id, str(message)[:400], FIX,
            )  # fmt: skip
        return (
            f"relaunching elsewhere: the Mesos master refused the task's resources on {where} "
            "(they did not match the offer's role or reservation; the scheduler log says why)"
        )

    def __len__(self) -> int:
        """How many agents are kept out (some may be due to come back)."""
        return len(self._until)

    def blocked(self, agent_id: str, now: float) -> bool:
        """Whether ``agent_id`` is still kept out after a refusal."""
        until = self._until.get(agent_id)
        if until is None:
            return False
        if until <= now:
            del self._until[agent_id]
            return False
        return True
