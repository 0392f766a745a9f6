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
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypedDict

from dlc.errors import AllocationError, ConfigError, DlcError
from dlc.images import driver_supports, rocm_supports
from dlc.scheduler.allocator import POLICY_MODULES, allocate
from dlc.scheduler.allocator.base import model_matches, unknown_policy
from dlc.scheduler.gangs.rendezvous import Ranges, ports_needed, take_port
from dlc.scheduler.gangs.topology import Locality, choose_group, missing, wanted
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.jobs.launch_spec import GpuShare
from dlc.scheduler.placement.frag_state import FragCache
from dlc.scheduler.placement.round_memo import RoundMemo, offer_key
from dlc.scheduler.placement.shape_cache import (
    DEFAULT_TRIES_PER_USER,
    FailedShapes,
    ShapeBudget,
    demand_of,
    kind_of,
)
from dlc.scheduler.placement.share_hold import HELD_PREFIX, ShareHold, ShareHoldSettings
from dlc.scheduler.placement.share_index import ShareRoom
from dlc.scheduler.placement.share_placement import ShareTenants, choose_share, share_milli
from dlc.scheduler.placement.share_placement import share_room as new_share_room
from dlc.scheduler.placement.whole_score import (
    FreeGpus,
    Shape,
    WholeScore,
    WorkloadMix,
    demand_mix,
    shape_models,
)
from dlc.topology import gpu_shares
from dlc.topology.model import Gpu, Topology
from dlc.topology.node_config import (
    ATTR_DRIVER,
    ATTR_ROCM,
    ATTR_TOPOLOGY,
    ATTR_VENDOR,
    parse_agent_attributes,
    topology_from_attributes,
)
from dlc.topology.node_config import ATTR_MODEL as ATTR_GPU_MODEL

# The agent attribute names (ATTR_*) are node-config's: one source, imported by the callers
# of this module from here as before.

#: what :attr:`Launch.policy` says when an agent without ``dlc_topo`` got first-fit
NO_TOPOLOGY_POLICY = "first-fit (agent has no dlc_topo attribute)"

log = logging.getLogger(__name__)

TopologyOf = Callable[[dict[str, str]], Topology | None]
#: the expected workload, or a function that computes it when first needed
MixSource = WorkloadMix | Callable[[], WorkloadMix | None] | None
DriverCheck = Callable[[str, str], bool]


@dataclass(frozen=True)
class OfferView:
    """The parts of an offer placement reads (engine-neutral: an engine's codec makes it
    from the engine's offer, :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_offer`; for
    Mesos :func:`dlc.mesos.offers.offer_view`).

    Attributes:
        offer_id, agent_id, hostname: identities from the offer.
        cpus, mem_mib, disk_mib, gpus: scalar resources offered.
        gpu_ids: items of the ``gpu_ids`` SET resource.
        attributes: agent attributes as text (scalars rendered without ``.0``).
        ports: the offered ``ports`` ranges (gang tasks take one each).
        address: the IP the agent advertises (its ``url``), else its hostname: what a
            gang's peers connect to.
    """

    offer_id: str
    agent_id: str
    hostname: str
    cpus: float = 0.0
    mem_mib: float = 0.0
    disk_mib: float = 0.0
    gpus: float = 0.0
    gpu_ids: frozenset[int] = frozenset()
    attributes: dict[str, str] = field(default_factory=dict)
    ports: Ranges = ()
    address: str = ""
    #: the ``gpu_mem`` (MiB) and ``gpu_core`` (thousandths) RANGES: one block per GPU
    #: (:mod:`dlc.topology.gpu_shares`); empty where the agent takes no shares
    gpu_mem: Ranges = ()
    gpu_core: Ranges = ()
    #: the agent accounts GPU shares (its totals hold ``gpu_mem`` blocks) even when this
    #: offer holds no ranges (shares took them all): then no GPU of it is whole
    shares_accounted: bool = False
    #: the agent's Mesos fault domain ``(region, zone)`` from the offer's ``domain``
    domain: tuple[str, str] = ("", "")

    @property
    def locality(self) -> Locality:
        """Where the agent stands: its fault domain, rack and switch (gang placement)."""
        return Locality(*self.domain).with_attributes(self.attributes)


