"""The pure decision of one offer round: queue + inventory + offers + config -> Decision.

:func:`decide` reads only its arguments: no store, no clock of its own, no Mesos. The
scheduler core calls it on every batch of offers and then carries the decision out
(stores the launched jobs as staging, builds TaskInfos, records reasons and reservations);
a simulator drives exactly this function with a virtual clock and no Mesos.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress, filterfalse
from typing import Any

from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import (
    DriverCheck,
    Launch,
    MixSource,
    OfferView,
    PlacementConfig,
    PlacementResult,
    TopologyOf,
)
from dlc.scheduler.placement.placer import place
from dlc.scheduler.placement.round_cap import RoundCap, TurnDelta
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.shape_cache import DEFERRED_PREFIX, ShapeBudget
from dlc.scheduler.placement.share_hold import ShareHold
from dlc.scheduler.placement.share_placement import ShareTenants


@dataclass
class Decision:
    """What one offer round decided.

    Attributes:
        launches: tasks to launch, in order (several per job for a gang).
        placed_jobs: ids of the jobs launched, in order.
        declines: offer ids to decline (no task landed on their agent).
        kills: ``(task_id, agent_id)`` to kill (none today: kills come from status updates).
        waiting: job id -> why it waits (every queued job not launched and not skipped
            has one).
        impossible: the subset of ``waiting`` no known agent could ever run.
        skipped: ids of the runnable jobs the round cap left for later rounds
            (:mod:`~dlc.scheduler.placement.round_cap`); they keep their earlier reasons.
        placement_s: seconds placement took (for the metrics; not a decision input).
    """

    launches: list[Launch] = field(default_factory=list)
    placed_jobs: list[str] = field(default_factory=list)
    declines: list[str] = field(default_factory=list)
    kills: list[tuple[str, str]] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    impossible: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    placement_s: float = 0.0

    def launches_of(self, job_id: str) -> list[Launch]:
        """The launches of one placed job, by rank."""
        return [x for x in self.launches if x.job_id == job_id]


@dataclass(frozen=True)
class QueueChanges:
    """How the pinned queue differs from the one pinned before it
    (:meth:`~dlc.scheduler.core.job_book.JobBook.pinned_changes`)."""

    pin: int
    """The pin's number (one more than the pin before it)."""
    changed: Sequence[str]
    """Every job id that entered or left the queue between the two pins."""
    jobs: Mapping[str, Job]
    """The pinned queue by job id."""


#: ``(offers, jobs) -> [(offers, jobs), ...]``: how one round is cut into placement batches
Splitter = Callable[[Sequence[OfferView], list[Job]], list[tuple[list[OfferView], list[Job]]]]


@dataclass(frozen=True, kw_only=True)
class DecideRequest:
    """Everything one offer round decides on; :func:`decide` reads nothing else.

    Built with keywords only, so a new input is one new field with a default and no
    caller has to count positions.
    """

    queue: Sequence[Job]
    """Queued jobs in queue order (:func:`~dlc.scheduler.jobs.queue.queue_order`)."""
    queue_ids: Sequence[str] | None = None
    """The job ids of ``queue``, in its order, when the caller has them (the job book keeps
    them: reading ``job_id`` of 10,000 jobs a round cost their memory reads); default: read
    from the jobs."""
    queue_changes: QueueChanges | None = None
    """With ``queue_ids``, when ``queue`` is the pinned queue as it is (queue-key order, no
    job held out): how it changed since the pin before, so the round cap applies that to
    the turns it keeps instead of reading every job's (:class:`~dlc.scheduler.placement.round_cap.
    TurnDelta`)."""
    inventory: Inventory
    """What the cluster has (jobs no agent could ever run are set aside)."""
    offers: Sequence[OfferView]
    """The usable offers (draining GPUs already taken out)."""
    config: PlacementConfig
    """Allocator policy and executor overheads."""
    now: float
    """The decision's time (real or virtual); unused by placement today, kept so
    time-dependent rules need no new field."""
    reserved: Mapping[str, str] | None = None
    """Agent id -> the job holding it (:class:`~dlc.scheduler.jobs.queue.Reservations`)."""
    impossible_of: Callable[[JobSpec], str | None] | None = None
    """Why a spec can never run (default: ``inventory.impossible``; the core passes a
    cached one)."""
    topology_of: TopologyOf | None = None
    """An agent's topology, as in :func:`~dlc.scheduler.placement.placer.place`."""
    driver_ok: DriverCheck | None = None
    """The image/driver rule, as in :func:`~dlc.scheduler.placement.placer.place`."""
    split: Splitter | None = None
    """Offers and jobs -> batches placed separately (resource pools: a pool's agents take
    only that pool's jobs; :func:`~dlc.scheduler.tenancy.quotas.split_by_pool`); default:
    one batch."""
    share_tenants: ShareTenants | None = None
    """Who holds shares on each GPU, for exclusive placement
    (:class:`~dlc.scheduler.placement.share_placement.ShareTenants`); default: nobody."""
    share_hold: ShareHold | None = None
    """The round's share hold (:mod:`~dlc.scheduler.placement.share_hold`); default: none."""
    budget: ShapeBudget | None = None
    """Failed placement attempts per user per round, kept across rounds so the jobs it
    defers go first next time (:class:`~dlc.scheduler.placement.shape_cache.ShapeBudget`); the
    decision starts its round. It also carries failed shapes to the next round
    (:class:`~dlc.scheduler.placement.shape_cache.CarriedFailures`). Default: no bound."""
    mix: MixSource = None
    """The expected workload whole-GPU placements are scored against (the core's queued
    and running jobs by shape, :mod:`~dlc.scheduler.placement.whole_score`; or a function computing
    it when first needed, at most once); default: each batch's own queue."""
    cap: RoundCap | None = None
    """At most so many runnable jobs considered this round, in turns (kept across rounds,
    :class:`~dlc.scheduler.placement.round_cap.RoundCap`); default: no bound."""
    memo: RoundMemo | None = None
    """What earlier rounds derived per agent (slot states, share rows), reused for agents
    whose offer did not change (kept across rounds, :class:`~dlc.scheduler.placement.round_memo.
    RoundMemo`); default: everything read afresh."""


