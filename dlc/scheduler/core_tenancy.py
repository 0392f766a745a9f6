"""The core's tenancy part: groups, quotas, limits and preemption (docs/quotas.md).

A mixin of :class:`~dlc.scheduler.core.SchedulerCore` (why mixins:
:mod:`~dlc.scheduler.core_state`). The pure planning is :func:`~dlc.scheduler.tenancy.quotas.plan`;
this part feeds it the core's queue and active jobs and carries out what it decides:
preemptions, and the stop of environments past their user's interactive limit.

Issue 28: a :class:`~dlc.scheduler.tenancy.fair_share.UsageLedger` of decayed GPU-hours, advanced
with what runs at every plan and written to the store by the leader at most every
``fair_share_flush_s`` (only the rows that changed: O(running users)); a victim whose class
has an eviction delay is marked preempted at once (so nothing more is stopped for the same
need) and killed when the delay is over (:meth:`TenancyMixin._due_evictions`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar, cast

from dlc.scheduler.core_elastic import ElasticMixin
from dlc.scheduler.core_state import _STOPPED, _done
from dlc.scheduler.inventory import AgentTotals
from dlc.scheduler.jobs import Job, JobState
from dlc.scheduler.share_placement import ShareTenants
from dlc.scheduler.tenancy.fair_share import UsageLedger, fair_view, group_weights
from dlc.scheduler.tenancy.job_groups import JobGroups
from dlc.scheduler.tenancy.policy import NO_GROUP, Policy, Resources, fmt_span
from dlc.scheduler.tenancy.preemption import EVICTED, TO_BE_EVICTED
from dlc.scheduler.tenancy.quotas import (
    QueuePlan,
    Tenure,
    agent_pool,
    job_gpus,
    plan,
    pool_capacity,
)
from dlc.scheduler.tenancy.share_charge import GpuSizes

_T = TypeVar("_T")


class TenancyMixin(ElasticMixin):
    """Tenancy hooks of the core: the policy in force, the queue plan, preemptions."""

    def _idle_roles(self) -> tuple[str, ...]:
        """DLC's roles whose offers no queued job may use (each group's jobs use only their
        role's offers; a job of an unmapped group may use any)."""
        mapping = dict(self.config.group_roles)
        groups = self._groups()
        wanted = {mapping.get(groups.group(j)) for j in self._queued.values()}
        if None in wanted:
            return ()
        return tuple(r for r in self.config.roles if r not in wanted)

    def set_tenancy(self, policy: Policy) -> None:
        """Use new groups, quotas and limits from the next round on (admin changes)."""
        with self._lock:
            self.tenancy = policy

    def active_jobs(self) -> list[Job]:
        """Jobs whose tasks may hold resources (staging, running, preempted)."""
        with self._book.lock:  # the book's: no wait for an offer round
            return list(self._active.values())

    def pool_capacity(self) -> dict[str, Resources]:
        """Pool -> totals of the known agents (kept until the agents change: every submit
        and round asks, and summing 1,213 agents each time held the core's lock)."""
        return dict(self._per_inventory("pool_capacity", lambda a: pool_capacity(a)))

    def _per_inventory(self, name: str, compute: Callable[[list[AgentTotals]], _T]) -> _T:
        """``compute(agents)``, cached until :attr:`Inventory.version` changes."""
        version, value = self._inventory_facts.get(name, (-1, None))
        if version != self.inventory.version:
            value = compute(self.inventory.agents())
            self._inventory_facts[name] = (self.inventory.version, value)
        return cast(_T, value)  # what ``compute`` made for this name

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
        smallest of its pool while it waits (:mod:`~dlc.scheduler.tenancy.share_charge`)."""
        return self._per_inventory("gpu_sizes", lambda a: GpuSizes.of(a, agent_pool))

    def plan_queue(self, queue: list[Job] | None = None, rows: bool = True) -> QueuePlan:
        """Order, admit or hold the queued jobs by the tenancy policy (``dlc queue``;
        ``rows=False``: an offer round, which reads no rows)."""
        with self._lock:
            if queue is None:
                queue = [j for j in self.queued_jobs() if self._impossible_reason(j.spec) is None]
            groups = self._round_groups = JobGroups(self.tenancy)  # this round's, once each
            return plan(
                queue, self._active.values(), self.tenancy, self.pool_capacity(), self._started,
                self.gpu_sizes() if self.tenancy.enabled else None,  # unused without a policy
                self._tenure(self._clock()) if self.tenancy.enabled else None, rows,
                groups=groups,
            )  # fmt: skip

    # -- fair share over time ------------------------------------------------------

    def reload(self) -> None:
        """As :meth:`CoreState.reload`, and read the fair-share ledger and pending
        evictions again (another instance wrote them meanwhile)."""
        with self._lock:
            super().reload()
            self.__dict__.pop("_ledger", None)
            self.__dict__.pop("_evictions_pending", None)

    def _tenure(self, now: float) -> Tenure:
        """Fair share (the ledger advanced to ``now``) and the protection rules."""
        ledger = self._fair_ledger(now)
        fair = None
        if ledger is not None:
            ledger.advance(now, self._holdings())
            fair = fair_view(ledger, self.tenancy.quotas.values(), now)
        return Tenure(now, fair, self.config.protection)

    def _fair_ledger(self, now: float) -> UsageLedger | None:
        """The ledger (read from the store once), or ``None`` with fair share off."""
        half_life = self.config.fair_share_half_life_s
        if half_life <= 0:
            return None
        ledger = self.__dict__.get("_ledger")
        if ledger is None:
            loader = getattr(self.store, "fair_usage", None)
            rows, at = loader() if callable(loader) else ([], None)
            ledger = self.__dict__["_ledger"] = UsageLedger(half_life, rows, now, at)
            self.__dict__["_ledger_flushed"] = now
        return ledger

    def _holdings(self) -> dict[tuple[str, str], float]:
        """(group, user) -> GPUs active jobs hold now (a share: its part of a GPU)."""
        sizes = self.gpu_sizes()
        out: dict[tuple[str, str], float] = {}
        groups = self._groups()
        for job in self._active.values():
            key = (groups.group(job), job.user)
            out[key] = out.get(key, 0.0) + job_gpus(self.tenancy, job, sizes, groups)
        return out

    def _flush_ledger(self, now: float) -> None:
        """Write the ledger's changed rows (leader paths only: offer rounds, kill pass)."""
        ledger = self.__dict__.get("_ledger")
        saver = getattr(self.store, "save_fair_usage", None)
        if ledger is None or saver is None:
            return
        if now - self.__dict__.get("_ledger_flushed", now) < self.config.fair_share_flush_s:
            return
        saver(ledger.take_dirty(), ledger.at)
        self.__dict__["_ledger_flushed"] = now

    def fair_share(self, viewer: str | None = None) -> dict[str, Any] | None:
        """Decayed GPU-hours per group (with its weight and ratio) and per user, for
        ``dlc quota`` and the dashboard (``viewer``: a non-admin sees only their own user
        row; ``None``: fair share off)."""
        with self._lock:
            now = self._clock()
            ledger = self._fair_ledger(now)
            if ledger is None or not self.tenancy.enabled:
                return None
            ledger.advance(now, self._holdings())
            weights = group_weights(self.tenancy.quotas.values())
            view = fair_view(ledger, self.tenancy.quotas.values(), now)
            groups = []
            for group, used in sorted(ledger.groups(now).items()):
                users = [{"user": u, "gpu_hours": h}
                         for (g, u), h in sorted(view.user_usage.items())
                         if g == group and (viewer is None or u == viewer)]  # fmt: skip
                groups.append({"group": group, "gpu_hours": used,
                               "weight": max(weights.get(group, 0.0), 1.0),
                               "ratio": view.ratio(group), "users": users})  # fmt: skip
            return {"half_life_s": ledger.half_life_s, "groups": groups}

    # -- preemption ------------------------------------------------------------

    def _preempt(self, tenancy: QueuePlan) -> list[tuple[str, str]]:
        """Mark planned victims preempted and kill their tasks (the executor stops each
        container with SIGTERM and its grace period)."""
        now = self._clock()
        # shrink first: elastic victims give back extra members before anything is evicted
        kills = self._shrink_instead(tenancy.preemptions)
        if kills:
            return kills + self._due_evictions(now)
        for victim in tenancy.preemptions:
            job = self._active.get(victim.job_id)
            if job is None or job.kill_requested or job.state is JobState.PREEMPTED:
                continue
            if victim.delay_s > 0:  # preempted now (counted as freeing), killed after the delay
                why = victim.pending_reason
                self._save(job.with_state(JobState.PREEMPTED, why), event=why)
                self._evictions[job.job_id] = (now + victim.delay_s, victim.reason)
                continue
            job = self._save(job.with_state(JobState.PREEMPTED, victim.reason), event=victim.reason)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not _done(t)]
        self._flush_ledger(now)
        return kills + self._due_evictions(now)

    @property
    def _evictions(self) -> dict[str, tuple[float, str]]:
        """Job id -> (when to kill it, its final reason): victims waiting for their class's
        eviction delay. After a restart, read back from the preempted jobs' messages and
        the time of their preemption in the job history."""
        pending = self.__dict__.get("_evictions_pending")
        if pending is None:
            pending = self.__dict__["_evictions_pending"] = {}
            for job in self._active.values():
                if job.state is JobState.PREEMPTED and f", {TO_BE_EVICTED} " in job.message:
                    decided = [at for at, state, _ in self.store.history(job.job_id)
                               if state == JobState.PREEMPTED.value]  # fmt: skip
                    delay = self.config.protection.of(job).evict_delay_s
                    final = job.message.replace(f", {TO_BE_EVICTED} ", f", {EVICTED} ", 1)
                    pending[job.job_id] = ((decided[-1] if decided else 0.0) + delay, final)
        return pending

    def _awaiting_eviction(self, job_id: str) -> bool:
        """Whether a preempted job still runs out its eviction delay (no kill yet)."""
        return job_id in self._evictions

    def _due_evictions(self, now: float) -> list[tuple[str, str]]:
        """Kill the victims whose eviction delay is over, with their final reason."""
        kills: list[tuple[str, str]] = []
        for job_id, (at, reason) in list(self._evictions.items()):
            job = self._active.get(job_id)
            if job is None or job.state is not JobState.PREEMPTED or job.kill_requested:
                del self._evictions[job_id]  # it ended or was killed meanwhile
                continue
            if now < at:
                continue
            del self._evictions[job_id]
            job = self._save(job.with_state(JobState.PREEMPTED, reason), event=reason)
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
