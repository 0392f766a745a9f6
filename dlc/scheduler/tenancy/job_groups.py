"""Each job's group and pool, resolved once per round (issue 26, "A core you can read").

A job is charged to the group its user belongs to and to the pool its spec names (else the
group's default pool); both follow from the policy in force. The steps of one offer round
(usage, the quota planner's queues and victims, the pool a memory share is charged in,
fair-share ratios, the fair-share ledger's holdings, elastic growth limits, consolidation's
allowed agents) each derived them again from the policy, job by job. An
offer round now makes one :class:`JobGroups` for the policy it plans with and every step
reads it: within a round they cannot disagree, and a policy changed mid-round (an admin's
``PUT /v1/quota``) is seen by the next round as a whole.
"""

from __future__ import annotations

from dlc.scheduler.jobs.job import Job
from dlc.scheduler.tenancy.policy import Policy

#: ``(group, pool)``, what quotas are kept per
Key = tuple[str, str]


class JobGroups:
    """job id -> ``(group, pool)`` under one :class:`Policy`, filled as jobs are asked for.

    A job's user and pool never change, so an entry stays right for as long as the policy
    does; the core makes a new map every offer round, so ended jobs do not pile up.
    """

    def __init__(self, policy: Policy) -> None:
        #: the policy every entry was resolved with
        self.policy = policy
        self._keys: dict[str, Key] = {}

    def key(self, job: Job) -> Key:
        """The ``(group, pool)`` ``job`` is charged to."""
        key = self._keys.get(job.job_id)
        if key is None:
            key = self._keys[job.job_id] = self.policy.charged_to(job.user, job.spec.pool)
        return key

    def group(self, job: Job) -> str:
        """The group ``job`` is charged to (:data:`~dlc.scheduler.tenancy.policy.NO_GROUP`
        if none)."""
        return self.key(job)[0]

    def resolved(self) -> int:
        """How many jobs were resolved (each once)."""
        return len(self._keys)
