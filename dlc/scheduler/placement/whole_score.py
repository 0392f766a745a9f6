"""Which agent a whole-GPU job goes to: the fragmentation measure the simulator credits.

The direct replay (``dlc simulate openb``, :mod:`dlc.sim.policies.dlc`) puts each pod on the
agent whose use grows fragmentation least (:func:`dlc.scheduler.allocator.fragscore.node_costs`,
FGD's measure against the expected workload, with DLC's CPU-aware refinements). The offer
round used to send whole-GPU jobs to the agent with the fewest free GPUs that fits (best fit),
and on agents without ``dlc_topo`` to its first free GPUs, so the figure the README quotes was
not the placement that ran. :class:`WholeScore` ranks an offer round's agents for a whole-GPU
job with that same function (not a copy), against the mix the core sees: the queued and
running jobs by shape (:func:`demand_mix`). Which GPUs of the chosen agent the job gets is
still the allocator's (the topology tree, or first fit on an agent without ``dlc_topo``): the
measure counts whole GPUs per agent and cannot tell two free GPUs of one agent apart.

Costs are cached per request shape and per agent, and an agent's are recomputed only after a
placement changed it (:class:`~dlc.scheduler.allocator.fragscore.IncrementalChooser`, as in
the replay), so a round pays the measure once per shape plus once per placement. With the
core's :class:`~dlc.scheduler.placement.frag_state.FragCache` the measured states are kept across
rounds too (under a held mix), so a steady round measures only the states it has not seen
since the mix last drifted. Pure: no I/O.
"""

from __future__ import annotations

import functools
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from dlc.scheduler.allocator import fragscore, host_keep
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.allocator.base import model_choices
from dlc.scheduler.allocator.mix_models import MODELS, pressure, reserved
from dlc.scheduler.placement.frag_state import FragCache
from dlc.topology import gpu_shares

MILLI = fgd.MILLI

#: the most frequent shapes that cover this part of the demand make the mix (as the replay's
#: target mix, :func:`dlc.sim.workload.target_mix`): rare shapes only cost time
POPULARITY = 0.95

#: and so does any shape asking at least this part of the GPUs, still weighted by its count:
#: on ``default`` the 8-GPU pods are 0.5% of the pods but 5.7% of the GPUs asked, and without
#: them in the mix nothing keeps an empty 8-GPU node whole (issue 26; docs/simulator.md)
GPU_SHARE = 0.02

#: and (1; 0: off, the default) any shape restricted to some GPU models, however rare: an
#: experiment (docs/simulator.md, "Share keep"), so that the model reserve sees rare
#: restricted demand (``gpuspec05``'s P100- and V100-only pods are 0.5% of the pods each)
RESTRICTED_ALL = 0.0


#: a task shape of the mix: ``(CPU thousandths, GPU thousandths, GPUs)``, optionally with the
#: GPU models it allows (``JobSpec.gpu_model``'s choices, sorted; ``()``: any model)
Shape = tuple[int, int, int] | tuple[int, int, int, tuple[str, ...]]


def demand_mix(demands: Iterable[Shape]) -> fgd.WorkloadMix | None:
    """The expected workload from ``(CPU thousandths, GPU thousandths, GPUs[, models])`` per
    task (:data:`Shape`).

    A share asks one GPU of fewer than 1000 thousandths, a whole-GPU task its GPUs of 1000.
    The most frequent shapes covering :data:`POPULARITY` of the tasks, plus those asking
    :data:`GPU_SHARE` of the GPUs, weighted by count; ``None`` when there are none.
    """
    return counted_mix(Counter(demands))


def shape_models(spec: Any) -> tuple[str, ...]:
    """The GPU models a job's tasks allow, as a mix shape names them (``()``: any)."""
    wanted = spec.gpu_model
    return tuple(sorted(set(model_choices(wanted)))) if wanted else ()