@dataclass(frozen=True, kw_only=True)
class Launch:
    """One task to launch: which job node goes on which agent with which GPUs."""

    job_id: str
    task_id: str
    rank: int
    agent_id: str
    hostname: str
    offer_ids: tuple[str, ...]
    gpu_ids: tuple[int, ...]
    #: the policy that chose ``gpu_ids`` (:data:`NO_TOPOLOGY_POLICY` for a bare agent)
    policy: str = ""
    #: ports taken from the agent's ``ports`` offer for this task (gangs: the rendezvous)
    ports: tuple[int, ...] = ()
    #: ``address:port`` of every node of a gang, in rank order (empty for one node)
    peers: tuple[str, ...] = ()
    #: the chosen GPUs' UUIDs and ``/dev/nvidia<minor>`` numbers, in ``gpu_ids`` order, from
    #: the agent's decoded ``dlc_topo`` (empty when it lacks them: the executor reads the host)
    gpu_uuids: tuple[str, ...] = ()
    gpu_minors: tuple[int, ...] = ()
    #: the agent's NVIDIA driver version (topology, else the ``nvidia_driver`` attribute)
    driver_version: str | None = None
    #: the ``gpu_mem``/``gpu_core`` ranges the task consumes: a share's sub-ranges of one
    #: GPU, or the whole blocks of a whole-GPU task's GPUs (empty where none are offered)
    gpu_take: gpu_shares.GpuRanges = gpu_shares.GpuRanges()
    #: the share of one GPU (then ``gpu_ids`` is empty); ``None``: whole GPUs
    share: GpuShare | None = None


@dataclass
class PlacementResult:
    """What :func:`place` decided.

    Attributes:
        launches: tasks to launch, in order.
        declined: offer ids to decline (no task landed on their agent).
        waiting: job id -> why it was not placed this round (never empty).
    """

    launches: list[Launch] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)

    @property
    def placed_jobs(self) -> list[str]:
        """Ids of jobs launched this round, in order, without repeats."""
        return list(dict.fromkeys(launch.job_id for launch in self.launches))


@dataclass(frozen=True)
class PlacementConfig:
    """Knobs of :func:`place`.

    Attributes:
        policy: allocator policy name (one of :data:`POLICY_MODULES`). Agents
            without a topology get first-fit whatever this says.
        executor_cpus, executor_mem_mib: what each task's executor costs.
        share_hold: the opt-in share hold (``--share-hold-*``, docs/sharing.md); off by default.
        shape_tries_per_user: failed placement attempts one user's jobs may cost per offer
            round before the rest wait their turn (:mod:`~dlc.scheduler.placement.shape_cache`).

    Raises:
        ConfigError: unknown policy name (the message lists the known ones), or
            ``shape_tries_per_user`` below 1.
    """

    policy: str = "tree"
    executor_cpus: float = 0.1
    executor_mem_mib: float = 64.0
    share_hold: ShareHoldSettings = ShareHoldSettings()
    shape_tries_per_user: int = DEFAULT_TRIES_PER_USER

    def __post_init__(self) -> None:
        check_policy(self.policy)
        if self.shape_tries_per_user < 1:
            raise ConfigError(
                "shape_tries_per_user", f"must be at least 1, not {self.shape_tries_per_user}"
            )


def check_policy(name: str) -> str:
    """``name`` if it is a known allocator policy.

    Raises:
        ConfigError: unknown name, naming ``--policy`` and the known policies.
    """
    problem = unknown_policy(name)
    if problem:
        known = ", ".join(sorted(POLICY_MODULES))
        raise ConfigError("policy", f"{problem.split(';')[0]}; pass --policy one of {known}")
    return name


