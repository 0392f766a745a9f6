"""Fragmentation values kept from round to round and from job to job (issue 26).

Every offer round used to measure the fragmentation (:func:`~dlc.scheduler.allocator.
fragscore.frag_of`) of every candidate agent from scratch, and every share measured all
agents again, though between two rounds most agents do not change and the expected mix moves
by a few jobs. :class:`FragCache` keeps, for one core, the fragmentation of each agent state
it has measured, keyed by the state itself (the dedup key of :func:`~dlc.scheduler.
allocator.fragscore.frag_dedup`: model, CPUs, memory, free thousandths per GPU sorted), under
one *held* mix. A key is the state, so an agent that changed has a new key and is measured
again: nothing is invalidated by hand, and an answer never depends on which agent asked.

The mix the core sees (:func:`~dlc.scheduler.placement.whole_score.counted_mix`) changes every round
by the few jobs that came and went. Re-measuring every agent for that is most of the cost, so the
held mix stays until the new one has *drifted* from it (:meth:`FragCache.adopt`): another shape
set is fine only when the shapes that differ weigh little, since the drift is the L1 distance
between the normalised weights over the union of shapes (a shape missing from one side weighs 0
there). The measure is linear in the weights (``frag = per-shape frag @ weight``) and each
per-shape term lies in ``[0, free thousandths of the agent]``, so a drift of ``d`` moves any
agent's fragmentation, and any growth, by at most ``d`` x its free thousandths: 0.01 is at
most 80 thousandths on an 8-GPU agent, two of the cost's 40-thousandth tie buckets, and a
fraction of one on the partly used agents most placements compare. With an unchanged mix
the values, and so the decisions, are exactly the ones measured afresh.

Shares (:meth:`FragCache.share_costs`) also keep each agent's cost row per request shape
(CPUs, size), keyed by the agent's state in GPU order, so a share measures only the agents
that shape has not met in that state; whole-GPU jobs
(:class:`~dlc.scheduler.placement.whole_score.WholeScore`) keep their per-round costs per shape and
take the states from here.

One cache belongs to one core (:class:`~dlc.scheduler.placement.round_memo.RoundMemo`); placement
without one measures afresh as before. Pure: no I/O.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.allocator.mix_models import MODELS

#: the L1 drift of the normalised mix weights past which the held mix is replaced
#: (module docstring; docs/scheduler.md has the measurement)
MAX_DRIFT = 0.01

#: states kept before the cache starts again (a few per agent and shape is plenty)
_KEPT = 400_000
#: share request shapes whose cost rows are kept at once, and rows kept per shape (a few per
#: agent): at most 64 x 16,384 rows of 8 GPUs, 64 MiB
_SHAPES = 64
_ROWS_PER_SHAPE = 16_384


def _weights(mix: fgd.WorkloadMix) -> dict[fgd.ShareRequest, float]:
    """Shape -> normalised weight (shapes that repeat add up)."""
    total = float(sum(mix.weights)) or 1.0
    out: dict[fgd.ShareRequest, float] = {}
    for shape, weight in zip(mix.shapes, mix.weights, strict=True):
        out[shape] = out.get(shape, 0.0) + weight / total
    return out


def drift(held: fgd.WorkloadMix, new: fgd.WorkloadMix) -> float:
    """L1 distance between the normalised weights of two mixes, over the union of shapes."""
    a, b = _weights(held), _weights(new)
    return sum(abs(a.get(s, 0.0) - b.get(s, 0.0)) for s in a.keys() | b.keys())


class FragCache:
    """Fragmentation of agent states under one held mix, kept across rounds and jobs.

    Args:
        params: fragscore's knobs (the replay's defaults).
        max_drift: :data:`MAX_DRIFT` (0: any change of the mix is adopted, and every
            decision is the one measured afresh).
    """

    def __init__(
        self, params: fragscore.ScoreParams = fragscore.DEFAULT_PARAMS, max_drift: float = MAX_DRIFT
    ):
        self.params = params
        self.max_drift = max_drift
        self.mix: fgd.WorkloadMix | None = None
        self.arrays: fgd.MixArrays | None = None
        #: how many times a mix was adopted (each one starts the values again)
        self.epoch = 0
        #: what :meth:`frag` answered from the cache and what it measured (for benches, tests)
        self.hits = 0
        self.measured = 0
        self._values = _Values()
        #: request shape -> cost rows by agent state (shares)
        self._shares: dict[tuple[object, ...], _CostRows] = {}
        self._mem_free = True
        #: the last mix asked about, and the arrays it got (a round asks once per share)
        self._asked: tuple[fgd.WorkloadMix | None, fgd.MixArrays | None] = (None, None)

    def adopt(self, mix: fgd.WorkloadMix) -> fgd.MixArrays:
        """The mix arrays to score this round against: the held mix while ``mix`` is within
        :attr:`max_drift` of it, else ``mix`` (held from now on; the values start again)."""
        asked, arrays = self._asked
        if mix is asked and arrays is not None and arrays is self.arrays:
            return arrays
        self._asked = (mix, self._adopt(mix))
        assert self.arrays is not None
        return self.arrays

    def _adopt(self, mix: fgd.WorkloadMix) -> fgd.MixArrays:
        if self.mix is not None and self.arrays is not None:
            # the measure reads shapes and weights only (``guarded`` is the host keep term's)
            if mix is self.mix or (mix.shapes, mix.weights) == (self.mix.shapes, self.mix.weights):
                return self.arrays
            if self.max_drift > 0 and drift(self.mix, mix) <= self.max_drift:
                return self.arrays
        self.mix = mix
        self.arrays = fragscore.mix_arrays(mix, MODELS.names, self.params)
        # no shape of the mix asks memory (the core's mixes never do): memory then changes
        # no value, and states that differ only in memory share one key
        self._mem_free = not bool(self.arrays.mem.any())
        self._values = _Values()
        self._shares = {}
        self.epoch += 1
        return self.arrays

    def frag(
        self,
        model: np.ndarray,
        cpu_left: np.ndarray,
        mem_left: np.ndarray,
        gpu_left: np.ndarray,
    ) -> np.ndarray:
        """:func:`~dlc.scheduler.allocator.fragscore.frag_of` of K states under the held mix
        (:meth:`adopt` first), measuring only the states not measured since it was adopted."""
        assert self.arrays is not None, "adopt a mix first"
        gpus = np.sort(gpu_left, axis=1)
        mem = np.zeros_like(mem_left) if self._mem_free else mem_left
        # each distinct state looked up once (many agents are in the same state)
        keys, first, inverse = np.unique(
            _key(model, cpu_left, mem, gpus), return_index=True, return_inverse=True
        )
        values = self._values.find(keys)
        missing = np.flatnonzero(np.isnan(values))
        self.hits += len(keys) - len(missing)
        if len(missing):
            rows = first[missing]
            fresh = fragscore.frag_of(
                self.arrays, model[rows], cpu_left[rows], mem_left[rows], gpus[rows], self.params
            )
            values[missing] = fresh
            self.measured += len(missing)
            self._values.add(keys[missing], fresh)
        out: np.ndarray = values[inverse.reshape(-1)]
        return out

    def costs(
        self, req: fgd.ShareRequest, agents: fgd.AgentArrays, nodes: np.ndarray
    ) -> np.ndarray:
        """:func:`~dlc.scheduler.allocator.fragscore.node_costs` with every fragmentation (the
        agents' own, ``agents.frag``, and the states after placing) from this cache."""
        assert self.arrays is not None, "adopt a mix first"
        return fragscore.node_costs(req, agents, self.arrays, nodes, self.params, frag=self.frag)

    def share_costs(self, req: fgd.ShareRequest, agents: fgd.AgentArrays) -> np.ndarray:
        """``[agents, G]`` costs of share ``req`` on every agent (:func:`~dlc.scheduler.
        allocator.fragscore.node_costs` over all of them), kept per request shape and agent
        state: an agent whose state this shape met before under the held mix is not
        measured again (its before and after states, and the cost row, are the same)."""
        assert self.arrays is not None, "adopt a mix first"
        n, width = agents.gpu_left.shape
        mem = agents.mem_left if not self._mem_free else np.zeros_like(agents.mem_left)
        # the cost row depends on the GPU order (a share's cost is per GPU): keys unsorted,
        # and whether memory fits (all it does when no shape of the mix asks memory)
        keys = _key(agents.model, agents.cpu_left, mem, agents.gpu_left) * 2 + (
            agents.mem_left >= req.mem_mib
        )
        shape: tuple[object, ...] = (req.cpu_milli, req.gpu_milli, req.num_gpus, req.gpu_models)
        if not self._mem_free:
            shape += (req.mem_mib,)
        rows = self._shares.get(shape)
        if rows is None:
            if len(self._shares) >= _SHAPES:  # bounded memory: start the rows again
                self._shares = {}
            rows = self._shares[shape] = _CostRows()
        cost, missing = rows.find(keys, width)
        self.hits += n - len(missing)
        if len(missing):
            agents.frag = np.zeros(n)
            agents.frag[missing] = self.frag(
                agents.model[missing], agents.cpu_left[missing], agents.mem_left[missing],
                agents.gpu_left[missing],
            )  # fmt: skip
            fresh = fragscore.node_costs(req, agents, self.arrays, missing, self.params, self.frag)
            cost[missing] = fresh
            rows.add(keys[missing], fresh)
        return cost


class _CostRows:
    """State key -> cost row of one request shape (a share's cost per GPU)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every row."""
        self.index: dict[int, int] = {}
        self.store = np.zeros((64, 1))
        self.used = 0

    def find(self, keys: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``([len(keys), width]`` costs, inf rows where unknown; the unknown positions)."""
        at = np.fromiter(
            map(self.index.get, keys.tolist(), repeat(-1)), dtype=np.int64, count=len(keys)
        )
        cost = np.full((len(keys), width), np.inf)
        known = np.flatnonzero(at >= 0)
        if len(known):
            w = min(width, self.store.shape[1])
            cost[known, :w] = self.store[at[known], :w]
        return cost, np.flatnonzero(at < 0)

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Remember the cost ``rows`` of states ``keys`` (not known yet)."""
        if self.used + len(keys) > _ROWS_PER_SHAPE:
            self.clear()  # start again: a few per agent is plenty
        need, width = self.used + len(keys), max(self.store.shape[1], rows.shape[1])
        if need > len(self.store) or width > self.store.shape[1]:
            store = np.full((max(need, 2 * len(self.store)), width), np.inf)
            store[: self.used, : self.store.shape[1]] = self.store[: self.used]
            self.store = store
        self.store[self.used : need, : rows.shape[1]] = rows
        self.index.update(zip(keys.tolist(), range(self.used, need), strict=True))
        self.used = need


class _Values:
    """State key -> fragmentation: a sorted array searched in one step for a batch of keys,
    and the keys added since the last merge in a dict (merged when it grows)."""

    _MERGE = 4096

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every value."""
        self.keys = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0)
        self.recent: dict[int, float] = {}

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The value of each key (NaN: not known)."""
        out = np.full(len(keys), np.nan)
        if len(self.keys):
            at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            hit = self.keys[at] == keys
            out[hit] = self.values[at[hit]]
        if self.recent:
            left = np.flatnonzero(np.isnan(out))
            if len(left):
                get = self.recent.get
                out[left] = np.fromiter(
                    map(get, keys[left].tolist(), repeat(np.nan)), dtype=float, count=len(left)
                )
        return out

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Remember ``keys`` (not known yet) with their values."""
        if len(self.keys) + len(self.recent) + len(keys) > _KEPT:
            self.clear()  # start again: a few per agent and shape is plenty
        self.recent.update(zip(keys.tolist(), values.tolist(), strict=True))
        if len(self.recent) >= self._MERGE:
            more = np.fromiter(self.recent.keys(), dtype=np.int64, count=len(self.recent))
            vals = np.fromiter(self.recent.values(), dtype=float, count=len(self.recent))
            keys_all = np.concatenate([self.keys, more])
            order = np.argsort(keys_all, kind="stable")
            self.keys = keys_all[order]
            self.values = np.concatenate([self.values, vals])[order]
            self.recent = {}


def _key(
    model: np.ndarray, cpu_left: np.ndarray, mem_left: np.ndarray, gpus: np.ndarray
) -> np.ndarray:
    """The dedup key of fragscore (``gpus`` sorted per row): one int per state."""
    weights = fragscore.HASH
    key: np.ndarray = model * weights[0] + cpu_left * weights[1] + mem_left * weights[2]
    key = key + gpus @ weights[3 : 3 + gpus.shape[1]]
    return key


__all__ = ["MAX_DRIFT", "FragCache", "drift"]
