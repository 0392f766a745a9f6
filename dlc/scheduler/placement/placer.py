"""Offers in, launches and declines out: the pure placement core.

:func:`place` takes Mesos offers (v1 JSON dicts, or already parsed
:class:`OfferView`\\ s) and the queued jobs in queue order and decides which job
tasks go on which agent with which GPUs. It imports nothing from pymesos: the
framework adapter, the benchmark and a trace-driven simulator drive the very
same code with offers as data.

Rules:

* Offers of one agent are merged into one slot (Mesos accepts several offers of
  one agent in a single ACCEPT); every slot that gets no task is declined.
* A task consumes ``cpus``/``mem``/``disk`` plus ``gpus:k`` and exactly the
  ``gpu_ids`` items the allocator picked (``DESIGN.md``: the SET resource
  carries identities, the scalar keeps Mesos's GPU filter and UI columns). Each
  task also pays for its own executor (``executor_cpus``/``executor_mem_mib``).
* Several jobs may land on one agent in one round.
* A multi-node job is gang-placed: all its nodes on distinct agents in the
  same round, or none at all.
* GPU-model and driver/CUDA constraints are checked per agent from its
  attributes (and the GPU models in its topology).
* Reservations: an agent reserved for a queued big job
  (:class:`~dlc.scheduler.jobs.queue.Reservations`) takes no other job; every other
  agent still takes backfill, and every waiting job gets a reason.

Its parts: :mod:`~dlc.scheduler.placement.model` (the public types),
:mod:`~dlc.scheduler.placement.slots` (an agent's offers as a shrinking slot),
:mod:`~dlc.scheduler.placement.agent_facts` (what an agent's attributes say),
:mod:`~dlc.scheduler.placement.gpu_choice` (which GPUs of a slot a job gets) and
:mod:`~dlc.scheduler.placement.share_launch` (a share placed as a launch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dlc.errors import AllocationError
from dlc.scheduler.gangs.rendezvous import ports_needed
from dlc.scheduler.gangs.topology import choose_group, missing, wanted
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.agent_facts import (
    agent_text,
    default_driver_ok,
    default_topology_of,
    gpu_facts,
)
from dlc.scheduler.placement.frag_state import FragCache
from dlc.scheduler.placement.gpu_choice import cpu_only_order, pick_gpus
from dlc.scheduler.placement.model import (
    DriverCheck,
    Launch,
    MixSource,
    OfferView,
    PlacementConfig,
    PlacementResult,
    TopologyOf,
)
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.shape_cache import FailedShapes, ShapeBudget, demand_of, kind_of
from dlc.scheduler.placement.share_hold import ShareHold
from dlc.scheduler.placement.share_launch import (
    SHARE_PORTS,
    carries,
    held_fit,
    held_tail,
    mps_agents,
    place_share,
)
from dlc.scheduler.placement.share_placement import ShareTenants, share_milli
from dlc.scheduler.placement.share_placement import share_room as new_share_room
from dlc.scheduler.placement.slots import Slot, room_for_one, slots_of, unlink
from dlc.scheduler.placement.whole_score import (
    FreeGpus,
    Shape,
    WholeScore,
    WorkloadMix,
    demand_mix,
    shape_models,
)
from dlc.topology import gpu_shares
from dlc.topology.model import Topology
from dlc.topology.node_config import ATTR_DRIVER


class _LazyWholeScore:
    """The round's :class:`WholeScore`, built when a whole-GPU or CPU-only job first has a
    choice of agents (a round whose jobs fit nowhere, or only one place, never pays for it)."""

    def __init__(
        self,
        slots: list[Slot],
        mix: MixSource,
        shares: bool = False,
        cache: FragCache | None = None,
    ):
        self._slots = slots
        self._mix = mix
        #: the caller's fragmentation values kept across rounds (frag_state), if any
        self.cache = cache
        #: whether shares are scored against the mix too (the caller gave it; else they
        #: keep :func:`~dlc.scheduler.placement.share_placement.choose_share`'s default)
        self.shares = shares
        self._score: WholeScore | None = None

    def get(self) -> WholeScore | None:
        mix = self.mix()
        if self._score is None and mix is not None:
            self._score = WholeScore(self._slots, mix, cache=self.cache)
            for slot in self._slots:
                slot.whole_score = self._score
        return self._score

    def mix(self) -> WorkloadMix | None:
        """The round's mix (worked out once, when first asked)."""
        if callable(self._mix):
            self._mix = self._mix()
        return self._mix

    def share_mix(self) -> WorkloadMix | None:
        """What shares are scored against: the caller's mix (the core's queued and
        running jobs, issue 26), as whole-GPU jobs are; ``None`` when none was given."""
        return self.mix() if self.shares else None


