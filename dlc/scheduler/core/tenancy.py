"""The core's tenancy part: groups, quotas, limits and preemption (docs/quotas.md).

:class:`TenancyOps`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). The pure planning is
:func:`~dlc.scheduler.tenancy.quotas.plan`; this part feeds it the core's queue and active jobs
and carries out what it decides: preemptions, and the stop of environments past their user's
interactive limit.

Issue 28: a :class:`~dlc.scheduler.tenancy.fair_share.UsageLedger` of decayed billed GPU-hours
(each job billed the largest of its GPUs, CPUs and memory in GPUs:
:mod:`~dlc.scheduler.tenancy.billing`), advanced with what runs at every plan and written to
the store by the leader at most every ``fair_share_flush_s`` (only the rows that changed:
O(running users)); a victim whose class has an eviction delay is marked preempted at once (so
nothing more is stopped for the same need) and killed when the delay is over
(:meth:`TenancyOps._due_evictions`).
"""

from __future__ import annotations

from dataclasses import replace

from dlc.scheduler.core.elastic import Elastic
from dlc.scheduler.core.state import _STOPPED, CoreState, task_ended
from dlc.scheduler.jobs.job import Job, JobState
from dlc.scheduler.placement.share_placement import ShareTenants
from dlc.scheduler.tenancy.admission_facts import AdmissionFacts
from dlc.scheduler.tenancy.billing import BillingRates, cluster_totals, rates
from dlc.scheduler.tenancy.fair_share import (
    FairShare,
    UsageLedger,
    fair_share_report,
    fair_view,
)
from dlc.scheduler.tenancy.held import held_spec
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
from dlc.scheduler.tenancy.user_holdings import UserHeld, held_by_user


