"""DLC's node scoring for shares and whole GPUs, and an incremental chooser over it.

The scheduler (through :func:`dlc.scheduler.placement.share_placement.choose_share`) and the
simulator (:mod:`dlc.sim.policies.dlc`) both call :func:`node_costs`: for each
agent, the cost of placing a request there (lower is better, ``inf`` where it
does not fit) and the GPU it would take. The agent with the lowest cost wins,
the first agent on ties.

The cost is the growth of the FGD paper's fragmentation measure (Weng et al.,
ATC'23) against the expected workload, bucketed so that near-equal growths tie
(``ScoreParams.tie_milli``), plus DLC's refinements, each measured on openb
(docs/simulator.md has the table, including the variants that measured worse).

:class:`IncrementalChooser` caches each agent's cost per request shape and
recomputes only the agents whose state changed since: a cost depends on the
agent's own state alone, so a placement invalidates one agent. That is what makes
a 10k-pod replay on 1213 agents take seconds instead of minutes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from dlc.scheduler.allocator.host_keep import Guarded, guarded_of, host_loss
from dlc.scheduler.allocator.shares import (
    AgentArrays,
    AgentView,
    MixArrays,
    SharePlacement,
    ShareRequest,
    WorkloadMix,
    arrays_from_views,
    candidates,
    feasible_agents,
    fragmentation,
    fragmentation_dedup,
)

MILLI = 1000


@dataclass(frozen=True)
class ScoreParams:
    """Knobs of DLC's cost; the defaults are the measured best on openb."""

    #: growths closer than this (GPU thousandths) count as equal
    tie_milli: float = 40.0
    #: cap what a shape can use by how many of it the agent's CPU still hosts:
    #: "none" (FGD), "linear" (CPU left / CPU per pod, fractional) or "floor" (whole pods)
    cpu_cap: str = "floor"
    #: which expected shapes the CPU cap applies to: "all" or "shares" (part of one GPU)
    cpu_cap_shapes: str = "shares"
    #: count only whole multiples of a share's size as usable on a GPU
    granular: bool = True
    #: cap what every shape can use by how many of it the agent's host memory still hosts
    #: (whole pods; an experiment on ``multigpu40``'s end gap, docs/simulator.md "Host
    #: keep"; off)
    mem_cap: bool = False
    #: weight of each expected shape: "count" (FGD: how often it comes) or "gpu"
    #: (how often times the GPU thousandths it asks)
    weight_by: str = "count"
    #: weight of the sum-of-squares term for shares (0: off); see :func:`gap_squares_delta`
    ss_weight: float = 0.0
    #: admission, not placement (0: off): a share whose leftover few expected shares fill
    #: (``hold_fill_below``) may not open a whole GPU while whole GPUs are less of the free
    #: GPU capacity than this times the whole-GPU part of the expected GPU demand (1.0: keep
    #: the free capacity shaped like the demand); it waits. See :func:`share_hold`.
    hold_reserve: float = 0.0
    #: a share's leftover on a whole GPU (1000 - its size) counts as unfillable when the
    #: expected shares that fit in it are less than this part of all expected shares
    hold_fill_below: float = 0.1
    #: weight of the host keep term (0: off): the cost of taking away an agent's ability to
    #: host a whole-GPU shape that few of the agents with its GPUs free can host, see
    #: :mod:`~dlc.scheduler.allocator.host_keep` (1 and 2 place the same on openb)
    host_keep: float = 1.0
    #: ... counting only shapes whose hosts are at least this concentrated: agents with the
    #: shape's GPUs free per agent that also has its CPU and memory, less one (4: a fifth of
    #: them or fewer host it)
    host_keep_spread: float = 4.0
    #: ... and, with this weight, the agents a shape of 2 GPUs or more packs (0: off): its
    #: GPUs exactly and 85% of their CPU or more, as the 8-GPU 64-core pods pack openb's
    #: V100M16 nodes of 64 cores; other pods took them and the shape went where it stranded
    #: GPUs (``multigpu40``: +0.11 at 130%; docs/simulator.md, "multigpu40: packing hosts")
    host_keep_pair: float = 1.0
    #: what a shape's hosts are counted against: "gpus" (the agents with its GPUs free) or
    #: "candidates" (also the agents the request being placed fits on, when more)
    host_keep_among: str = "candidates"
    #: which placements' growth is at least their growth without the CPU cap (``cpu_cap=
    #: "none"``, the other knobs as set): "heavy" (shares asking more cores per GPU thousandth
    #: than the mix's GPU tasks on average; measured best), "shares", "all" or "none". The cap
    #: counts a CPU-poor agent's GPU room as fragmented already, so taking its last cores looks
    #: cheap there: CPU-heavy shares went to the agents with the fewest cores per GPU and
    #: stranded their GPUs (gpushare100; docs/simulator.md, "gpushare100 and multigpu40
    #: against FGD")
    cap_max: str = "heavy"