class _Slot:
    """One agent's offered resources, shrinking as tasks are placed on it."""

    # Defaults a round's 1,213 slots share until one changes them (a set and a tuple less
    # per slot: fewer young objects for the cyclic collector each round, issue 26).
    #: ports taken from this slot this round (a new set when ports are taken or given back)
    ports_taken: AbstractSet[int] = frozenset()
    #: whether anything was taken from (or given back to) this slot this round: one left
    #: untouched ends the round as it started (CarriedFailures reuses its snapshot)
    touched = False
    #: the offer ids of an agent with several offers this round (else its one view's)
    _offer_ids: tuple[str, ...] | None = None

    def __init__(self, offers: list[OfferView]):
        first = offers[0]
        self._first = first
        self.agent_id = first.agent_id
        self.hostname = first.hostname
        if len(offers) != 1:
            self._offer_ids = tuple(o.offer_id for o in offers)
        if len(offers) == 1:  # most agents (one sum over one offer each was a round's cost)
            self.cpus, self.mem, self.disk = first.cpus, first.mem_mib, first.disk_mib
            self.gpus, self.free = first.gpus, frozenset(first.gpu_ids)
            self.port_ranges: Ranges = tuple(sorted(first.ports))
        else:
            self.cpus = sum(o.cpus for o in offers)
            self.mem = sum(o.mem_mib for o in offers)
            self.disk = sum(o.disk_mib for o in offers)
            self.gpus = sum(o.gpus for o in offers)
            self.free = frozenset().union(*(o.gpu_ids for o in offers))
            self.port_ranges = tuple(sorted(r for o in offers for r in o.ports))
        self.attributes = first.attributes
        self.address = first.address or first.hostname
        self.port_count = sum(end - begin + 1 for begin, end in self.port_ranges)
        if len(offers) == 1:  # most agents: one offer, its ranges as the last round's
            self.gpu_mem = _normalised(tuple(first.gpu_mem))
            self.gpu_core = _normalised(tuple(first.gpu_core))
        else:
            self.gpu_mem = gpu_shares.normalise(r for o in offers for r in o.gpu_mem)
            self.gpu_core = gpu_shares.normalise(r for o in offers for r in o.gpu_core)
        #: the round's index of slots by free share room, told when the ranges change
        self.share_room: ShareRoom | None = None
        #: the round's whole-GPU scoring (whole_score), told when anything here changes
        self.whole_score: WholeScore | None = None
        #: the round's index of slots by free whole GPUs, told when ``free`` changes
        self.free_index: FreeGpus | None = None
        if self.gpu_mem or self.gpu_core or any(o.shares_accounted for o in offers):
            # an agent that accounts shares: a GPU any share holds part of is not whole
            self.free = _whole_of(self.free, self.gpu_mem, self.gpu_core)

    @property
    def offer_ids(self) -> tuple[str, ...]:
        """The ids of the agent's offers this slot holds."""
        ids = self._offer_ids
        return ids if ids is not None else (self._first.offer_id,)

    @functools.cached_property
    def locality(self) -> Locality:
        """Where the agent stands (read by gangs only: not built for every slot)."""
        return self._first.locality

    def take_ranges(self, take: gpu_shares.GpuRanges) -> None:
        """Consume ``take`` from what this agent's offers have left."""
        self.touched = True
        self.gpu_mem = gpu_shares.subtract(self.gpu_mem, take.mem)
        self.gpu_core = gpu_shares.subtract(self.gpu_core, take.core)
        if self.share_room is not None and (take.mem or take.core):
            self.share_room.refresh(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)
        # a GPU a share now holds part of is no longer whole for the jobs after it
        if take.mem or take.core:
            self.free = gpu_shares.whole_of(self.free, self.gpu_mem, self.gpu_core)
            if self.free_index is not None:
                self.free_index.changed(self)

    def give_ranges(self, take: gpu_shares.GpuRanges) -> None:
        """Give ``take`` back (a gang that did not fit whole)."""
        self.touched = True
        self.gpu_mem = gpu_shares.normalise(self.gpu_mem + take.mem)
        self.gpu_core = gpu_shares.normalise(self.gpu_core + take.core)
        if self.share_room is not None and (take.mem or take.core):
            self.share_room.refresh(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)

    def whole_take(self, ids: tuple[int, ...]) -> gpu_shares.GpuRanges:
        """The whole blocks of GPUs ``ids`` (nothing where the agent offers no ranges)."""
        if not ids or not (self.gpu_mem or self.gpu_core):
            return gpu_shares.GpuRanges()
        return gpu_shares.whole_gpu_take(ids, self.gpu_mem, self.gpu_core)

    def take_ports(self, count: int) -> tuple[int, ...] | None:
        """Take ``count`` free offered ports (``None``, taking nothing, when too few)."""
        self.touched = True
        got: list[int] = []
        for _ in range(count):
            port = take_port(self.port_ranges, self.ports_taken | set(got))
            if port is None:
                return None
            got.append(port)
        self.ports_taken = self.ports_taken | set(got)
        return tuple(got)

    def take(self, cpus: float, mem: float, disk: float, ids: tuple[int, ...], sign: int) -> None:
        self.touched = True
        self.cpus -= sign * cpus
        self.mem -= sign * mem
        self.disk -= sign * disk
        self.gpus -= sign * len(ids)
        self.free = self.free - set(ids) if sign > 0 else self.free | set(ids)
        if self.share_room is not None:
            self.share_room.scalars(self)
        if self.free_index is not None:
            self.free_index.changed(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)