class TenancyOps:
    """Tenancy hooks of the core: the policy in force, the queue plan, preemptions, and the
    admission facts submits check against.

    Args:
        state: the core's shared state.
        elastic: elastic gangs (a preemption shrinks them first).
    """

    def __init__(self, state: CoreState, elastic: Elastic) -> None:
        self.state = state
        self.elastic = elastic
        #: the fair-share ledger, read from the store on first use (:meth:`_fair_ledger`)
        self._ledger: UsageLedger | None = None
        #: when the ledger was last written to the store
        self._ledger_flushed: float | None = None
        #: victims waiting for their eviction delay, read back on first use (:attr:`_evictions`)
        self._evictions_pending: dict[str, tuple[float, str]] | None = None

    def idle_roles(self) -> tuple[str, ...]:
        """DLC's roles whose offers no queued job may use (each group's jobs use only their
        role's offers; a job of an unmapped group may use any)."""
        state = self.state
        mapping = dict(state.config.group_roles)
        groups = state.groups()
        wanted = {mapping.get(groups.group(j)) for j in state.queued.values()}
        if None in wanted:
            return ()
        return tuple(r for r in state.config.roles if r not in wanted)

    def set_tenancy(self, policy: Policy) -> None:
        """Use new groups, quotas and limits from the next round on (admin changes)."""
        with self.state.lock:
            self.state.tenancy = policy

    def active_jobs(self) -> list[Job]:
        """Jobs whose tasks may hold resources (staging, running, preempted)."""
        with self.state.book.lock:  # the book's: no wait for an offer round
            return list(self.state.active.values())

    def pool_capacity(self) -> dict[str, Resources]:
        """Pool -> totals of the known agents (kept until the agents change: every submit
        and round asks, and summing 1,213 agents each time held the core's lock)."""
        return dict(self.state.per_inventory("pool_capacity", lambda a: pool_capacity(a)))

    def share_tenants(self) -> ShareTenants:
        """Who holds shares on each GPU now (exclusive placement, docs/sharing.md)."""
        groups = self.state.tenancy

        def group_of(user: str) -> str | None:
            group = groups.group_of(user)
            return None if group == NO_GROUP else group

        tenants = ShareTenants(group_of=group_of)
        for job in self.state.active.values():
            if job.spec.is_share:
                for task in job.tasks:
                    if task.share_gpu is not None:
                        tenants.add(task.agent_id, task.share_gpu, tenants.tenant(job))
        return tenants

    def gpu_sizes(self) -> GpuSizes:
        """The GPU sizes quotas charge memory shares against: the GPU a share runs on, the
        smallest of its pool while it waits (:mod:`~dlc.scheduler.tenancy.share_charge`)."""
        return self.state.per_inventory("gpu_sizes", lambda a: GpuSizes.of(a, agent_pool))

    def admission_facts(self) -> AdmissionFacts:
        """The admission facts of the inventory as it is, or, while an offer round holds the
        core's lock, as the last one left it (a submit does not wait for rounds)."""
        state = self.state
        facts = state.admission
        if facts.version == state.inventory.version or not state.lock.acquire(blocking=False):
            return facts
        try:
            return self.publish_admission()
        finally:
            state.lock.release()

    def publish_admission(self) -> AdmissionFacts:
        """Make the admission facts of the inventory's version (under the core's lock)."""
        state = self.state
        facts = state.admission
        if facts.version != state.inventory.version:
            facts = AdmissionFacts(
                state.inventory.version,
                state.inventory.copy(),
                self.pool_capacity(),
                self.gpu_sizes(),
            )
            state.admission = facts
        return facts

    def plan_queue(self, queue: list[Job] | None = None, rows: bool = True) -> QueuePlan:
        """Order, admit or hold the queued jobs by the tenancy policy (``dlc queue``;
        ``rows=False``: an offer round, which reads no rows)."""
        state = self.state
        with state.lock:
            if queue is None:
                queue = [j for j in state.queued_jobs() if state.impossible_reason(j.spec) is None]
            groups = state.round_groups = JobGroups(state.tenancy)  # this round's, once each
            return plan(
                queue, state.active.values(), state.tenancy, self.pool_capacity(), state.started,
                self.gpu_sizes() if state.tenancy.enabled else None,  # unused without a policy
                self._tenure(state.clock()) if state.tenancy.enabled else None, rows,
                groups=groups, overheads=state.inventory.overheads,
            )  # fmt: skip

    def user_holdings(self) -> dict[str, UserHeld]:
        """Each user with active jobs -> what they hold as their limits count it (CPUs and
        memory with each task's executor, the overhead this core's placement charges), for
        ``GET /v1/quota``, ``dlc quota`` and the dashboard."""
        state = self.state
        with state.book.lock:  # the book's: no wait for an offer round
            active = list(state.active.values())
        return held_by_user(state.tenancy, active, self.gpu_sizes(), state.inventory.overheads)

    # -- fair share over time ------------------------------------------------------

    def reload(self) -> None:
        """As :meth:`CoreState.reload`, and read the fair-share ledger and pending
        evictions again (another instance wrote them meanwhile)."""
        with self.state.lock:
            self.state.reload()
            self._ledger = None
            self._evictions_pending = None

    def _tenure(self, now: float) -> Tenure:
        """Fair share (the ledger advanced to ``now``) and the protection rules."""
        ledger = self._fair_ledger(now)
        fair = None
        if ledger is not None:
            self._advance(ledger, now)
            fair = fair_view(ledger, self.state.tenancy.quotas.values(), now)
        return Tenure(now, fair, self.state.config.protection)

    def _fair_ledger(self, now: float) -> UsageLedger | None:
        """The ledger (read from the store once), or ``None`` with fair share off."""
        half_life = self.state.config.fair_share_half_life_s
        if half_life <= 0:
            return None
        ledger = self._ledger
        if ledger is None:
            loader = getattr(self.state.store, "fair_usage", None)
            rows, at = loader() if callable(loader) else ([], None)
            ledger = self._ledger = UsageLedger(half_life, rows, now, at)
            self._ledger_flushed = now
        return ledger

    def billing_rates(self) -> BillingRates | None:
        """What fair share bills a CPU and a MiB as, in GPUs (``--fair-share-billing``, by
        default the cluster's ratios: the sum of the pools the quota planner counts);
        ``None`` while no agent is known."""
        totals = cluster_totals(self.pool_capacity().values())
        return rates(self.state.config.fair_share_billing, totals)

    def _advance(self, ledger: UsageLedger, now: float) -> None:
        """Count what active jobs hold up to ``now``. While no agent is known (just after
        a restart) the ratios are unknown: the ledger waits, and counts the time since it
        stopped once they are known, so no CPU-only job runs unbilled meanwhile."""
        billing = self.billing_rates()
        if billing is not None:
            ledger.advance(now, self._holdings(billing))

    def _holdings(self, billing: BillingRates) -> dict[tuple[str, str], float]:
        """(group, user) -> GPUs active jobs are billed for now: each job the largest of
        its GPUs (a share: its part of a GPU), its CPUs and its memory in GPUs."""
        state = self.state
        sizes = self.gpu_sizes()
        out: dict[tuple[str, str], float] = {}
        groups = state.groups()
        for job in state.active.values():
            key = (groups.group(job), job.user)
            spec, gpus = held_spec(job), job_gpus(state.tenancy, job, sizes, groups)
            billed = billing.billed_amounts(gpus, spec.cpus * spec.nodes, spec.mem_mib * spec.nodes)
            out[key] = out.get(key, 0.0) + billed
        return out

    def _flush_ledger(self, now: float) -> None:
        """Write the ledger's changed rows (leader paths only: offer rounds, kill pass)."""
        ledger = self._ledger
        saver = getattr(self.state.store, "save_fair_usage", None)
        if ledger is None or saver is None:
            return
        flushed = self._ledger_flushed
        if now - (now if flushed is None else flushed) < self.state.config.fair_share_flush_s:
            return
        saver(ledger.take_dirty(), ledger.at)
        self._ledger_flushed = now

    def fair_share(self, viewer: str | None = None) -> FairShare | None:
        """Decayed billed GPU-hours per group (with its weight and ratio) and per user, for
        ``dlc quota`` and the dashboard (``viewer``: a non-admin sees only their own user
        row; ``None``: fair share off)."""
        state = self.state
        with state.lock:
            now = state.clock()
            ledger = self._fair_ledger(now)
            if ledger is None or not state.tenancy.enabled:
                return None
            self._advance(ledger, now)
            return fair_share_report(ledger, list(state.tenancy.quotas.values()), now, viewer,
                                     self.billing_rates())  # fmt: skip

    # -- preemption ------------------------------------------------------------

    def preempt(self, tenancy: QueuePlan) -> list[tuple[str, str]]:
        """Mark planned victims preempted and kill their tasks (the executor stops each
        container with SIGTERM and its grace period)."""
        state = self.state
        now = state.clock()
        # shrink first: elastic victims give back extra members before anything is evicted
        kills = self.elastic.shrink_instead(tenancy.preemptions)
        if kills:
            return kills + self._due_evictions(now)
        for victim in tenancy.preemptions:
            job = state.active.get(victim.job_id)
            if job is None or job.kill_requested or job.state is JobState.PREEMPTED:
                continue
            if victim.delay_s > 0:  # preempted now (counted as freeing), killed after the delay
                why = victim.pending_reason
                state.save(job.with_state(JobState.PREEMPTED, why), event=why)
                self._evictions[job.job_id] = (now + victim.delay_s, victim.reason)
                continue
            job = state.save(job.with_state(JobState.PREEMPTED, victim.reason), event=victim.reason)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not task_ended(t)]
        self._flush_ledger(now)
        return kills + self._due_evictions(now)

    @property
    def _evictions(self) -> dict[str, tuple[float, str]]:
        """Job id -> (when to kill it, its final reason): victims waiting for their class's
        eviction delay. After a restart, read back from the preempted jobs' messages and
        the time of their preemption in the job history."""
        pending = self._evictions_pending
        if pending is None:
            pending = self._evictions_pending = {}
            for job in self.state.active.values():
                if job.state is JobState.PREEMPTED and f", {TO_BE_EVICTED} " in job.message:
                    decided = [at for at, state, _ in self.state.store.history(job.job_id)
                               if state == JobState.PREEMPTED.value]  # fmt: skip
                    delay = self.state.config.protection.of(job).evict_delay_s
                    final = job.message.replace(f", {TO_BE_EVICTED} ", f", {EVICTED} ", 1)
                    pending[job.job_id] = ((decided[-1] if decided else 0.0) + delay, final)
        return pending

    def awaiting_eviction(self, job_id: str) -> bool:
        """Whether a preempted job still runs out its eviction delay (no kill yet)."""
        return job_id in self._evictions

    def _due_evictions(self, now: float) -> list[tuple[str, str]]:
        """Kill the victims whose eviction delay is over, with their final reason."""
        kills: list[tuple[str, str]] = []
        for job_id, (at, reason) in list(self._evictions.items()):
            job = self.state.active.get(job_id)
            if job is None or job.state is not JobState.PREEMPTED or job.kill_requested:
                del self._evictions[job_id]  # it ended or was killed meanwhile
                continue
            if now < at:
                continue
            del self._evictions[job_id]
            job = self.state.save(job.with_state(JobState.PREEMPTED, reason), event=reason)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not task_ended(t)]
        return kills

    def stop_overdue_environments(self) -> list[tuple[str, str]]:
        """Kill interactive jobs that ran past their user's ``max_interactive_s``."""
        state = self.state
        kills: list[tuple[str, str]] = []
        if not state.tenancy.limits:
            return kills
        now = state.clock()
        for job in list(state.active.values()):
            limits = state.tenancy.limits.get(job.user)
            if not job.spec.interactive or job.kill_requested or limits is None:
                continue
            if job.state is JobState.PREEMPTED or limits.max_interactive_s is None:
                continue
            if now - state.started.get(job.job_id, now) < limits.max_interactive_s:
                continue
            why = (f"{_STOPPED}interactive limit of {fmt_span(limits.max_interactive_s)} "
                   f"for {job.user} reached")  # fmt: skip
            job = state.save(replace(job, kill_requested=True, message=why), event=why)
            kills += [(t.task_id, t.agent_id) for t in job.tasks if not task_ended(t)]
        return kills