DEFAULT_PARAMS = ScoreParams()

#: ``cost_fn(req, nodes) -> [len(nodes), G]`` costs (inf: does not fit)
CostFn = Callable[[ShareRequest, np.ndarray], np.ndarray]
#: ``frag(model, cpu_left, mem_left, gpu_left) -> [K]``: the fragmentation of K states
StatesFrag = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def mix_arrays(
    mix: WorkloadMix, model_names: Sequence[str], params: ScoreParams = DEFAULT_PARAMS
) -> MixArrays:
    """The expected workload as arrays, its weights as ``params.weight_by`` says."""
    arrays = MixArrays(mix, model_names)
    if params.weight_by == "gpu":
        w = arrays.weight * np.maximum(arrays.milli * arrays.num, 0)
        arrays.weight = w / w.sum() if w.sum() else arrays.weight
    return arrays


def frag_of(
    mix: MixArrays,
    model: np.ndarray,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
    params: ScoreParams = DEFAULT_PARAMS,
) -> np.ndarray:
    """DLC's fragmentation of K agent states: FGD's, with what CPU strands counted.

    FGD counts a GPU's room as usable by a shape whenever one pod of that shape
    fits on the agent. With ``cpu_cap``, the room usable by a *share* shape is
    capped by the GPU thousandths of the pods of that shape the agent's CPU can
    still host, so the GPUs that CPU would strand beside large shares count as
    fragments. (Capping whole-GPU shapes too measured worse on multi-GPU mixes.)
    With ``granular``, only whole multiples of a share's size count on a GPU.
    """
    if params.cpu_cap == "none" and not params.granular:
        return fragmentation(mix, model, cpu_left, mem_left, gpu_left)
    total = gpu_left.sum(axis=1)
    usable, fitting = _gpu_terms(mix, gpu_left, params.granular)
    runs = fitting >= mix.num[None, :]
    runs &= cpu_left[:, None] >= mix.cpu[None, :]
    runs &= mem_left[:, None] >= mix.mem[None, :]
    runs &= mix.access[model] & mix.asks_gpu[None, :]
    if params.cpu_cap != "none":
        pods = cpu_left[:, None] / np.maximum(mix.cpu, 1)[None, :]
        if params.cpu_cap == "floor":
            pods = np.floor(pods)
        capped = np.minimum(usable, pods * (mix.milli * mix.num)[None, :])
        if params.cpu_cap_shapes == "shares":
            capped = np.where((mix.milli < MILLI)[None, :], capped, usable)
        usable = capped
    if params.mem_cap:
        by_mem = np.floor(mem_left[:, None] / np.maximum(mix.mem, 1)[None, :])
        usable = np.minimum(usable, by_mem * (mix.milli * mix.num)[None, :])
    frag = np.where(runs, total[:, None] - usable, total[:, None])
    out: np.ndarray = frag @ mix.weight
    return out