def queue_demands(jobs: Iterable[Job], config: PlacementConfig) -> Iterable[Shape]:
    """``(CPU thousandths with the executor's, GPU thousandths, GPUs, allowed GPU models)``
    per task of ``jobs``: :func:`~dlc.scheduler.placement.whole_score.demand_mix`'s input. A share's
    size is its compute (memory needs the GPU's size, which the core knows and passes in its
    own mix)."""
    for job in jobs:
        spec = job.spec
        cpu, models = int((spec.cpus + config.executor_cpus) * 1000), shape_models(spec)
        if spec.is_share:
            yield cpu, min(share_milli(spec, 0), 999), 1, models
        elif spec.gpus:
            for _ in range(spec.nodes):
                yield cpu, 1000, spec.gpus, models


def place(
    offers: Sequence[OfferView],
    queue: Sequence[Job],
    config: PlacementConfig | None = None,
    topology_of: TopologyOf | None = None,
    driver_ok: DriverCheck | None = None,
    reserved: Mapping[str, str] | None = None,
    share_tenants: ShareTenants | None = None,
    share_hold: ShareHold | None = None,
    budget: ShapeBudget | None = None,
    carry: bool = True,
    mix: MixSource = None,
    memo: RoundMemo | None = None,
) -> PlacementResult:
    """Decide launches and declines for one batch of offers.

    Args:
        offers: the offers as views (an engine's offers are decoded by its codec first).
        queue: queued jobs in queue order (:func:`~dlc.scheduler.jobs.queue.queue_order`).
        config: policy and executor overheads.
        topology_of: agent attributes -> topology (default: decode ``dlc_topo``).
        driver_ok: ``(driver_version, cuda_version) -> bool`` (default: image catalog rules).
        reserved: agent id -> the job holding it; no other job is placed there.
        share_tenants: who holds shares on each GPU, for exclusive placement (updated with
            the shares placed here); default: nobody.
        share_hold: this round's share hold (:mod:`~dlc.scheduler.placement.share_hold`);
            default: none.
        budget: failed attempts each user may have this round
            (:class:`~dlc.scheduler.placement.shape_cache.ShapeBudget`); default: no bound. Its
            :class:`~dlc.scheduler.placement.shape_cache.CarriedFailures` keep failed shapes from
            round to round.
        carry: whether this call may use and keep those carried failures (``False``: a
            round cut into several batches, each with its own agents; they are forgotten).
        mix: the expected workload whole-GPU jobs and shares are scored against
            (:mod:`~dlc.scheduler.placement.whole_score`; the core passes its queued and
            running jobs by shape; or a function computing it, called when a whole-GPU job first has
            a choice of agents or a share is placed); default: the shapes of ``queue`` for
            whole-GPU jobs, and for shares more shares like each and whole GPUs.
        memo: what the caller's earlier rounds derived per agent (slot states, share rows:
            :class:`~dlc.scheduler.placement.round_memo.RoundMemo`), reused for agents whose offer
            did not change; default: everything is read afresh.

    Returns:
        The launches, the offers to decline and why waiting jobs wait.
    """
    config = config or PlacementConfig()
    topology_of = topology_of or default_topology_of
    driver_ok = driver_ok or default_driver_ok
    views = list(offers)
    by_agent: dict[str, list[OfferView]] = {}
    for view in views:
        by_agent.setdefault(view.agent_id, []).append(view)
    result = PlacementResult()
    if not queue:  # nothing to place: decline all, without reading what the offers hold
        result.declined = [v.offer_id for group in by_agent.values() for v in group]
        return result
    slots = slots_of(by_agent.values(), memo)
    reserved = reserved or {}
    share_tenants = share_tenants if share_tenants is not None else ShareTenants()
    holders = set(reserved.values())
    others = [s for s in slots if s.agent_id not in reserved]
    mps_others: frozenset[str] = frozenset()
    free_index = FreeGpus(others)  # whole-GPU jobs read only the agents with their GPUs free
    for slot in others:
        slot.free_index = free_index
    if any(job.spec.is_share for job in queue):
        # the round's share arrays (share_index)
        room = new_share_room(
            others, topology_of, *((memo.rows, memo.share_fill) if memo is not None else ())
        )
        for slot in others:
            slot.share_room = room
        # the agents running MPS, once a round: asked per share, this set over 1,213 agents
        # was half of a busy round
        mps_others = mps_agents(others)
    # A job that did not fit tells the answer for every later job of its kind needing no
    # less, until a launch changes the slots: 5,000 look-alikes cost one placement attempt
    # (shape_cache says why that is sound); the budget bounds what the cache cannot cover.
    failed = FailedShapes()
    # ... and what failed in earlier rounds is tried only on the agents that grew since
    carried = budget.carried if budget is not None and carry else None
    if carried is not None:
        carried.start(others)
    given = mix is not None
    if mix is None:
        mix = demand_mix(queue_demands(queue, config))
    whole = _LazyWholeScore(slots, mix, shares=given, cache=memo.frag if memo is not None else None)
    for job in queue:
        holder = job.job_id in holders
        # a share's user matters only where exclusivity or MPS can keep it off a GPU
        kind = kind_of(job)
        # carried failures cost the budget as attempts do, so there a share's user may be
        # left out where exclusivity and MPS cannot keep it off a GPU (the answer is the
        # same for every user; the round's cache above is free, so it keeps the user)
        wide = kind_of(job, bool(job.spec.exclusive_per or share_tenants.exclusive_count > 0
                                 or mps_others))  # fmt: skip
        if share_hold is not None and job.spec.is_share:
            kind += (share_hold.exempt(job),)  # a share held long enough is placed anyway
            wide += (share_hold.exempt(job),)
        known = None if holder else failed.known(kind, demand_of(job))
        if known is not None:
            result.waiting[job.job_id] = held_tail(known, job, share_hold)
            continue
        if not holder and budget is not None and not budget.may_try(job):
            result.waiting[job.job_id] = budget.defer(job)
            continue
        usable = (
            [s for s in slots if reserved.get(s.agent_id, job.job_id) == job.job_id]
            if holder
            else others
        )
        launched = len(result.launches)
        carrier = carried if not holder and carries(job, share_hold) else None
        now = carrier.known_now(wide, demand_of(job)) if carrier is not None else None
        before = (
            carrier.known_before(wide, demand_of(job)) if carrier is not None and not now else None
        )
        reason = now or (before[0] if before is not None else None)
        if now is None and (before is None or before[1]):  # else no agent grew since
            reason = _place_job(
                job, usable if before is None else before[1], config, topology_of, driver_ok,
                result, share_tenants, share_hold, None if holder else mps_others, whole,
            )  # fmt: skip
            if reason is not None and before is not None:
                reason = before[0]  # the grown agents did not take it: the old reason stands
        if reason is None:
            if len(result.launches) != launched:
                failed.clear()
            if share_hold is not None:  # the next share of this round sees fewer whole GPUs
                for launch in result.launches[launched:]:
                    if launch.share is None:
                        share_hold.took(launch.agent_id, launch.gpu_ids)
                    else:
                        share = launch.share
                        share_hold.took(launch.agent_id, (share.gpu_index,), share.core_milli)
            continue
        if carrier is not None and reason != SHARE_PORTS:
            carrier.add(wide, demand_of(job), reason, monotone=not job.spec.is_share)
        reason = held_fit(job, slots, usable, reserved) or reason
        result.waiting[job.job_id] = held_tail(reason, job, share_hold)
        if not holder:
            failed.add(kind, demand_of(job), reason, monotone=not job.spec.is_share)
            if budget is not None:
                budget.failed(job)
    if carried is not None:
        carried.finish(others)
    elif budget is not None:
        budget.carried.reset()
    used = {launch.agent_id for launch in result.launches}
    result.declined = [oid for slot in slots if slot.agent_id not in used for oid in slot.offer_ids]
    unlink(slots)
    return result