#: a slot's fields that belong to one round (offer ids, its view, ports taken): not kept
_ROUND_FIELDS = ("_offer_ids", "_first", "ports_taken", "kept_state", "touched")


def _kept_slot(view: OfferView, memo: RoundMemo) -> _Slot:
    """A new slot of ``view`` alone, its starting state kept in ``memo``."""
    slot = _Slot([view])
    _backend(slot)  # kept with the state: every share round asks it of every agent
    state = {k: v for k, v in slot.__dict__.items() if k not in _ROUND_FIELDS}
    memo.keep_slot(view, state)
    slot.kept_state = state  # type: ignore[attr-defined]  # the share room reads it
    return slot


def _restored(view: OfferView, state: dict[str, Any]) -> _Slot:
    """A slot of ``view``'s agent started from its kept ``state`` (no re-read of the offer)."""
    slot = object.__new__(_Slot)
    fields = slot.__dict__
    fields.update(state)  # ports_taken, touched: the class's (none taken, untouched)
    fields["_first"] = view
    fields["kept_state"] = state  # what the slot started from (the share room copies its row)
    return slot


def _slots_of(groups: Iterable[list[OfferView]], memo: RoundMemo | None) -> list[_Slot]:
    """The slot of each agent's offers, its starting state kept in ``memo`` while the agent
    offers the same (building 1,213 slots was a fixed part of every round, issue 26), in one
    loop: an agent that offers what it offered before (its kept key equal to its view's,
    :meth:`RoundMemo.slot_states`) costs a tuple comparison and a copy of its kept state (a
    call per agent and a field-by-field comparison of 1,213 views were most of it)."""
    if memo is None:
        return [_Slot(group) for group in groups]
    kept_of, key_of = memo.slot_states().get, offer_key
    slots: list[_Slot] = []
    for group in groups:
        view = group[0]
        kept = kept_of(view.agent_id) if len(group) == 1 else None
        if len(group) != 1:
            slots.append(_Slot(group))  # several offers of one agent: not kept
        elif kept is None or kept[0] != key_of(view):
            slots.append(_kept_slot(view, memo))  # a changed offer: built and kept
        else:
            slots.append(_restored(view, kept[1]))
    return slots


@functools.lru_cache(maxsize=8192)
def _normalised(ranges: Ranges) -> Ranges:
    """:func:`gpu_shares.normalise`, kept per ranges: an agent offers the same ranges round
    after round until something of it starts or ends (1,213 slots a round, issue 26)."""
    return gpu_shares.normalise(ranges)


@functools.lru_cache(maxsize=8192)
def _whole_of(free: frozenset[int], mem: Ranges, core: Ranges) -> frozenset[int]:
    """:func:`gpu_shares.whole_of`, kept per agent state (as :func:`_normalised`)."""
    return gpu_shares.whole_of(free, mem, core)