def _gpu_terms(
    mix: MixArrays, gpu_left: np.ndarray, granular: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(thousandths each shape can use, GPUs each shape fits on)``, ``[K, S]`` each, of K
    states: per GPU, the room a shape fits (``granular``: whole multiples of its size).

    Free room is 0-1000 thousandths in every state placement measures, so the per-GPU terms
    of all 1,001 values are looked up in one table per mix (both terms packed in one int64)
    instead of dividing ``[K, G, S]`` arrays: the same integers, and ``frag_of`` of 600 states
    in a sixth of the time (issue 26). Other values take the arithmetic."""
    size = np.maximum(mix.milli, 1)
    if gpu_left.size and gpu_left.min() >= 0 and gpu_left.max() <= MILLI:
        packed = _terms_table(mix, granular)[gpu_left].sum(axis=1)
        return packed & _LOW, packed >> _SHIFT
    fits = gpu_left[:, :, None] >= size[None, None, :]
    if granular:
        per_gpu = (gpu_left[:, :, None] // size[None, None, :]) * size[None, None, :]
        usable = np.minimum(per_gpu, gpu_left[:, :, None]).sum(axis=1)
    else:
        usable = (gpu_left[:, :, None] * fits).sum(axis=1)
    return usable, fits.sum(axis=1)


#: a GPU's usable thousandths sit in the low bits of a packed term, its fit count above them
#: (1,024 GPUs of 1,000 thousandths stay below 2**32)
_SHIFT = 32
_LOW = (1 << _SHIFT) - 1
#: the tables of the mixes measured lately: id of the mix -> (the mix, granular, table)
_TABLES: dict[int, tuple[MixArrays, bool, np.ndarray]] = {}


def _terms_table(mix: MixArrays, granular: bool) -> np.ndarray:
    """``[1001, S]``: per free room 0..1000 and shape, usable + (fits << :data:`_SHIFT`),
    kept per mix (a core holds one mix for many rounds, frag_state)."""
    kept = _TABLES.get(id(mix))
    if kept is not None and kept[0] is mix and kept[1] == granular:
        return kept[2]
    room = np.arange(MILLI + 1, dtype=np.int64)[:, None]
    size = np.maximum(mix.milli, 1)[None, :]
    fits = room >= size
    usable = np.minimum((room // size) * size, room) if granular else room * fits
    table = usable + (fits.astype(np.int64) << _SHIFT)
    if len(_TABLES) >= 16:  # a few mixes live at once (a core's, the replay's)
        _TABLES.clear()
    _TABLES[id(mix)] = (mix, granular, table)
    return table


def frag_dedup(
    mix: MixArrays,
    model: np.ndarray,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
    params: ScoreParams = DEFAULT_PARAMS,
) -> np.ndarray:
    """As :func:`frag_of`, each distinct state computed once."""
    if params.cpu_cap == "none" and not params.granular:
        return fragmentation_dedup(mix, model, cpu_left, mem_left, gpu_left)
    if len(model) < 64:
        return frag_of(mix, model, cpu_left, mem_left, gpu_left, params)
    gpus = np.sort(gpu_left, axis=1)
    key = model * _HASH[0] + cpu_left * _HASH[1] + mem_left * _HASH[2]
    key = key + gpus @ _HASH[3 : 3 + gpus.shape[1]]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    values = frag_of(mix, model[first], cpu_left[first], mem_left[first], gpus[first], params)
    return values[inverse.reshape(-1)]


#: hash weights: 3 for model, CPUs, memory, then one per GPU slot (16-GPU agents and wider
#: make more than 13 slots; 1024 is far beyond any machine)
_HASH = np.random.default_rng(2026).integers(1, 2**62, size=1024 + 3, dtype=np.int64) | 1
#: the same weights, for a cache keyed as :func:`frag_dedup` dedups (frag_state)
HASH = _HASH


def node_frag(
    mix: MixArrays, agents: AgentArrays, nodes: np.ndarray, params: ScoreParams = DEFAULT_PARAMS
) -> np.ndarray:
    """The fragmentation of agents ``nodes`` in their current state."""
    return frag_of(
        mix,
        agents.model[nodes],
        agents.cpu_left[nodes],
        agents.mem_left[nodes],
        agents.gpu_left[nodes],
        params,
    )


def node_costs(
    req: ShareRequest,
    agents: AgentArrays,
    mix: MixArrays,
    nodes: np.ndarray,
    params: ScoreParams = DEFAULT_PARAMS,
    frag: StatesFrag | None = None,
) -> np.ndarray:
    """Cost of ``req`` on each GPU slot of each of ``nodes``: ``[len(nodes), G]``.

    Lower is better; inf where it does not fit. A share has a cost per GPU with
    room; any other request has its agent's cost in column 0 (whole GPUs are the
    first free ones). ``agents.frag`` must hold each agent's current fragmentation.
    ``frag(model, cpu_left, mem_left, gpu_left)`` measures the states after placing
    (default: :func:`frag_dedup` against ``mix``; a
    :class:`~dlc.scheduler.placement.frag_state.FragCache` keeps them across calls).
    """
    width = agents.gpu_left.shape[1]
    cost = np.full((len(nodes), width), np.inf)
    mask = np.zeros(len(agents.model), dtype=bool)
    mask[nodes] = True
    mask &= feasible_agents(req, agents)
    if not mask.any():
        return cost
    node, slots, cpu_left, mem_left, gpu_left = candidates(req, agents, mask)
    if frag is None:
        after = frag_dedup(mix, agents.model[node], cpu_left, mem_left, gpu_left, params)
    else:
        after = frag(agents.model[node], cpu_left, mem_left, gpu_left)
    assert agents.frag is not None, "node_cost needs each agent's fragmentation measured"
    growth = after - agents.frag[node]
    if _cap_max(req, mix, params):
        growth = np.maximum(
            growth, _uncapped_growth(mix, agents, node, cpu_left, mem_left, gpu_left, params)
        )
    rows = np.searchsorted(nodes, node)
    cost[rows, np.maximum(slots, 0)] = np.round(growth / params.tie_milli)
    return cost


def _cap_max(req: ShareRequest, mix: MixArrays, params: ScoreParams) -> bool:
    """Whether ``req``'s growth is floored by the uncapped one (:attr:`ScoreParams.cap_max`)."""
    if params.cpu_cap == "none" or params.cap_max == "none":
        return False
    if params.cap_max == "all":
        return True
    share = req.num_gpus == 1 and 0 < req.gpu_milli < MILLI
    if params.cap_max == "shares" or not share:
        return share
    # "heavy": a share asking more cores per GPU thousandth than the mix's GPU tasks do
    gpu = mix.asks_gpu
    demand = mix.weight[gpu] * mix.milli[gpu] * mix.num[gpu]
    return bool(
        req.cpu_milli * demand.sum() > req.gpu_milli * (mix.weight[gpu] * mix.cpu[gpu]).sum()
    )