def decide(request: DecideRequest) -> Decision:
    """Decide one offer round from ``request`` (see :class:`DecideRequest` for each input).

    The request's ``budget``, ``cap`` and ``memo`` are the only inputs it changes (they
    carry state from round to round on purpose).

    Returns:
        The launches, declines and every waiting job's reason.
    """
    inventory, reserved, budget = request.inventory, request.reserved, request.budget
    runnable, impossible, skipped = _runnable(request)
    offers = _mark_share_agents(request.offers, inventory) if runnable else list(request.offers)
    if budget is not None:
        budget.start()
        runnable = budget.ordered(runnable)
    mix = request.mix
    if callable(mix):
        mix = functools.cache(mix)  # once per round, whatever the number of pools
    started = time.perf_counter()
    split = request.split
    batches = split(offers, runnable) if split is not None else [(list(offers), runnable)]
    result = PlacementResult()
    for batch_offers, batch_jobs in batches:
        # failed shapes are carried from round to round only over one batch of all agents
        part = place(
            batch_offers, batch_jobs, request.config,
            topology_of=request.topology_of, driver_ok=request.driver_ok, reserved=reserved,
            share_tenants=request.share_tenants, share_hold=request.share_hold,
            budget=budget, carry=len(batches) == 1, mix=mix, memo=request.memo,
        )  # fmt: skip
        result.launches += part.launches
        result.declined += part.declined
        result.waiting.update(part.waiting)
    if request.cap is not None:  # a job the budget deferred did not have its turn
        waits = result.waiting
        turns = [j.job_id for j in runnable
                 if not waits.get(j.job_id, "").startswith(DEFERRED_PREFIX)]  # fmt: skip
        request.cap.had_turn(turns)
    return Decision(
        launches=list(result.launches),
        placed_jobs=result.placed_jobs,
        declines=list(result.declined),
        waiting={**result.waiting, **impossible},
        impossible=impossible,
        skipped=skipped,
        placement_s=time.perf_counter() - started,
    )


#: a job :func:`_runnable` has not asked about yet (``None`` means "it can run")
_UNASKED: Any = object()


def _runnable(request: DecideRequest) -> tuple[list[Job], dict[str, str], list[str]]:
    """The queued jobs this round places, in queue order; the impossible ones with their
    reasons; and the ids of the runnable ones the round cap leaves for later rounds.

    With the memo and the queue's ids (the core's rounds), a round reads the ids only: the
    jobs the memo has no answer for are asked, and when none of the queue is impossible
    (:meth:`~dlc.scheduler.placement.round_memo.RoundMemo.impossible_ids`) the queue is the runnable
    list as it is. Otherwise one pass over the queue, collecting the runnable ids the cap
    and the skipped list reuse: in the round, passes over 10,000 jobs cost their memory
    reads more than their Python steps (separate passes in C over the *jobs*, tried, were
    slower here, issue 26)."""
    impossible_of = request.impossible_of or _uncached(request.inventory)
    memo, ids = request.memo, request.queue_ids
    delta: TurnDelta | None = None
    if memo is not None and ids is not None and len(ids) == len(request.queue):
        runnable, runnable_ids, impossible = _runnable_by_ids(request, impossible_of)
        delta = _turn_delta(request, memo)
    else:
        runnable, runnable_ids, impossible = _runnable_by_jobs(request, impossible_of)
    skipped: list[str] = []
    if request.cap is not None:
        keep = set((request.reserved or {}).values())
        chosen = request.cap.choose(runnable, keep, runnable_ids, delta)
        if len(chosen) != len(runnable):
            picked = set(map(_job_id, chosen))
            skipped = list(filterfalse(picked.__contains__, runnable_ids))
            runnable = chosen
    return runnable, impossible, skipped


