"""Bitmask clique searches over a machine's link-rank graphs.

A set of GPUs whose every pair ranks at least ``t`` is a clique of the graph
``tables.adjacency[t]``. The tree policy asks for the best ``t`` a request can get
(:func:`best_threshold`) and how many future requests of a size could still get
the best class an empty machine offers (:func:`future_packing`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import networkx as nx

from dlc.scheduler.allocator.tables import IdealSets, MachineTables, positions

#: machines up to this many GPUs get an exact packing count when ideal sets overlap
EXACT_PACKING_MAX_GPUS = 12


def candidates(adjacency: list[int], free: int, required: int) -> int | None:
    """Free GPUs linked well enough to every required GPU (``None``: required fails)."""
    cand = free & ~required
    for r in positions(required):
        if required & ~(1 << r) & ~adjacency[r]:
            return None
        cand &= adjacency[r]
    return cand


def has_clique(adjacency: list[int], cand: int, need: int) -> bool:
    """Whether ``cand`` holds ``need`` GPUs all adjacent to each other."""
    if need == 0:
        return True
    rest = cand
    while rest.bit_count() >= need:
        low = rest & -rest
        rest ^= low
        if has_clique(adjacency, rest & adjacency[low.bit_length() - 1], need - 1):
            return True
    return False


def iter_cliques(adjacency: list[int], cand: int, need: int, chosen: int = 0) -> Iterator[int]:
    """Every ``need``-clique of ``cand`` (as ``chosen |`` its mask), lowest bits first."""
    if need == 0:
        yield chosen
        return
    rest = cand
    while rest.bit_count() >= need:
        low = rest & -rest
        rest ^= low
        yield from iter_cliques(
            adjacency, rest & adjacency[low.bit_length() - 1], need - 1, chosen | low
        )


def best_threshold(tables: MachineTables, free: int, required: int, count: int) -> int:
    """The best rank ``t`` such that some ``count``-set of ``free`` holding ``required``
    has every pair ranked ``>= t``."""
    for t in tables.thresholds:
        cand = candidates(tables.adjacency[t], free, required)
        if cand is not None and has_clique(tables.adjacency[t], cand, count - required.bit_count()):
            return t
    return tables.thresholds[-1]  # every pair qualifies at the lowest rank


def future_packing(tables: MachineTables, sizes: tuple[int, ...], free: int) -> tuple[int, ...]:
    """For each size, how many disjoint sets of the empty machine's best class fit in
    ``free``: the requests of that size the leftover can still serve perfectly.

    Memoised per machine: a machine has at most 2**GPUs free masks.
    """
    key = (sizes, free)
    hit = tables.memo.get(key)
    if hit is None:
        hit = tables.memo[key] = tuple(_packing(tables, m, free) for m in sizes)
    return hit


def _packing(tables: MachineTables, size: int, free: int) -> int:
    cliques, disjoint, union, memo = ideal_sets(tables, size)
    if disjoint or len(tables.indices) > EXACT_PACKING_MAX_GPUS:
        # ideal sets are the subsets of disjoint groups (always on PCIe trees and
        # NVSwitch boxes): count per group. Overlapping ones on big boxes: estimate.
        return sum((c & free).bit_count() // size for c in cliques)
    return _exact(cliques, size, free & union, memo)


def _exact(cliques: list[int], size: int, free: int, memo: dict[int, int]) -> int:
    if free.bit_count() < size:
        return 0
    if free in memo:
        return memo[free]
    low = free & -free
    best = _exact(cliques, size, free & ~low, memo)
    for clique in cliques:
        if clique & low:
            for rest in itertools.combinations(positions(clique & free & ~low), size - 1):
                chosen = low | sum(1 << p for p in rest)
                best = max(best, 1 + _exact(cliques, size, free & ~chosen, memo))
    memo[free] = best
    return best


def ideal_sets(tables: MachineTables, size: int) -> IdealSets:
    """Maximal cliques of the best class for ``size`` on the empty machine, whether
    they are disjoint, their union, and a memo for exact packing counts (cached)."""
    if size not in tables.ideal:
        full = (1 << len(tables.indices)) - 1
        t = best_threshold(tables, full, 0, size)
        graph: nx.Graph[int] = nx.Graph()
        graph.add_nodes_from(range(len(tables.indices)))
        for a in range(len(tables.indices)):
            graph.add_edges_from((a, b) for b in positions(tables.adjacency[t][a]) if b > a)
        cliques = [sum(1 << p for p in c) for c in nx.find_cliques(graph) if len(c) >= size]
        disjoint = all(not (x & y) for x, y in itertools.combinations(cliques, 2))
        tables.ideal[size] = (cliques, disjoint, _union(cliques), {})
    return tables.ideal[size]


def _union(masks: list[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out