def _uncapped_growth(
    mix: MixArrays,
    agents: AgentArrays,
    node: np.ndarray,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
    params: ScoreParams,
) -> np.ndarray:
    """The growth of :func:`node_costs`' candidates (agents ``node``, each in the state after
    as given) measured without the CPU cap (:attr:`ScoreParams.cap_max`)."""
    plain = replace(params, cpu_cap="none")
    model = agents.model[node]
    before = frag_dedup(
        mix, model, agents.cpu_left[node], agents.mem_left[node], agents.gpu_left[node], plain
    )
    after = frag_dedup(mix, model, cpu_left, mem_left, gpu_left, plain)
    growth: np.ndarray = after - before
    return growth


def gap_squares_delta(
    gpu_left: np.ndarray, cpu_left: np.ndarray, share_milli: int, live_cpu: int
) -> np.ndarray:
    """Change of the sum over gap sizes of (GPUs with that gap)^2 per candidate GPU.

    The Sum-of-Squares rule of online bin packing (Csirik et al., 2006): a share
    goes where the counts of partly used GPUs by free room stay even, so that the
    gaps that later shares need keep existing. Only GPUs on agents with at least
    ``live_cpu`` CPU left count (a gap beside no CPU takes nothing). ``[agents, G]``;
    where the share does not fit the value is meaningless (the cost is inf there).
    """
    live = (cpu_left >= live_cpu)[:, None] & (gpu_left > 0) & (gpu_left < MILLI)
    counts = np.bincount(gpu_left[live], minlength=MILLI + 1).astype(float)
    after = np.clip(gpu_left - share_milli, 0, MILLI)
    delta = np.where(gpu_left < MILLI, 1.0 - 2.0 * counts[gpu_left], 0.0)
    return delta + np.where(after > 0, 2.0 * counts[after] + 1.0, 0.0)