def _turn_delta(request: DecideRequest, memo: RoundMemo) -> TurnDelta | None:
    """How this round's runnable jobs (the pinned queue less the impossible ones the memo
    lists) differ from the last round's, when the request says how the queue changed."""
    changes = request.queue_changes
    if changes is None:
        return None
    jobs, bad = changes.jobs, memo.impossible_ids()
    version = request.inventory.version
    return TurnDelta(
        before=(changes.pin - 1, version),
        after=(changes.pin, version),
        changed=changes.changed,
        runnable=lambda job_id: job_id in jobs and job_id not in bad,
        job_of=jobs.__getitem__,
    )


def _runnable_by_ids(
    request: DecideRequest, impossible_of: Callable[[JobSpec], str | None]
) -> tuple[list[Job], list[str], dict[str, str]]:
    """:func:`_runnable_by_jobs` read from the ids, in C: only the jobs the memo has no
    answer for are read (asked), and the impossible ones are the few ids the memo lists
    (:meth:`~dlc.scheduler.placement.round_memo.RoundMemo.impossible_ids`). When the memo answers
    for every job of the queue pinned before (:attr:`~dlc.scheduler.placement.round_memo.RoundMemo.
    covers`), only the jobs that entered since are looked up: not one step per queued job."""
    memo, queue, ids = request.memo, request.queue, request.queue_ids
    assert memo is not None and ids is not None
    version, changes = request.inventory.version, request.queue_changes
    known = memo.impossible(version, len(ids))
    bad = memo.impossible_ids()
    if changes is not None and memo.covers == (changes.pin - 1, version):
        jobs = changes.jobs
        for job_id in dict.fromkeys(changes.changed):  # the answers' order matters not
            if job_id in jobs and job_id not in known:
                memo.answer(job_id, impossible_of(jobs[job_id].spec))
        quick = not bad or not any(map(jobs.__contains__, bad))
    else:
        asked = list(map(known.__contains__, ids))
        if not all(asked):
            for job in compress(queue, map(operator.not_, asked)):
                memo.answer(job.job_id, impossible_of(job.spec))
        quick = not bad or bad.isdisjoint(ids)
    # every job of this queue has its answer now (the next round may look up its changes)
    memo.covers = None if changes is None else (changes.pin, version)
    if quick:
        return list(queue), list(ids), {}
    flags = list(map(bad.__contains__, ids))
    fine = list(map(operator.not_, flags))
    impossible = {j: f"impossible on the current agents: {known[j]}" for j in compress(ids, flags)}
    return list(compress(queue, fine)), list(compress(ids, fine)), impossible


def _runnable_by_jobs(
    request: DecideRequest, impossible_of: Callable[[JobSpec], str | None]
) -> tuple[list[Job], list[str], dict[str, str]]:
    """The runnable jobs and their ids, and the impossible ones' reasons: one pass over the
    queue (memo answers first)."""
    runnable: list[Job] = []
    runnable_ids: list[str] = []
    impossible: dict[str, str] = {}
    memo = request.memo
    known = (memo.impossible(request.inventory.version, len(request.queue))
             if memo is not None else {})  # fmt: skip
    for job in request.queue:
        job_id = job.job_id
        why = known.get(job_id, _UNASKED)
        if why is _UNASKED:
            why = impossible_of(job.spec)
            if memo is not None:
                memo.answer(job_id, why)
        if why is None:
            runnable.append(job)
            runnable_ids.append(job_id)
        else:
            impossible[job_id] = f"impossible on the current agents: {why}"
    return runnable, runnable_ids, impossible


_job_id = operator.attrgetter("job_id")


def _mark_share_agents(offers: Sequence[OfferView], inventory: Inventory) -> list[OfferView]:
    """Offers of agents whose totals hold ``gpu_mem`` blocks, marked as accounting shares
    (so an offer whose ranges shares took entirely still shows no whole GPU)."""
    shareable = inventory.shareable_ids()
    return [
        replace(v, shares_accounted=True)
        if not v.shares_accounted and v.agent_id in shareable
        else v
        for v in offers
    ]


def _uncached(inventory: Inventory) -> Callable[[JobSpec], str | None]:
    def why(spec: JobSpec) -> str | None:
        error = inventory.impossible(spec)
        return None if error is None else str(error)

    return why
