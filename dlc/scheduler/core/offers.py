"""The core's offer round: decide on offers, launch, echo, reserve, and say why jobs wait.

:class:`OfferRound`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why
components: :mod:`~dlc.scheduler.core.state`). :func:`~dlc.scheduler.placement.decide.decide` is
the pure decision; this part carries it out: jobs saved as staging before their launches are
returned, TaskInfos cut from the offers as offered (the codec's ``echo_round``; for Mesos
:mod:`dlc.mesos.echo`), agents reserved for a big job that keeps being passed over
(:mod:`~dlc.scheduler.jobs.queue`), and a reason kept for every waiting job.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field, replace
from itertools import filterfalse
from typing import Any

from dlc.errors import DlcError
from dlc.scheduler.core.config import Actions
from dlc.scheduler.core.consolidation import Consolidation
from dlc.scheduler.core.elastic import Elastic
from dlc.scheduler.core.offer_views import with_fields
from dlc.scheduler.core.ports import EchoedRound
from dlc.scheduler.core.share_hold import ShareHolds
from dlc.scheduler.core.state import CoreState, task_ended
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.gangs.topology import Locality, choose_group, spread, wanted
from dlc.scheduler.jobs.job import Job, JobState, TaskPlacement
from dlc.scheduler.placement.decide import DecideRequest, Decision, QueueChanges, decide
from dlc.scheduler.placement.model import NO_TOPOLOGY_POLICY, Launch, OfferView
from dlc.scheduler.placement.round_cap import CAP_PREFIX
from dlc.scheduler.placement.shape_cache import DEFERRED_PREFIX
from dlc.scheduler.placement.share_hold import HELD_PREFIX
from dlc.scheduler.placement.share_launch import share_fields
from dlc.scheduler.tasks.launch import TaskLaunch
from dlc.scheduler.tenancy.quotas import QueuePlan, split_by_pool

_job_id = operator.attrgetter("job_id")


@dataclass(frozen=True)
class _Prepared:
    """What an offer round's apply writes for its launches, made before the book's lock."""

    #: the jobs that waited though they could run (id -> why): not held back, not impossible
    placeable: dict[str, str]
    #: the pinned queue by job id (the book's frozen view: no map of 10,000 jobs is built
    #: per round, issue 26); it holds every job of the round's queue, and only held-back
    #: jobs besides (no decision names those)
    jobs: Mapping[str, Job] = field(default_factory=dict)
    #: the launches' TaskInfos cut from the offers (``None``: the apply makes them)
    echoed: EchoedRound | None = None
    #: the placed jobs that fit, as staging (saved in one write)
    staged: list[Job] = field(default_factory=list)


def _placeable(decision: Decision) -> dict[str, str]:
    """The waiting jobs that could run: elastic gangs shrink for them, and only they are
    passed over (a share the hold keeps back, or one the shape budget did not try, is not)."""
    return {j: r for j, r in decision.waiting.items()
            if j not in decision.impossible
            and not r.startswith((HELD_PREFIX, DEFERRED_PREFIX))}  # fmt: skip


def _holds_text(task: TaskPlacement) -> str:
    """What a starting task holds: ``GPUs 0,1``, ``0.5 of GPU 2``, or ``(CPU only)``."""
    if task.share_text:
        return task.share_text
    return "GPUs " + ",".join(map(str, task.gpu_ids)) if task.gpu_ids else "(CPU only)"


def _short_of_room(state: CoreState, job: Job) -> set[str]:
    """Agents (with the master's totals) where tasks holding no GPU keep too few CPUs or too
    little memory for one task of ``job`` (its executor's share included), however many of
    its GPUs drain (red-team finding 53, docs/security.md)."""
    extra = state.config.placement
    kept: dict[str, tuple[float, float]] = {}
    for other in state.active.values():
        spec = other.spec
        for task in other.tasks:
            if task.gpu_ids or task.share_gpu is not None or task_ended(task):
                continue
            cpus, mem = kept.get(task.agent_id, (0.0, 0.0))
            kept[task.agent_id] = (cpus + spec.cpus + extra.executor_cpus,
                                   mem + spec.mem_mib + extra.executor_mem_mib)  # fmt: skip
    cpus = job.spec.cpus + extra.executor_cpus
    mem = job.spec.mem_mib + extra.executor_mem_mib
    short = set()
    for agent_id, (held_cpus, held_mem) in kept.items():
        agent = state.inventory.get(agent_id)
        if (
            agent is not None
            and agent.exact
            and (agent.cpus - held_cpus < cpus - 1e-9 or agent.mem_mib - held_mem < mem - 1e-9)
        ):
            short.add(agent_id)
    return short


def _by_id(queue: list[Job]) -> dict[str, Job]:
    """``queue`` by job id (in C: 10,000 jobs)."""
    return dict(zip(map(_job_id, queue), queue, strict=True))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"


class OfferRound:
    """The offer round: :meth:`on_offers` and what it writes through.

    Args:
        state: the core's shared state.
        tenancy_ops: the queue plan, share tenants, preemptions, admission facts.
        elastic: elastic gangs grow on what the queue left, or shrink for it.
        share_holds: the share hold and the mix whole-GPU placements are scored against.
        consolidation: moves for a job fragmentation denies.
    """

    def __init__(
        self,
        state: CoreState,
        tenancy_ops: TenancyOps,
        elastic: Elastic,
        share_holds: ShareHolds,
        consolidation: Consolidation,
    ) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops
        self.elastic = elastic
        self.share_holds = share_holds
        self.consolidation = consolidation

    def on_offers(self, offers: list[dict[str, Any]]) -> Actions:
        """Decide on ``offers`` (:func:`~dlc.scheduler.placement.decide.decide`, pure), then carry
        the decision out: persist launches before returning them, record reasons.

        The round decides on the queue as it was when the round began (jobs submitted
        meanwhile wait for the next round; submits and kills of queued jobs take only the
        job book's lock, :mod:`~dlc.scheduler.core.job_book`), then applies under the book's lock:
        a job killed while the round decided is not launched, and its offers are declined."""
        state = self.state
        with state.lock:
            queue = state.pin_queue()
            try:
                return self._offer_round(offers, queue)
            finally:
                state.unpin_queue()
                self.tenancy_ops.publish_admission()  # submits check against what this round learnt

    def _offer_round(self, offers: list[dict[str, Any]], queue: list[Job]) -> Actions:
        """One round on the pinned queue ``queue`` (placement order), under the core's lock."""
        state = self.state
        now = state.clock()
        if not state.queued and state.reserver is None and not self.elastic.growable():
            return self._idle_round(now, offers)
        state.catch_up_offers()  # what idle rounds kept, before this round's offers
        # (the shareable agents as the inventory knows them now: the parse changes nothing)
        shareable = state.inventory.shareable_ids()
        views, bad = state.offer_parser.parse(offers, mark=shareable.__contains__)
        state.inventory.note_offers(views, now)
        state.drains.expire(now)
        usable = self._marked(self._usable(views, now))
        self._end_reservation_if_due(now)
        held: dict[str, str] = {}
        # the pinned queue's ids while the queue decided on is that queue, in its order
        ids = state.book.pinned_ids() if not state.tenancy.enabled else None
        if state.drains.waiting_jobs(now):  # never two attempts at once
            for job in queue:
                wait = state.drains.job_wait(job.job_id, now)
                if wait is not None:
                    held[job.job_id] = wait
            queue = [j for j in queue if j.job_id not in held]
            ids = None if held else ids
        tenancy = self.tenancy_ops.plan_queue(queue, rows=False)  # quotas, fair order, user limits
        decision = decide(DecideRequest(
            queue=tenancy.runnable, queue_ids=ids, queue_changes=self._queue_changes(ids),
            inventory=state.inventory, offers=usable,
            config=state.config.placement, now=now,
            reserved=state.reservations.held(), impossible_of=state.impossible_reason,
            topology_of=state.topology_of, driver_ok=state.driver_ok,
            split=lambda views, jobs: split_by_pool(views, jobs, state.tenancy, state.groups()),
            share_tenants=self.tenancy_ops.share_tenants() if tenancy.runnable else None,
            share_hold=self.share_holds.hold(now, tenancy.runnable),
            budget=state.shape_budget, mix=self.share_holds.placement_mix, cap=state.round_cap,
            memo=state.round_memo,
        ))  # fmt: skip
        self.share_holds.note_held(now, decision.waiting)
        held.update(tenancy.held)
        # TaskInfos, the echo and the staged jobs before the book's lock, on the pinned
        # queue: submits wait for that lock, and building these held it 60-90 ms a round
        prepared: _Prepared | None = self.prepare_launch(queue, decision, offers)
        # apply under the book's lock (then the store's: the lock order of job_book), on
        # the live queue: no submit or kill in between
        with state.book.lock:
            pinned = decision
            queue, decision, held = self._still_queued(queue, decision, held)
            state.pinned = state.book.queued
            if decision is not pinned:  # a kill while deciding: cut again, on what is left
                prepared = None
            if not queue:
                return self._carry_out(now, offers, views, usable, queue, bad, decision,
                                       held, tenancy, prepared)  # fmt: skip
            # the round's launches and reasons in one transaction; if it fails, memory
            # is read back from the store so the two agree (nothing of the round happened)
            batch = getattr(state.store, "transaction", None)
            try:
                with batch("writing an offer round") if batch else nullcontext():
                    return self._carry_out(
                        now, offers, views, usable, queue, bad, decision, held, tenancy, prepared
                    )
            except Exception:
                if batch:
                    with suppress(DlcError):  # a store that cannot be read: the error above
                        self.tenancy_ops.reload()
                raise

    def _queue_changes(self, ids: list[str] | None) -> QueueChanges | None:
        """How the pinned queue changed since the pin before, while the round decides on
        it as pinned (``ids``: its ids, ``None`` when it does not)."""
        state = self.state
        if ids is None or state.pinned is None:
            return None
        pin, changed = state.book.pinned_changes()
        return QueueChanges(pin, changed, state.pinned)

    def _still_queued(
        self, queue: list[Job], decision: Decision, held: dict[str, str]
    ) -> tuple[list[Job], Decision, dict[str, str]]:
        """The round's queue and decision less the jobs killed while it decided (under the
        book's lock): they get no launch (their offers are declined unless another launch
        uses them) and no reason. Only a kill changes a queued job outside the core's lock,
        and it takes the job out of the queue, so "still queued" is "unchanged". The book
        lists the jobs that left the queue since the round pinned it: only those are
        looked at, not the whole queue (10,000 jobs a round at openb scale, issue 26); one
        submitted meanwhile and killed is in no decision (nor looked at: not pinned)."""
        state = self.state
        live, at_pin = state.book.queued, state.pinned or {}
        gone = {j for j in state.book.left_since_pin() if j in at_pin and j not in live}
        if not gone:
            return queue, decision, held
        decision = replace(
            decision,
            launches=[x for x in decision.launches if x.job_id not in gone],
            placed_jobs=[j for j in decision.placed_jobs if j not in gone],
            waiting={j: r for j, r in decision.waiting.items() if j not in gone},
            impossible={j: r for j, r in decision.impossible.items() if j not in gone},
            skipped=[j for j in decision.skipped if j not in gone],
        )
        kept = [j for j in queue if j.job_id not in gone]
        return kept, decision, {j: r for j, r in held.items() if j not in gone}

    def _idle_round(self, now: float, offers: list[dict[str, Any]]) -> Actions:
        """A round with nothing queued: decline every offer by id, suppress, and keep the
        offers unparsed (:class:`~dlc.scheduler.core.offer_views.IdleOffers`); no per-offer work
        beyond that (issue 26: the parse was most of an empty round). With ``--reserve``
        the full round runs instead (it gives idle reserved GPUs back), and so it does while
        an elastic gang may grow on the offers (:mod:`~dlc.scheduler.core.elastic`)."""
        state = self.state
        state.drains.expire(now)
        self._end_reservation_if_due(now)
        self.share_holds.note_held(now, {})
        declines, learn = state.idle_offers.keep(offers, now, self._exact_agents())
        if learn:  # agents without the master's totals learn from offers at once
            views, _ = state.offer_parser.parse(learn, False, state.accounts_shares)
            state.inventory.note_offers(views, now)
        if state.metrics is not None:
            state.metrics.record_round([], len(offers), len(declines), 0.0, [])
        # (the consolidation forgets what it planned for jobs gone meanwhile)
        kills = self.consolidation.consolidate(now, [], {}, [])
        # as every round: victims whose eviction delay is over, and the fair-share ledger
        kills += self.tenancy_ops.preempt(QueuePlan())
        return Actions(declines=declines, kills=kills, suppress=True)

    def _usable(self, views: list[OfferView], now: float) -> list[OfferView]:
        """``views`` less the agents whose master just refused a task's resources (they
        take no task for a while), and less the GPUs still draining. With no refusal and no
        drain kept (most rounds) that is every view as it is: no step per agent."""
        state = self.state
        if not state.refusals and not state.drains:
            return list(views)
        return [state.drains.strip(v) for v in views
                if not state.refusals.blocked(v.agent_id, now)]  # fmt: skip

    def _marked(self, views: list[OfferView]) -> list[OfferView]:
        """``views`` with those of share-accounting agents marked, as :func:`~dlc.scheduler.
        decide.decide` would mark them but with a cheap copy (``dataclasses.replace`` of
        1,213 views each round was a large part of a round's fixed cost)."""
        shareable = self.state.inventory.shareable_ids()
        return [
            with_fields(v, shares_accounted=True)
            if not v.shares_accounted and v.agent_id in shareable
            else v
            for v in views
        ]

    def _exact_agents(self) -> frozenset[str]:
        """Agents the master gave exact totals (kept per inventory version)."""
        state = self.state
        version, ids = state.exact_ids
        if version != state.inventory.version:
            ids = frozenset(a.agent_id for a in state.inventory.agents() if a.exact)
            state.exact_ids = (state.inventory.version, ids)
        return ids

    def _carry_out(
        self, now: float, offers: list[dict[str, Any]], views: list[OfferView],
        usable: list[OfferView], queue: list[Job], bad: list[str], decision: Decision,
        held: dict[str, str], tenancy: QueuePlan, prepared: _Prepared | None = None,
    ) -> Actions:  # fmt: skip
        """Write a decision through: staging jobs, TaskInfos, metrics, reservations, reasons,
        and the preemptions the tenancy plan asks for (``prepared``: the TaskInfos, echo and
        staged jobs :meth:`prepare_launch` made for this very decision)."""
        state = self.state
        # the pinned queue's map while the decision is the one prepared (no kill changed it)
        jobs = prepared.jobs if prepared is not None else _by_id(queue)
        # elastic gangs grow on the agents the queue's launches left alone, or shrink for it
        placeable = prepared.placeable if prepared is not None else _placeable(decision)
        used = {x.agent_id for x in decision.launches}
        # what the queue launches now counts against the limits growth keeps to
        launching = {x.job_id: jobs[x.job_id] for x in decision.launches if x.job_id in jobs}
        growth, shrinks = self.elastic.resize(usable, used, placeable, launching.values())
        grown = {o for _, x in growth for o in x.offer_ids}
        actions = Actions(
            declines=[o for o in bad + decision.declines if o not in grown],
            kills=list(decision.kills) + shrinks,
        )
        if prepared is not None and prepared.echoed is not None and not growth:
            echoed = prepared.echoed
            state.save_all(prepared.staged)
        else:
            echoed = self._launch(jobs, decision, offers, growth)
        actions.accepts = echoed.accepts
        actions.operations = echoed.operations
        busy = {o for ids in echoed.operations for o in ids}  # offers an UNRESERVE uses
        actions.declines = [o for o in actions.declines if o not in busy]
        declined = set(actions.declines)  # one set: 1,000 offers made this O(n^2)
        actions.declines += [o for o in echoed.unused if o not in declined]
        actions.kills += self.tenancy_ops.preempt(tenancy)
        refused = {j: r for j, r in echoed.refused.items() if j in jobs}  # not a new member
        waiting = {**decision.waiting, **refused}
        for job_id, note in tenancy.notes.items():
            if job_id in waiting and job_id not in decision.impossible:
                waiting[job_id] = note
        if state.metrics is not None:
            placed = [(jobs[j], decision.launches_of(j)) for j in decision.placed_jobs]
            state.metrics.record_round(
                views, len(offers), len(actions.declines), decision.placement_s, placed
            )
        # a share the hold keeps back is not passed over (placeable above): it must not
        # reserve agents, nor is a job the shape budget did not try this round (shape_cache)
        state.reservations.record_round(decision.placed_jobs, placeable)
        set_aside = set(decision.impossible) | set(held)
        runnable = [j for j in queue if j.job_id not in set_aside] if set_aside else queue
        self._maybe_reserve(now, runnable, placeable, usable)
        # after reserving
        actions.kills += self.consolidation.consolidate(now, runnable, placeable, usable)
        # a job the round cap has not yet considered keeps its last reason, or gets one in
        # memory (the API's queue reason; 10,000 message writes made a first round slow)
        reasons = state.reasons
        # offers back at once only for jobs that never had a turn (a burst of submits): a
        # backlog that had its turns and waits for capacity keeps the refuse filter, or a
        # large cluster would run a full round every allocation interval for nothing
        actions.soon = any(
            reasons.get(j, CAP_PREFIX).startswith(CAP_PREFIX) for j in decision.skipped
        )
        not_yet = state.round_cap.reason()  # one text for the round, not one per skipped job
        # (as a setdefault per skipped job, in C: some 10,000 of them a round)
        reasons.update(dict.fromkeys(filterfalse(reasons.__contains__, decision.skipped), not_yet))
        self._note_reasons(now, {**waiting, **held}, usable)
        # with --reserve, offers keep coming while GPUs are reserved, so idle ones get released
        actions.suppress = not state.queued and not (state.reserver and state.reserver.holding())
        actions.suppress = actions.suppress and not self.elastic.growable()
        if not actions.suppress and state.config.group_roles and not state.reserver:
            actions.suppress_roles = self.tenancy_ops.idle_roles()
        return actions

    def prepare_launch(
        self, queue: list[Job], decision: Decision, offers: list[dict[str, Any]]
    ) -> _Prepared:
        """The round's placeable waiters, TaskInfos echoed from the offers, and the jobs to
        save as staging, made from the decision before the book's lock is taken (pure: the
        pinned queue and the decision do not change). No TaskInfos where the apply must
        make them itself: with ``--reserve`` (the echo reserves) or with elastic gangs (they
        may grow into the queue's offers, and shrinking saves)."""
        state = self.state
        placeable = _placeable(decision)
        # the pinned view holds the queue's jobs by id already (the round pinned it)
        jobs = state.pinned if state.pinned is not None else _by_id(queue)
        if state.reserver is not None or not decision.launches or self.elastic.gangs():
            return _Prepared(placeable, jobs)
        echoed, by_job = self._echo(jobs, decision, offers)
        staged = [self._staged(jobs[j], by_job[j]) for j in decision.placed_jobs
                  if j not in echoed.refused]  # fmt: skip
        return _Prepared(placeable, jobs, echoed, staged)

    def _echo(
        self,
        jobs: Mapping[str, Job],
        result: Decision,
        offers: list[dict[str, Any]],
        growth: Sequence[tuple[Job, Launch]] = (),
    ) -> tuple[EchoedRound, dict[str, list[Launch]]]:
        """The TaskInfos of :meth:`_launch`, cut from the offers, and the launches by job."""
        state = self.state
        # with a tenancy policy every kill (preemption above all) gets the policy's grace
        grace = state.tenancy.grace_s if state.tenancy.enabled else None
        by_job: dict[str, list[Launch]] = {}
        for launch in result.launches:
            by_job.setdefault(launch.job_id, []).append(launch)
        # the engine's messages (Mesos: TaskInfos) come from the codec the core was given
        encode, fid, executor = (
            state.codec.encode,
            state.framework_id,
            state.config.executor,
        )
        infos = [
            (job_id, [encode(TaskLaunch(jobs[job_id], x, fid, executor, grace))
                      for x in by_job[job_id]])
            for job_id in result.placed_jobs
        ]  # fmt: skip
        infos += [(launch.task_id, [encode(TaskLaunch(job, launch, fid, executor, grace))])
                  for job, launch in growth]  # fmt: skip
        owner = {launch.task_id: job for job, launch in growth}
        group_roles = dict(state.config.group_roles)
        echoed = state.codec.echo_round(
            offers, infos, state.config.roles or None, state.reserver, state.clock(),
            (lambda j: group_roles.get(state.tenancy.group_of((jobs.get(j) or owner[j]).user)))
            if group_roles else None,
        )  # fmt: skip
        return echoed, by_job

    def _launch(
        self,
        jobs: Mapping[str, Job],
        result: Decision,
        offers: list[dict[str, Any]],
        growth: Sequence[tuple[Job, Launch]] = (),
    ) -> EchoedRound:
        """TaskInfos of the placed jobs and the elastic gangs' new members (``growth``:
        ``(job, launch)``), their resources cut from the offers as offered (roles,
        reservations; ``codec.echo_round``, for Mesos :mod:`dlc.mesos.echo`); only jobs that
        fit start."""
        echoed, by_job = self._echo(jobs, result, offers, growth)
        self.state.save_all([self._staged(jobs[j], by_job[j]) for j in result.placed_jobs
                        if j not in echoed.refused])  # fmt: skip
        for job, launch in growth:
            if launch.task_id not in echoed.refused:
                self.elastic.add_member(job, launch, share_fields(launch))
        return echoed

    def _staged(self, job: Job, launches: list[Launch]) -> Job:
        """``job`` as it starts: staging, on ``launches``, saying where."""
        tasks = tuple(
            TaskPlacement(
                x.task_id,
                x.agent_id,
                x.hostname,
                x.gpu_ids,
                x.offer_ids[0],
                x.rank,
                **share_fields(x),
                # an elastic gang's members all rendezvous at node 0
                # (dlc/scheduler/gangs/elastic.py)
                rendezvous=x.peers[0] if job.spec.nodes_max is not None and x.peers else "",
            )  # fmt: skip
            for x in launches
        )
        gpus = "; ".join(f"{t.hostname} {_holds_text(t)}" for t in tasks)
        if any(x.policy == NO_TOPOLOGY_POLICY for x in launches):
            gpus += " (first-fit: the agent has no dlc_topo attribute)"
        if len(tasks) > 1:  # where the gang went: one switch, one rack ... (gangs/topology.py)
            where = spread([self._locality(t.agent_id) for t in tasks])
            gpus += f" ({where})" if where else ""
        return replace(job, state=JobState.STAGING, tasks=tasks, message=f"launching on {gpus}")

    def _locality(self, agent_id: str) -> Locality:
        agent = self.state.inventory.get(agent_id)
        return agent.locality if agent is not None else Locality()

    def _end_reservation_if_due(self, now: float) -> None:
        state = self.state
        active = state.reservations.active
        if active is None:
            return
        gone = [a for a in active.agent_ids if state.inventory.get(a) is None]
        holder = state.queued.get(active.job_id)
        impossible = state.impossible_reason(holder.spec) if holder is not None else None
        if impossible is not None:
            why = f"impossible on the current agents: {impossible}"
        elif gone:
            why = f"agent {', '.join(gone)} left the cluster"
        elif state.reservations.expired(now):
            why = f"held for {_minutes(state.reservations.hold_s)} without room for the job"
        else:
            return
        state.reservations.release(active.job_id, now)
        job = state.queued.get(active.job_id)
        if job is not None:
            agents = ", ".join(active.agent_ids)
            state.save(job, event=f"released reserved agent {agents}: {why}; others may use it")

    def _maybe_reserve(
        self, now: float, queue: list[Job], waiting: dict[str, str], views: list[OfferView]
    ) -> None:
        # the jobs passed over this round (the few considered) that are due to reserve;
        # most rounds none is, and the queue (10,000 jobs at openb scale) is not walked
        state = self.state
        due = {j for j in waiting if state.reservations.may_reserve(j, now)}
        if not due:
            return
        for job in queue:
            if job.job_id not in due:
                continue
            able = state.inventory.able_agents(job.spec)
            if len(able) < job.spec.nodes:
                continue
            free = state.free_gpus(views)
            if job.spec.is_cpu_only:  # it needs no GPU: hold an agent without GPUs first
                able.sort(key=lambda a: (len(a.gpu_ids), a.agent_id))
            else:
                # most GPUs free first, but last an agent whose GPU-less tasks (CPU-only
                # jobs) keep the job's CPUs or memory: its GPUs draining frees no room there
                short = _short_of_room(state, job)
                able.sort(key=lambda a: (a.agent_id in short, -len(free.get(a.agent_id, ())),
                                         a.agent_id))  # fmt: skip
            if job.spec.nodes > 1:  # a gang drains agents of one switch, rack or zone
                want = wanted(job.spec.gang_topology)
                group = choose_group(able, job.spec.nodes, lambda a: a.locality, want)
                if group is None:
                    continue
                able = group.order
            chosen = [a.agent_id for a in able[: job.spec.nodes]]
            held = state.reservations.reserve(job.job_id, chosen, now)
            free_text = self._free_text(held.agent_ids, views, job.spec.is_cpu_only)
            state.save(job, event=held.describe(now, free_text))
            return

    def _free_text(
        self, agent_ids: Iterable[str], views: list[OfferView], cpu_only: bool = False
    ) -> str:
        """``2 of 8 GPUs free`` per held agent (for a CPU-only job: ``4 of 16 cpus free``,
        the offered CPUs)."""
        offered: dict[str, float] = {}
        if cpu_only:
            for view in views:
                offered[view.agent_id] = offered.get(view.agent_id, 0.0) + view.cpus
        free = self.state.free_gpus(views)
        parts = []
        for agent_id in agent_ids:
            agent = self.state.inventory.get(agent_id)
            if cpu_only:
                total = f" of {agent.cpus:g}" if agent is not None and agent.exact else ""
                parts.append(f"{offered.get(agent_id, 0.0):g}{total} cpus free")
                continue
            count = len(agent.gpu_ids) if agent else 0
            parts.append(f"{len(free.get(agent_id, ()))} of {count} GPUs free")
        return "; ".join(parts)

    def _note_reasons(self, now: float, waiting: dict[str, str], views: list[OfferView]) -> None:
        """Keep each waiting job's reason; write the messages that changed, in one go."""
        state = self.state
        active = state.reservations.active
        changed = []
        for job_id, reason in waiting.items():
            job = state.queued.get(job_id)
            if job is None:  # killed while the round decided (it took the book's lock only)
                continue
            cpu_only = job.spec.is_cpu_only  # held GPUs are nothing it waits for
            if active is not None and active.job_id == job_id:
                reason = active.describe(now, self._free_text(active.agent_ids, views, cpu_only))
            elif reason.startswith("no offer") and len(state.drains) and not cpu_only:
                reason += "; some GPUs are held until an earlier task is confirmed gone"
            state.reasons[job_id] = reason
            message = f"waiting: {reason}"
            if job.message != message:
                changed.append(replace(job, message=message))
        # one transaction for the round's reasons (a store without the batch write, such as
        # a test's, gets them one by one)
        save_messages = getattr(state.store, "save_messages", None)
        if save_messages is None:
            for job in changed:
                state.save(job)
            return
        save_messages(changed)
        for job in changed:
            state.track(job)