def leftover_fill(share_milli: int, mix: MixArrays) -> float:
    """Part of the expected shares (by weight) that fit in what ``share_milli`` leaves of a GPU.

    The leftover of an 810-thousandth share is 190: on openb's ``default`` only the
    rare 50-160 shares fit there (about 3% of shares), so a whole GPU opened for it
    stays 19% empty; a 470 share leaves room for another 470 (about half of them).
    """
    shares = (mix.milli > 0) & (mix.milli < MILLI) & (mix.num == 1)
    total = mix.weight[shares].sum()
    if not total:
        return 1.0
    fits = shares & (mix.milli <= MILLI - share_milli)
    return float(mix.weight[fits].sum() / total)


def whole_demand(mix: MixArrays) -> float:
    """Part of the expected GPU demand (weight x GPU thousandths) asked by whole-GPU shapes."""
    demand = mix.weight * np.where(mix.num > 0, mix.milli * mix.num, 0)
    total = demand.sum()
    return float(demand[mix.milli >= MILLI].sum() / total) if total else 0.0


def share_hold(
    share_milli: int,
    gpu_left: np.ndarray,
    mix: MixArrays,
    params: ScoreParams = DEFAULT_PARAMS,
) -> np.ndarray | None:
    """``[agents, G]`` inf on whole free GPUs where a share should not open one; else ``None``.

    Admission, not placement. Whole-GPU jobs use a whole GPU fully; a share whose
    leftover is unfillable (:func:`leftover_fill` below ``params.hold_fill_below``)
    strands that leftover. So while whole GPUs make up less of the free GPU capacity
    than ``params.hold_reserve`` x :func:`whole_demand` (the free capacity is shaped
    less like whole GPUs than the demand is), such a share may only join a GPU already
    in use; where none has room it waits. An empty cluster (all free capacity whole)
    holds nothing, and neither does a workload with no whole-GPU jobs.
    """
    keep = params.hold_reserve * whole_demand(mix)
    if not keep or leftover_fill(share_milli, mix) >= params.hold_fill_below:
        return None
    whole = gpu_left == MILLI
    if whole.sum() * MILLI >= keep * gpu_left.sum():
        return None
    return np.where(whole, np.inf, 0.0)


def placement_of(req: ShareRequest, agents: AgentArrays, agent: int, slot: int) -> SharePlacement:
    """The placement for the chosen agent: the slot for a share, else the first free GPUs."""
    if req.is_share:
        return SharePlacement(agent, (int(slot),))
    if not req.num_gpus:
        return SharePlacement(agent, ())
    free = np.flatnonzero(agents.gpu_left[agent] == MILLI)[: req.num_gpus]
    return SharePlacement(agent, tuple(int(g) for g in free))


def host_keep_cost(
    req: ShareRequest,
    agents: AgentArrays,
    rows: np.ndarray,
    guarded: Guarded | None,
    params: ScoreParams = DEFAULT_PARAMS,
) -> np.ndarray | None:
    """``[len(rows), G]`` host keep term (:mod:`~dlc.scheduler.allocator.host_keep`) of
    ``req`` on the candidate agents ``rows``, in the cost's buckets; ``None`` when off."""
    if not params.host_keep or guarded is None or not len(rows):
        return None
    lost = host_loss(
        req, agents.cpu_left[rows], agents.mem_left[rows], agents.gpu_left[rows], guarded,
        params.host_keep_spread, params.host_keep_pair, params.host_keep_among,
    )  # fmt: skip
    out: np.ndarray = lost * (params.host_keep / params.tie_milli)
    return out


def choose(
    req: ShareRequest,
    agents: AgentArrays,
    mix: MixArrays,
    params: ScoreParams = DEFAULT_PARAMS,
    frag: StatesFrag | None = None,
    guarded: Guarded | None = None,
    extra: np.ndarray | None = None,
) -> SharePlacement | None:
    """One decision over all agents: the lowest cost, the first agent on ties. ``frag``
    measures states (default: :func:`frag_dedup`, afresh; see :func:`node_costs`);
    ``guarded``: the shapes the host keep term weighs (default: none); ``extra``: added to
    the cost, ``[agents, 1]`` or ``[agents, G]`` in tie buckets (default: nothing)."""
    if agents.frag is None:
        measure = frag or functools.partial(frag_dedup, mix, params=params)
        agents.frag = measure(agents.model, agents.cpu_left, agents.mem_left, agents.gpu_left)
    every = np.arange(len(agents.model))
    cost = node_costs(req, agents, mix, every, params, frag)
    keep = host_keep_cost(req, agents, every, guarded, params)
    if keep is not None:
        cost = cost + keep
    if extra is not None:
        cost = cost + extra
    best = pick(cost, agents.gpu_left)
    return None if best is None else placement_of(req, agents, *best)