def counted_mix(demands: Mapping[Shape, int]) -> fgd.WorkloadMix | None:
    """:func:`demand_mix` of :data:`Shape` ``-> tasks``.

    The shapes covering :data:`POPULARITY` of the tasks, plus any shape asking at least
    :data:`GPU_SHARE` of the GPUs (rare large pods), each weighted by its count. A shape
    restricted to some GPU models stays restricted (as FGD's target workload keeps the pods'
    GPU specs): agents of other models count its room as fragmented, so the scarce models are
    kept for the tasks that can use nothing else.
    """
    counts: Counter[tuple[int, int, int, tuple[str, ...]]] = Counter()
    for shape, n in demands.items():
        cpu, milli, gpus = shape[:3]
        models: tuple[str, ...] = shape[3] if len(shape) > 3 else ()
        if milli > 0 and gpus > 0 and n > 0:
            counts[(cpu, min(milli, MILLI), gpus if milli >= MILLI else 1, models)] += n
    if not counts:
        return None
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total, covered, chosen = sum(counts.values()), 0, []
    asked = sum(n * key[2] * key[1] for key, n in ranked)
    for key, n in ranked:
        rare_kept = RESTRICTED_ALL and key[3]
        if covered < POPULARITY * total or n * key[2] * key[1] >= GPU_SHARE * asked or rare_kept:
            chosen.append((key, n))
        covered += n
    # every whole-GPU shape, rare ones too, for the host keep term (fragscore.host_keep)
    whole = [(key, n) for key, n in ranked if key[1] >= MILLI]
    return fgd.WorkloadMix(
        tuple(map(_request, (key for key, _ in chosen))),
        tuple(float(n) for _, n in chosen),
        tuple(map(_request, (key for key, _ in whole))),
        tuple(float(n) for _, n in whole),
    )


def _request(key: tuple[int, int, int, tuple[str, ...]]) -> fgd.ShareRequest:
    cpu, milli, gpus, models = key
    return fgd.ShareRequest(
        cpu_milli=cpu, mem_mib=0, num_gpus=gpus, gpu_milli=milli, gpu_models=frozenset(models)
    )


def gpu_free(slot: Any) -> tuple[int, ...]:
    """Free thousandths of each GPU of an offer slot (``slots.Slot``): 1000 for a
    whole free GPU, the compute a share left on a partly used one, 0 for one not offered."""
    return _gpu_free(slot.free, slot.gpu_core)


@functools.lru_cache(maxsize=8192)
def _gpu_free(free: frozenset[int], gpu_core: gpu_shares.Ranges) -> tuple[int, ...]:
    """:func:`gpu_free` of a slot state, kept per state: agents offer the same whole GPUs and
    ranges round after round (reading the ranges per candidate was most of a round's
    ``WholeScore._read`` once churn left many agents with free GPUs, issue 26)."""
    room = gpu_shares.amounts(gpu_core) if gpu_core else {}
    width = max([*free, *room], default=-1) + 1
    return tuple(MILLI if i in free else min(room.get(i, 0), MILLI - 1) for i in range(width))