class _LazyWholeScore:
    """The round's :class:`WholeScore`, built when a whole-GPU job first has a choice of
    agents (a round whose jobs fit nowhere, or only one place, never pays for it)."""

    def __init__(
        self,
        slots: list[_Slot],
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
    slots = _slots_of(by_agent.values(), memo)
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
        mps_others = _mps_agents(others)
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
            result.waiting[job.job_id] = _held_tail(known, job, share_hold)
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
        carrier = carried if not holder and _carries(job, share_hold) else None
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
        if carrier is not None and reason != _SHARE_PORTS:
            carrier.add(wide, demand_of(job), reason, monotone=not job.spec.is_share)
        reason = _held_fit(job, slots, usable, reserved) or reason
        result.waiting[job.job_id] = _held_tail(reason, job, share_hold)
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
    _unlink(slots)
    return result


def _unlink(slots: list[_Slot]) -> None:
    """Drop the round's indexes from its slots. Each index holds the slots and each slot
    its indexes, so without this a round's 1,213 slots, their offer views and rows (about
    7,400 objects) are freed only by the cyclic collector, and under the scheduler's raised
    collector thresholds (:mod:`dlc.app.interpreter`) they piled up between its passes
    (peak RSS +40 MiB at openb scale)."""
    for slot in slots:
        slot.free_index = None
        slot.share_room = None
        slot.whole_score = None


#: why a share fails on the agent it chose: another agent might have been chosen instead
_SHARE_PORTS = "no offer with a GPU share free has a free port in its ports resource"


def _carries(job: Job, share_hold: ShareHold | None) -> bool:
    """Whether ``job``'s failures may be carried (:class:`CarriedFailures` says which)."""
    return job.spec.nodes == 1 and not (job.spec.is_share and share_hold is not None)


def _held_fit(
    job: Job, slots: list[_Slot], usable: list[_Slot], reserved: Mapping[str, str]
) -> str | None:
    """``waiting behind job j1 which reserves agent a1`` when a held agent has the GPUs
    the job wants free (so the reservation, not the cluster, is what it waits for)."""
    if len(usable) == len(slots):
        return None
    inside = {id(s) for s in usable}  # a list's `in` made this O(agents^2) per waiting job
    held = [s for s in slots if id(s) not in inside and len(s.free) >= job.spec.gpus]
    if not held:
        return None
    holder = reserved[held[0].agent_id]
    agents = ", ".join(sorted({s.hostname or s.agent_id for s in held}))
    return f"waiting behind job {holder} which reserves agent {agents}"


def _held_tail(reason: str, job: Job, share_hold: ShareHold | None) -> str:
    """A hold reason with ``job``'s own remaining wait (the rest is the same for its shape)."""
    if share_hold is None or not reason.startswith(HELD_PREFIX):
        return reason
    return reason + share_hold.tail(job)


def _place_job(
    job: Job,
    slots: list[_Slot],
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
            mps = _mps_agents(slots)
        return _place_share(
            job, slots, cpus, mem, topology_of, result, tenants, share_hold, mps,
            whole.share_mix() if whole is not None else None,
            whole.cache if whole is not None else None,
        )  # fmt: skip
    chosen: list[tuple[_Slot, tuple[int, ...], str, tuple[int, ...], Topology | None]] = []
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
    score = whole.get() if whole is not None and spec.nodes == 1 and len(candidates) > 1 else None
    if score is not None and spec.gpus:
        # the least growth of fragmentation against the expected mix first (whole_score:
        # the measure the simulator's replay credits), best fit among equals
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
                f"no offer with {spec.gpus} GPUs has {spec.cpus:g} cpus/{spec.mem_mib:g} MiB "
                f"free (+{config.executor_cpus:g} cpus/{config.executor_mem_mib:g} MiB "
                "for DLC's executor)"
            )
            continue
        if slot.gpus < spec.gpus - 1e-9:
            reason = f"no offer has gpus:{spec.gpus}"
            continue
        try:
            ids, policy, topology = _pick_gpus(slot, job, config.policy, topology_of, driver_ok)
        except AllocationError as exc:
            reason = str(exc)
            continue
        ports = slot.take_ports(ports_needed(2 if spec.is_gang else 1, spec.interactive))
        if ports is None:
            reason = f"no offer with {spec.gpus} GPUs has a free port in its ports resource"
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


def _gang_order(
    job: Job,
    candidates: list[_Slot],
    cpus: float,
    mem: float,
    config: PlacementConfig,
    topology_of: TopologyOf,
    driver_ok: DriverCheck,
) -> tuple[list[_Slot], str | None]:
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
    able = [s for s in candidates if _room_for_one(s, spec, cpus, mem)]
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


def _room_for_one(slot: _Slot, spec: JobSpec, cpus: float, mem: float) -> bool:
    """Whether ``slot`` has the amounts for one node of a gang now (nothing is taken)."""
    if slot.cpus < cpus - 1e-9 or slot.mem < mem - 1e-9 or slot.disk < spec.disk_mib - 1e-9:
        return False
    if slot.gpus < spec.gpus - 1e-9 or len(slot.free) < spec.gpus:
        return False
    # ports are counted, not taken: the ranges are disjoint and every taken port is in them
    return slot.port_count - len(slot.ports_taken) >= ports_needed(
        2 if spec.is_gang else 1, spec.interactive
    )


def _pick_ok(
    slot: _Slot,
    job: Job,
    config: PlacementConfig,
    topology_of: TopologyOf,
    driver_ok: DriverCheck,
) -> bool:
    """Whether the allocator finds ``job``'s GPUs on ``slot`` (model, driver, layout)."""
    try:
        _pick_gpus(slot, job, config.policy, topology_of, driver_ok)
    except AllocationError:
        return False
    return True


def _backend(slot: _Slot) -> str:
    """The agent's share backend (``dlc_sharing``; ``watchdog`` when it names none), kept
    on the slot: every share of a round asks it of every agent."""
    backend: str | None = getattr(slot, "_share_backend", None)
    if backend is None:
        backend = agent_text(slot.attributes, gpu_shares.ATTR_SHARING) or "watchdog"
        slot._share_backend = backend  # type: ignore[attr-defined]  # a cache set on demand
    return backend


class ShareFields(TypedDict, total=False):
    """The share fields of :class:`~dlc.scheduler.jobs.job.TaskPlacement`."""

    share_gpu: int | None
    share_memory_mib: int
    share_core_milli: int


def share_fields(launch: Launch) -> ShareFields:
    """The :class:`~dlc.scheduler.jobs.job.TaskPlacement` share fields of a launch (none: {})."""
    if launch.share is None:
        return {}
    share = launch.share
    return {"share_gpu": share.gpu_index, "share_memory_mib": share.memory_mib,
            "share_core_milli": share.core_milli}  # fmt: skip


def _mps_agents(slots: Iterable[_Slot]) -> frozenset[str]:
    """The agents among ``slots`` whose share backend is MPS."""
    return frozenset(s.agent_id for s in slots if _backend(s) == "mps")


def _place_share(
    job: Job,
    slots: list[_Slot],
    cpus: float,
    mem: float,
    topology_of: TopologyOf,
    result: PlacementResult,
    tenants: ShareTenants,
    share_hold: ShareHold | None,
    mps_agents: frozenset[str],
    mix: WorkloadMix | None = None,
    frag: FragCache | None = None,
) -> str | None:
    """Place a share of one GPU (:mod:`~dlc.scheduler.placement.share_placement`); why not,
    or None.
    ``mix``: the round's expected workload the share is scored against (``None``: more
    shares like it and whole GPUs,
    :func:`~dlc.scheduler.placement.share_placement.choose_share`)."""
    tenant = tenants.tenant(job)
    open_to = None  # nobody exclusive, no other tenant under MPS: every GPU is open
    mps = mps_agents if tenants.by_gpu else frozenset()
    if tenants.restricts(tenant, bool(mps)):
        open_to = lambda agent_id, gpu: tenants.open_to(tenant, agent_id, gpu, agent_id in mps)  # noqa: E731
    hold = None
    if share_hold is not None:

        def hold(milli: int) -> tuple[Callable[[str, int], bool], str] | None:
            barred = share_hold.barred(job, milli)
            return None if barred is None else (barred, share_hold.reason(milli))

    choice = choose_share(
        job.spec, slots, cpus, mem, topology_of,
        lambda slot: agent_text(slot.attributes, ATTR_GPU_MODEL) or "",
        open_to, hold, slots[0].share_room if slots else None, mix, frag,
    )  # fmt: skip
    if isinstance(choice, str):
        return choice
    slot = choice.slot
    ports = slot.take_ports(ports_needed(1, job.spec.interactive))
    if ports is None:
        return _SHARE_PORTS
    slot.take(cpus, mem, job.spec.disk_mib, (), +1)
    slot.take_ranges(choice.take)
    tenants.add(slot.agent_id, choice.gpu_index, tenant)
    uuids, minors = gpu_facts(choice.topology, (choice.gpu_index,))
    backend = _backend(slot)
    share = GpuShare(
        gpu_index=choice.gpu_index,
        gpu_uuid=uuids[0] if uuids else None,
        memory_mib=choice.memory_mib,
        core_milli=choice.core_milli,
        backend=backend,
        gpu_minor=minors[0] if minors else None,
    )
    driver = (choice.topology.driver_version if choice.topology else None) or agent_text(
        slot.attributes, ATTR_DRIVER
    )
    result.launches.append(
        Launch(
            job_id=job.job_id,
            task_id=f"{job.task_prefix()}0",
            rank=0,
            agent_id=slot.agent_id,
            hostname=slot.hostname,
            offer_ids=slot.offer_ids,
            gpu_ids=(),
            policy="share",
            ports=ports,
            driver_version=driver,
            gpu_take=choice.take,
            share=share,
        )  # fmt: skip
    )
    return None


def gpu_facts(
    topology: Topology | None, ids: tuple[int, ...]
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The UUIDs and device minors of GPUs ``ids`` (in that order) from a decoded topology.

    Each list is all-or-nothing: one GPU without the fact empties it, so the executor
    never mixes scheduler facts with its own ``/proc`` reading.
    """
    if topology is None:
        return (), ()
    by_index = {g.index: g for g in topology.gpus}
    gpus = [by_index.get(i) for i in ids]
    uuids = tuple(g.uuid for g in gpus if g is not None and g.uuid)
    minors = tuple(g.minor for g in gpus if g is not None and g.minor is not None)
    return (uuids if len(uuids) == len(ids) else ()), (minors if len(minors) == len(ids) else ())


def _pick_gpus(
    slot: _Slot, job: Job, policy: str, topology_of: TopologyOf, driver_ok: DriverCheck
) -> tuple[tuple[int, ...], str, Topology | None]:
    """Choose GPUs on one agent: ``(ids, policy name, decoded topology or None)``.

    Raises:
        AllocationError: the agent cannot take the job (driver, model, too few GPUs).
    """
    spec = job.spec
    attrs = slot.attributes
    topology = topology_of(attrs)
    _check_vendor(spec, slot, topology)
    driver = agent_text(attrs, ATTR_DRIVER)
    if spec.cuda_version and driver and not driver_ok(driver, spec.cuda_version):
        raise AllocationError(
            f"driver {driver} on {slot.hostname} is too old for CUDA {spec.cuda_version}", "driver"
        )
    has_models = topology is not None and any(g.model for g in topology.gpus)
    agent_model = agent_text(attrs, ATTR_GPU_MODEL) or ""
    if spec.gpu_model and not has_models and not model_matches(spec.gpu_model, agent_model):
        raise AllocationError(f"no {spec.gpu_model} GPUs on {slot.hostname}", "model_mismatch")
    free = slot.free
    model = spec.gpu_model if has_models else None
    if model and topology is not None:  # a GPU the topology does not list matches no model
        free = free & frozenset(topology.gpu_indices)
    if topology is None or not set(free) <= set(topology.gpu_indices):
        # Unknown layout: links are unknown, so only first-fit makes sense.
        _note_bare_agent(slot.agent_id, slot.hostname)
        ids = allocate(_bare_topology(frozenset(free)), free, spec.gpus, policy="first-fit")
        return ids, NO_TOPOLOGY_POLICY, topology
    # The per-GPU model filter is the allocator's (AllocationRequest.gpu_model), so every
    # policy sees the same eligible GPUs; only the refusal is worded for the queue here.
    try:
        return allocate(topology, free, spec.gpus, policy=policy, gpu_model=model), policy, topology
    except AllocationError as exc:
        if exc.reason != "model_mismatch" or model is None:
            raise
        matching = sum(
            1 for g in topology.gpus if g.index in free and model_matches(model, g.model or "")
        )
        raise AllocationError(
            f"only {matching} free {spec.gpu_model} GPUs on {slot.hostname}", "model_mismatch"
        ) from None


def agent_vendor(attributes: dict[str, str], topology: Topology | None) -> str:
    """The GPU vendor of an agent: its topology's, else ``gpu_vendor``, else ``nvidia``."""
    if topology is not None and topology.gpus:
        return topology.vendor
    return (agent_text(attributes, ATTR_VENDOR) or "nvidia").lower()


def _check_vendor(spec: JobSpec, slot: _Slot, topology: Topology | None) -> None:
    """Refuse an agent of another GPU vendor, or whose ROCm is too far from the image's.

    Raises:
        AllocationError: ``vendor_mismatch`` or ``driver``, worded for the queue.
    """
    vendor = agent_vendor(slot.attributes, topology)
    if spec.gpu_vendor and spec.gpu_vendor != vendor:
        raise AllocationError(
            f"{slot.hostname} has {vendor} GPUs, the job asks for {spec.gpu_vendor}",
            "vendor_mismatch",
        )
    if spec.cuda_version and vendor != "nvidia":
        raise AllocationError(
            f"image {spec.image} is built for NVIDIA CUDA {spec.cuda_version}; "
            f"{slot.hostname} has {vendor} GPUs",
            "vendor_mismatch",
        )
    rocm = agent_text(slot.attributes, ATTR_ROCM)
    if spec.rocm_version and rocm and not _rocm_ok(rocm, spec.rocm_version):
        raise AllocationError(
            f"ROCm {rocm} on {slot.hostname} is more than 2 releases from the image's "
            f"ROCm {spec.rocm_version}",
            "driver",
        )


def _rocm_ok(agent_rocm: str, image_rocm: str) -> bool:
    try:
        return rocm_supports(agent_rocm, image_rocm)
    except DlcError:  # a release the catalog does not list: let the executor decide
        return True


_bare_agents_logged: set[str] = set()


def _note_bare_agent(agent_id: str, hostname: str) -> None:
    """Log once per agent that it gets first-fit (operators expect topology placement)."""
    if agent_id in _bare_agents_logged:
        return
    _bare_agents_logged.add(agent_id)
    log.warning(
        "agent %s (%s) has no usable dlc_topo attribute: its GPUs are placed first-fit; "
        "run `dlc node-config` on it and restart its mesos-agent with the printed --attributes",
        agent_id,
        hostname,
    )


@functools.lru_cache(maxsize=4096)
def _read_attribute(name: str, value: str) -> str:
    try:
        info = parse_agent_attributes({name: value})
    except DlcError:  # hand-written or foreign attribute: use it as it stands
        return value
    known = {ATTR_GPU_MODEL: info.gpu_model, ATTR_DRIVER: info.driver_version}
    known |= {ATTR_VENDOR: info.gpu_vendor, ATTR_ROCM: info.rocm_version}
    return known.get(name) or value


def agent_text(attributes: dict[str, str], name: str) -> str | None:
    """A DLC text attribute without node-config's ``v`` prefix (``v535.1`` -> ``535.1``)."""
    value = attributes.get(name)
    return None if value is None else _read_attribute(name, value)


@functools.lru_cache(maxsize=64)
def _bare_topology(ids: frozenset[int]) -> Topology:
    return Topology(gpus=tuple(Gpu(i) for i in sorted(ids)), source="offer")


@functools.lru_cache(maxsize=4096)
def _decode_topology(text: str) -> Topology | None:
    try:
        return topology_from_attributes({ATTR_TOPOLOGY: text})
    except DlcError:  # a bad attribute must not stop placement: treat as unknown
        return None


def default_topology_of(attributes: dict[str, str]) -> Topology | None:
    """Decode an agent's ``dlc_topo`` attribute (cached: 1,000 agents share few layouts)."""
    text = attributes.get(ATTR_TOPOLOGY)
    return _decode_topology(text) if text else None


def default_driver_ok(driver_version: str, cuda_version: str) -> bool:
    """The image catalog's driver/CUDA rule (unknown version strings: let the executor decide)."""
    try:
        return bool(driver_supports(driver_version, cuda_version))
    except DlcError:
        return True