def pick(cost: np.ndarray, gpu_left: np.ndarray) -> tuple[int, int] | None:
    """``(agent, slot)`` of the lowest cost: the first agent on ties, then the fullest GPU."""
    per_agent = cost.min(axis=1)
    agent = int(np.argmin(per_agent))
    if not np.isfinite(per_agent[agent]):
        return None
    row = cost[agent]
    tied = np.flatnonzero(row == per_agent[agent])
    slot = int(tied[np.argmin(gpu_left[agent, tied])])
    return agent, slot


def place(
    req: ShareRequest,
    views: Sequence[AgentView],
    mix: WorkloadMix | None = None,
    params: ScoreParams = DEFAULT_PARAMS,
) -> SharePlacement | None:
    """Where ``req`` should go among ``views`` (``None``: it fits nowhere): the scheduler's call.

    ``mix`` is the expected workload; without one, the request's own shape is the
    whole mix (place so that the next request like it still fits).
    """
    if not views:
        return None
    arrays, models = arrays_from_views(views)
    mix = mix or WorkloadMix(shapes=(req,), weights=(1.0,))
    guarded = guarded_of(mix) if params.host_keep else None
    return choose(req, arrays, mix_arrays(mix, models, params), params, guarded=guarded)


class IncrementalChooser:
    """Lowest-cost agent per request, recomputing only agents changed since the last look.

    ``cost_fn(req, nodes)`` returns ``[len(nodes), G]`` costs (see :func:`node_costs`)
    and must depend on the request and each agent's own state only. The cache key
    leaves out host memory (checked here, at each decision) so that requests that
    differ only in memory share one entry; pass ``mem_in_key=True`` when
    ``cost_fn`` depends on the request's memory.
    """

    def __init__(self, n_agents: int, width: int, cost_fn: CostFn, mem_in_key: bool = False):
        self.version = np.zeros(n_agents, dtype=np.int64)
        self.width = width
        self.cost_fn = cost_fn
        self.mem_in_key = mem_in_key
        self._cache: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}

    def touched(self, agent: int) -> None:
        """Agent ``agent`` changed: its cached costs are stale."""
        self.version[agent] += 1

    def costs(self, req: ShareRequest) -> np.ndarray:
        """Current ``[agents, G]`` costs of ``req`` (memory not checked; do not modify)."""
        key: tuple[object, ...] = (req.cpu_milli, req.num_gpus, req.gpu_milli, req.gpu_models)
        if self.mem_in_key:
            key += (req.mem_mib,)
        entry = self._cache.get(key)
        if entry is None:
            n = len(self.version)
            entry = (np.zeros((n, self.width)), np.full(n, -1, dtype=np.int64))
            self._cache[key] = entry
        cost, stamp = entry
        stale = np.flatnonzero(stamp != self.version)
        if len(stale):
            probe = req if self.mem_in_key else replace(req, mem_mib=0)
            cost[stale] = self.cost_fn(probe, stale)
            stamp[stale] = self.version[stale]
        return cost

    def best(
        self,
        req: ShareRequest,
        mem_left: np.ndarray,
        gpu_left: np.ndarray,
        extra: np.ndarray | None = None,
    ) -> tuple[int, int] | None:
        """``(agent, slot)`` of the lowest cost (plus ``extra``) where memory fits."""
        cost = self.costs(req)
        if extra is not None:
            cost = cost + extra
        if req.mem_mib:
            cost = np.where((mem_left >= req.mem_mib)[:, None], cost, np.inf)
        return pick(cost, gpu_left)


__all__ = [
    "DEFAULT_PARAMS",
    "HASH",
    "IncrementalChooser",
    "ScoreParams",
    "choose",
    "host_keep_cost",
    "node_costs",
    "node_frag",
    "gap_squares_delta",
    "pick",
    "place",
    "leftover_fill",
    "whole_demand",
    "share_hold",
    "placement_of",
]