class WholeScore:
    """One placement round's agents scored for whole-GPU jobs.

    Args:
        slots: the round's offer slots (``slots.Slot``), in their order.
        mix: the expected workload (:func:`demand_mix`).
        params: fragscore's knobs (the replay's defaults).
        cache: the core's fragmentation values kept across rounds
            (:class:`~dlc.scheduler.placement.frag_state.FragCache`): states measured in an earlier
            round, or for an earlier job, are not measured again, and the mix is the one
            it holds (``mix`` when that drifted away); default: measure afresh.

    An agent's state is read (and its fragmentation measured) only when it is first a
    candidate, and again after it changed: a slot whose resources change must say so
    (:meth:`changed`). In a busy round few agents have the GPUs a job asks, so few are read.
    """

    def __init__(
        self,
        slots: Sequence[Any],
        mix: fgd.WorkloadMix,
        params: fragscore.ScoreParams = fragscore.DEFAULT_PARAMS,
        cache: FragCache | None = None,
    ):
        self._slots = list(slots)
        self._row = {id(s): k for k, s in enumerate(self._slots)}
        self._params = params
        #: the whole-GPU shapes the host keep term weighs (None: the term is off)
        self._guarded = host_keep.guarded_of(mix) if params.host_keep else None
        self._cache = cache if cache is not None and cache.params == params else None
        if self._cache is not None:
            self._mix = self._cache.adopt(mix)
        else:
            self._mix = fragscore.mix_arrays(mix, MODELS.names, params)
        n = len(self._slots)
        self._agents = fgd.AgentArrays(
            model=np.zeros(n, dtype=np.int64),  # read with the state (mix_models.MODELS)
            cpu_left=np.zeros(n, dtype=np.int64),
            mem_left=np.zeros(n, dtype=np.int64),
            gpu_left=np.zeros((n, fgd.MAX_GPUS), dtype=np.int64),
            access_of=lambda allowed: np.ones(n, dtype=bool),
            frag=np.zeros(n),
        )
        #: rows not read yet or changed since; each row's state version
        self._stale = np.ones(n, dtype=bool)
        self._version = np.zeros(n, dtype=np.int64)
        #: each row's free whole GPUs when it was last read
        self._free = np.zeros(n, dtype=np.int64)
        #: costs per request shape (CPU thousandths, GPUs), with the version each read
        self._costs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._rank: np.ndarray | None = None

    def changed(self, slot: Any) -> None:
        """``slot``'s offered resources changed (a task was placed on it or given back)."""
        row = self._row.get(id(slot))
        if row is not None:
            self._stale[row] = True

    def _read(self, rows: np.ndarray) -> None:
        """Read the state of slots ``rows`` and measure their fragmentation (one array write
        per field and GPU count, not four per slot: a round reads hundreds, issue 26)."""
        agents, slots, listed = self._agents, self._slots, rows.tolist()
        read = [slots[k] for k in listed]
        frees = [gpu_free(slot) for slot in read]
        width = max(map(len, frees), default=0)
        if width > agents.gpu_left.shape[1]:  # a wider agent than any so far
            wider = width - agents.gpu_left.shape[1]
            agents.gpu_left = np.pad(agents.gpu_left, ((0, 0), (0, wider)))
        count = len(listed)
        agents.cpu_left[rows] = np.fromiter((int(s.cpus * 1000) for s in read), np.int64, count)
        agents.mem_left[rows] = np.fromiter((int(s.mem) for s in read), np.int64, count)
        agents.model[rows] = MODELS.of_slots(read, self._mix)
        self._free[rows] = np.fromiter(map(len, map(_free, read)), np.int64, count)
        agents.gpu_left[rows] = 0
        by_width: dict[int, list[int]] = {}
        for at, free in enumerate(frees):
            by_width.setdefault(len(free), []).append(at)
        for size, ats in by_width.items():
            if size:
                agents.gpu_left[rows[ats], :size] = [frees[at] for at in ats]
        assert agents.frag is not None  # made with zeros in __init__
        if self._cache is not None:
            agents.frag[rows] = self._cache.frag(
                agents.model[rows], agents.cpu_left[rows], agents.mem_left[rows],
                agents.gpu_left[rows],
            )  # fmt: skip
        else:
            agents.frag[rows] = fragscore.node_frag(self._mix, agents, rows, self._params)
        self._stale[rows] = False
        self._version[rows] += 1

    def order(self, candidates: Sequence[Any], gpus: int, cpus: float, mem: float) -> list[Any]:
        """``candidates`` (slots of this round) best first for a job of ``gpus`` whole GPUs and
        ``cpus``/``mem`` (with its executor's): the least growth of fragmentation first, then
        the fewest free GPUs (best fit), then the agent id; agents of a model whose free room
        is kept for the restricted demand it can host (:func:`~dlc.scheduler.allocator.
        mix_models.reserved`) come after all others. A CPU-only job (``gpus`` 0) is
        scored the same way: its cost is what taking its CPU does to the mix's GPU shapes (an
        agent left with too few CPUs for a shape counts that shape's room as fragmented; host
        keep charges for taking a scarce host's CPU), so it goes where its CPU strands the
        fewest GPUs, and to the agents with the fewest free GPUs among equals."""
        row = self._row
        count = len(candidates)
        # map over builtins, not a generator: hundreds of candidates per job (issue 26)
        at = np.fromiter(map(row.__getitem__, map(id, candidates)), dtype=np.int64, count=count)
        rows = np.sort(at)
        stale = rows[self._stale[rows]]
        if len(stale):
            self._read(stale)
        request = fgd.ShareRequest(
            cpu_milli=int(cpus * 1000), mem_mib=0, num_gpus=gpus, gpu_milli=MILLI
        )
        cost = self._cost(request, rows)[at]
        # the host keep term counts hosts among these candidates: not cached with the costs
        extra = fragscore.host_keep_cost(request, self._agents, rows, self._guarded, self._params)
        if extra is not None:
            cost = cost + extra[np.searchsorted(rows, at), 0]
        free = self._free[at]  # as read: every candidate's row is current now
        # one array sort, not a Python key per candidate (issue 26): cost, the model's
        # pressure (mix_models.pressure; 0 when no shape is restricted), free GPUs, agent id
        # pressure counts the agents of each model that can host this job: the same agents
        # whichever others the round offers (the direct replay offers only those)
        agents = self._agents
        hosts = (agents.cpu_left[at] >= request.cpu_milli) & (agents.mem_left[at] >= mem)
        needed = pressure(self._mix, agents.model[at], hosts)
        # a model's room kept for the restricted demand it can host (mix_models.reserved):
        # agents of a kept model last; a CPU-only job takes no GPU room and ignores it
        kept = reserved(self._mix, agents.model[at], agents.gpu_left[at].sum(axis=1), hosts)
        kept &= gpus > 0
        order = np.lexsort((self._id_rank()[at], free, needed, cost, kept))
        return [candidates[k] for k in order]

    def _id_rank(self) -> np.ndarray:
        """Each slot's place among the slots sorted by agent id (ties of cost and free GPUs
        go by agent id)."""
        if self._rank is None:
            ids = sorted(range(len(self._slots)), key=lambda k: self._slots[k].agent_id)
            self._rank = np.empty(len(ids), dtype=np.int64)
            self._rank[ids] = np.arange(len(ids))
        return self._rank

    def _cost(self, request: fgd.ShareRequest, rows: np.ndarray) -> np.ndarray:
        """Costs of ``request`` per slot, fresh for ``rows`` (the candidates; the caller checks
        memory). Kept per shape like the replay's IncrementalChooser, but only the candidates'
        out-of-date costs are computed."""
        key = (request.cpu_milli, request.num_gpus)
        entry = self._costs.get(key)
        if entry is None:
            n = len(self._slots)
            entry = self._costs[key] = (np.zeros(n), np.full(n, -1, dtype=np.int64))
        cost, stamp = entry
        stale = rows[stamp[rows] != self._version[rows]]
        if len(stale):
            if self._cache is not None:
                costs = self._cache.costs(request, self._agents, stale)
            else:
                costs = fragscore.node_costs(request, self._agents, self._mix, stale, self._params)
            cost[stale] = costs[:, 0]
            stamp[stale] = self._version[stale]
        return cost