def _place_job(
    job: Job,
    slots: list[Slot],
    config: PlacementConfig,
    topology_of: TopologyOf,
    driver_ok: DriverCheck,
    result: PlacementResult,
    tenants: ShareTenants,
    share_hold: ShareHold | None = None,
    mps: frozenset[str] | None = None,
    whole: _LazyWholeScore | None = None,
) -> str | None:
    """Gang-place every node of ``job``; returns why not, or ``None`` when placed.

    ``mps``: the ids of ``slots``' agents whose share backend is MPS, when the caller has
    them (``None``: read from ``slots``)."""
    spec = job.spec
    cpus = spec.cpus + config.executor_cpus
    mem = spec.mem_mib + config.executor_mem_mib
    if spec.is_share:
        if mps is None:
            mps = mps_agents(slots)
        return place_share(
            job, slots, cpus, mem, topology_of, result, tenants, share_hold, mps,
            whole.share_mix() if whole is not None else None,
            whole.cache if whole is not None else None,
        )  # fmt: skip
    chosen: list[tuple[Slot, tuple[int, ...], str, tuple[int, ...], Topology | None]] = []
    reason = "no offers"
    takes: dict[str, gpu_shares.GpuRanges] = {}
    # Best fit: the agent with the fewest free GPUs that can still hold the job,
    # so big holes stay open for big jobs.
    index = slots[0].free_index if slots else None
    if index is not None and index.covers(slots):
        candidates = index.at_least(spec.gpus)
    elif index is not None and index.holds(slots):  # the agents that grew (CarriedFailures)
        candidates = index.at_least(spec.gpus, slots)
    else:
        candidates = sorted(
            (s for s in slots if len(s.free) >= spec.gpus),
            key=lambda s: (len(s.free), s.agent_id),
        )
    if spec.is_cpu_only:  # no GPU taken: the agents without GPUs first (a score may reorder)
        candidates = cpu_only_order(candidates)
    score = whole.get() if whole is not None and spec.nodes == 1 and len(candidates) > 1 else None
    if score is not None:
        # the least growth of fragmentation against the expected mix first (whole_score:
        # the measure the simulator's replay credits), best fit among equals; a CPU-only
        # job too: the measure counts what its CPU takes from the mix's GPU shapes
        candidates = score.order(candidates, spec.gpus, cpus, mem)
    if not candidates and slots:
        reason = f"no offer has {spec.gpus} free GPUs"
    if spec.nodes > 1 and candidates:
        candidates, why = _gang_order(job, candidates, cpus, mem, config, topology_of, driver_ok)
        if why is not None:
            return why
    for slot in candidates:
        if len(chosen) == spec.nodes:
            break
        if slot.cpus < cpus - 1e-9 or slot.mem < mem - 1e-9 or slot.disk < spec.disk_mib - 1e-9:
            # the user's own numbers: the executor's share is named, not silently added
            reason = (
                f"no offer{_with_gpus(spec)} has {spec.cpus:g} cpus/{spec.mem_mib:g} MiB "
                f"free (+{config.executor_cpus:g} cpus/{config.executor_mem_mib:g} MiB "
                "for DLC's executor)"
            )
            continue
        if slot.gpus < spec.gpus - 1e-9:
            reason = f"no offer has gpus:{spec.gpus}"
            continue
        try:
            ids, policy, topology = pick_gpus(slot, job, config.policy, topology_of, driver_ok)
        except AllocationError as exc:
            reason = str(exc)
            continue
        ports = slot.take_ports(ports_needed(2 if spec.is_gang else 1, spec.interactive))
        if ports is None:
            reason = f"no offer{_with_gpus(spec)} has a free port in its ports resource"
            continue
        slot.take(cpus, mem, spec.disk_mib, ids, +1)
        takes[slot.agent_id] = slot.whole_take(ids)
        slot.take_ranges(takes[slot.agent_id])
        chosen.append((slot, ids, policy, ports, topology))
    if len(chosen) < spec.nodes:
        for slot, ids, _, ports, _ in chosen:  # all or nothing: give back the partial gang
            slot.take(cpus, mem, spec.disk_mib, ids, -1)
            slot.give_ranges(takes[slot.agent_id])
            slot.ports_taken = slot.ports_taken - set(ports)
        if spec.nodes > 1 and chosen:
            reason = f"only {len(chosen)} of {spec.nodes} nodes fit: {reason}"
        return reason
    peers = tuple(f"{s.address}:{p[0]}" for s, _, _, p, _ in chosen) if spec.is_gang else ()
    for rank, (slot, ids, policy, ports, topology) in enumerate(chosen):
        uuids, minors = gpu_facts(topology, ids)
        result.launches.append(
            Launch(
                job_id=job.job_id,
                task_id=f"{job.task_prefix()}{rank}",
                rank=rank,
                agent_id=slot.agent_id,
                hostname=slot.hostname,
                offer_ids=slot.offer_ids,
                gpu_ids=ids,
                policy=policy,
                ports=ports,
                peers=peers,
                gpu_uuids=uuids,
                gpu_minors=minors,
                driver_version=(topology.driver_version if topology else None)
                or agent_text(slot.attributes, ATTR_DRIVER),
                gpu_take=takes[slot.agent_id],
            )
        )
    return None


