"""The core's tenancy part: groups, quotas, limits and preemption (docs/quotas.md).

A mixin of :class:`~dlc.scheduler.core.SchedulerCore` (why mixins:
:mod:`~dlc.scheduler.core_state`). The pure planning is :func:`~dlc.scheduler.quotas.plan`;
this part feeds it the core's queue and active jobs and carries out what it decides:
preemptions, and the stop of environments past their user's interactive limit.
"""

from __future__ import annotations

from dataclasses import replace

from dlc.scheduler.core_state import _STOPPED, CoreState, _done
from dlc.scheduler.jobs import Job, JobState
from dlc.scheduler.quotas import QueuePlan, agent_pool, plan, pool_capacity
from dlc.scheduler.share_charge import GpuSizes
from dlc.scheduler.share_placement import ShareTenants
from dlc.scheduler.tenancy import NO_GROUP, Policy, fmt_span


class TenancyMixin(CoreState):
    """Tenancy hooks of the core: the policy in force, the queue plan, preemptions."""

    def _idle_roles(self) -> tuple[str, ...]:
        """DLC's roles whose offers no queued job may use (each group's jobs use only their
        role's offers; a job of an unmapped group may use any)."""
        mapping = dict(self.config.group_roles)
        wanted = {mapping.get(self.tenancy.group_of(j.user)) for j in self._queued.values()}
        if None in wanted:
            return ()
        return tuple(r for r in self.config.roles if r not in wanted)

    def set_tenancy(self, policy: Policy) -> None:
        """Use new groups, quotas and limits from the next round on (admin changes)."""
        with self._lock:
            self.tenancy = policy

    def active_jobs(self) -> list[Job]:
        """Jobs whose tasks may hold resources (staging, running, preempted)."""
        with self._lock:
            return list(self._active.values())

    def pool_capacity(self) -> dict:
        """Pool -> totals of the known agents (kept until the agents change: every submit
        and round asks, and summing 1,213 agents each time held the core's lock)."""
        return dict(self._per_inventory("pool_capacity", lambda a: pool_capacity(a)))

    def _per_inventory(self, name: str, compute):
        """``compute(agents)``, cached until :attr:`Inventory.version` changes."""
        version, value = self._inventory_facts.get(name, (-1, None))
        if version != self.inventory.version:
            value = compute(self.inventory.agents())
            self._inventory_facts[name] = (self.inventory.version, value)
        return value

    def _share_tenants(self) -> ShareTenants:
        """Who holds shares on each GPU now (exclusive placement, docs/sharing.md)."""
        groups = self.tenancy

        def group_of(user: str) -> str | None:
            group = groups.group_of(user)
            return None if group == NO_GROUP else group

        tenants = ShareTenants(group_of=group_of)
        for job in self._active.values():
            if job.spec.is_share:
                for task in job.tasks:
                    if task.share_gpu is not None:
                        tenants.add(task.agent_id, task.share_gpu, tenants.tenant(job))
        return tenants

    def gpu_sizes(self) -> GpuSizes:
        """The GPU sizes quotas charge memory shares against: the GPU a share runs on, the
        smallest of its pool while it waits (:mod:`~dlc.scheduler.share_charge`)."""
        return self._per_inventory("gpu_sizes", lambda a: GpuSizes.of(a, agent_pool))

    def plan_queue(self, queue: list[Job] | None = None) -> QueuePlan:
        """Order, admit or hold the queued jobs by the tenancy policy (``dlc queue``)."""
        with self._lock:
            if queue is None:
                queue = [j for j in self.queued_jobs() if self._impossible_reason(j.spec) is None]
            return plan(
                queue, self._active.values(), self.tenancy, self.pool_capacity(), self._started,
                self.gpu_sizes() if self.tenancy.enabled else None,  # unused without a policy
            )  # fmt: skip

    def _preempt(self, tenancy: QueuePlan) -> list[tuple[str, str]]:
        """Mark planned victims preempted and kill their tasks (the executor stops each
        container with SIGTERM and its grace period)."""
        kills = []
        for victim in tenancy.preemptions:
            job = self._active.get(victim.job_id)
            if job is None or job.kill_requested or job.state is JobState.PREEMPTED:
                continue
            job = self._save(job.with_state(JobState.PREEMPTED, victim.reason), event=victim.reason)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not _done(t)]
        return kills

    def _stop_overdue_environments(self) -> list[tuple[str, str]]:
        """Kill interactive jobs that ran past their user's ``max_interactive_s``."""
        kills: list[tuple[str, str]] = []
        if not self.tenancy.limits:
            return kills
        now = self._clock()
        for job in list(self._active.values()):
            limits = self.tenancy.limits.get(job.user)
            if not job.spec.interactive or job.kill_requested or limits is None:
                continue
            if job.state is JobState.PREEMPTED or limits.max_interactive_s is None:
                continue
            if now - self._started.get(job.job_id, now) < limits.max_interactive_s:
                continue
            why = (f"{_STOPPED}interactive limit of {fmt_span(limits.max_interactive_s)} "
                   f"for {job.user} reached")  # fmt: skip
            job = self._save(replace(job, kill_requested=True, message=why), event=why)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not _done(t)]
        return kills