class FreeGpus:
    """One placement round's slots by how many whole GPUs they have free, kept current.

    A whole-GPU job used to filter and sort all 1,213 agents for the few with its GPUs free
    (issue 26); here slots sit in buckets by free-GPU count, a slot that changes says so
    (:meth:`changed`), and the answer per GPU count is kept until a slot changes (most jobs
    that reach placement in a busy round fail and change nothing).
    """

    def __init__(self, slots: Sequence[Any]):
        self.slots = slots
        # what changed() would make of each slot, without a call per slot (1,213 a round)
        keys, counts = list(map(id, slots)), list(map(len, map(_free, slots)))
        self._count: dict[int, int] = dict(zip(keys, counts, strict=True))
        self._buckets: dict[int, dict[int, Any]] = {}
        for key, count, slot in zip(keys, counts, slots, strict=True):
            self._buckets.setdefault(count, {})[key] = slot
        self._found: dict[int, list[Any]] = {}

    def covers(self, slots: Sequence[Any]) -> bool:
        """Whether ``slots`` is the list indexed (a job holding reserved agents has its own)."""
        return slots is self.slots

    def changed(self, slot: Any) -> None:
        """``slot``'s free GPUs may have changed."""
        key, count = id(slot), len(slot.free)
        old = self._count.get(key)
        if old == count:
            return
        self._found.clear()
        if old is not None:
            del self._buckets[old][key]
        self._count[key] = count
        self._buckets.setdefault(count, {})[key] = slot

    def holds(self, slots: Sequence[Any]) -> bool:
        """Whether every one of ``slots`` is indexed here (its ``free_index`` is this)."""
        return all(map(operator.is_, map(_free_index, slots), repeat(self)))

    def at_least(self, gpus: int, among: Sequence[Any] | None = None) -> list[Any]:
        """The slots with ``gpus`` or more GPUs free, fewest first, then by agent id (best
        fit: the order placement tries them in); a new list each call. ``among``: only
        these of the indexed slots (:meth:`holds`), in the same order: a job tried on the
        agents that grew since it last failed sorted hundreds of them per job (issue 26)."""
        found = self._found.get(gpus)
        if found is None:
            found = []
            for count in sorted(n for n in self._buckets if n >= gpus):  # fewest free first
                found += sorted(self._buckets[count].values(), key=_agent_id)
            self._found[gpus] = found
        if among is None:
            return list(found)
        inside = set(map(id, among))
        return [slot for slot in found if id(slot) in inside]


_agent_id = operator.attrgetter("agent_id")
_free = operator.attrgetter("free")
_free_index = operator.attrgetter("free_index")

WorkloadMix = fgd.WorkloadMix

__all__ = [
    "POPULARITY", "FreeGpus", "Shape", "WholeScore", "WorkloadMix", "demand_mix", "gpu_free",
    "shape_models",
]  # fmt: skip