def _with_gpus(spec: JobSpec) -> str:
    """`` with N GPUs`` in a waiting reason; nothing for a CPU-only job (it asks none)."""
    return "" if spec.is_cpu_only else f" with {spec.gpus} GPUs"


def _gang_order(
    job: Job,
    candidates: list[Slot],
    cpus: float,
    mem: float,
    config: PlacementConfig,
    topology_of: TopologyOf,
    driver_ok: DriverCheck,
) -> tuple[list[Slot], str | None]:
    """``(agents to try, None)`` with the gang's narrowest fitting group first
    (:mod:`~dlc.scheduler.gangs.topology`), or ``(_, why it waits)`` when its ``required``
    level has no group that holds it. Agents that say nothing of where they stand keep
    the best-fit order at no extra cost.

    Groups are chosen on the cheap checks (CPUs, memory, disk, GPU count, a port); only the
    chosen group's agents are asked of the allocator (model, driver, links), until enough
    pass: an agent that fails leaves the count and the group is chosen again. Asking every
    agent cost 3.8 s for 20 gangs on 1,000 agents."""
    spec = job.spec
    want = wanted(spec.gang_topology)
    if not any(s.locality.known for s in candidates):
        return candidates, (missing(want, spec.nodes, spec.gpus) if want.required else None)
    able = [s for s in candidates if room_for_one(s, spec, cpus, mem)]
    while len(able) >= spec.nodes:
        choice = choose_group(able, spec.nodes, lambda s: s.locality, want)
        if choice is None:
            return candidates, missing(want, spec.nodes, spec.gpus)
        if not choice.level:  # no group holds it: anywhere, in best-fit order
            return choice.order, None
        bad: set[int] = set()
        good = 0
        for slot in choice.order[: choice.size]:
            if _pick_ok(slot, job, config, topology_of, driver_ok):
                good += 1
                if good == spec.nodes:
                    return choice.order, None
            else:
                bad.add(id(slot))
        able = [s for s in able if id(s) not in bad]
    return candidates, None  # too few agents: the loop names what is short


def _pick_ok(
    slot: Slot,
    job: Job,
    config: PlacementConfig,
    topology_of: TopologyOf,
    driver_ok: DriverCheck,
) -> bool:
    """Whether the allocator finds ``job``'s GPUs on ``slot`` (model, driver, layout)."""
    try:
        pick_gpus(slot, job, config.policy, topology_of, driver_ok)
    except AllocationError:
        return False
    return True
