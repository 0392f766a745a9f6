"""``tree``: DLC's topology-tree allocator.

Collective operations (all-reduce, all-gather) run at the speed of the slowest link
in the GPU set, so a multi-GPU request is decided in this order:

1. **Slowest link**: the set whose worst pair is as fast as any free set allows
   (NVLink, more links first; then P2P over PIX, PXB, PHB, NODE, SYS; then pairs
   without real P2P support, which copy through host memory).
2. **Summed pair bandwidth** among those sets.
3. **Leftover**: among equals, the set that leaves the other free GPUs best able to
   serve future multi-GPU requests: first, for request sizes 8, 4, 2 and the
   current one (largest first), how many disjoint sets of the class an empty
   machine would give still fit in the leftover
   (:func:`~dlc.scheduler.allocator.cliques.future_packing`).
4. **Alignment**: the same count with every other job gone, so a job does not
   straddle two NVLink islands or switches when it fits in one: when the other jobs
   leave, their GPUs coalesce into whole groups again (the buddy-allocator rule).
5. **Best-fit in the tree**: intact NVLink islands, PCIe switches and NUMA nodes
   are worth more than the same number of free GPUs scattered over them
   (:meth:`MachineTables.leftover_value`).
6. **Affinity**: fewer NUMA nodes, then closer PCIe ancestors; then lowest indices.

A single-GPU request takes the GPU whose removal keeps 3 and 5 best (it goes where
it fragments least).

Speed: the best slowest-link class is found by a bitmask clique search per link
class, and only sets within that class are enumerated; GPUs that are
interchangeable in every table (the members of one PCIe switch, one socket of an
NVSwitch box) are tried once. When all candidate GPUs are equally linked (an
NVSwitch box) every set has the same slowest link and bandwidth, and a large set is
grown one GPU at a time where it fragments least instead of enumerating
C(16, 8) = 12870 sets.
"""

from __future__ import annotations

from dlc.scheduler.allocator.base import AllocationRequest, eligible_gpus
from dlc.scheduler.allocator.cliques import best_threshold, candidates, future_packing
from dlc.scheduler.allocator.prepared import tables_for
from dlc.scheduler.allocator.tables import MachineTables, positions
from dlc.topology.model import Topology

#: stop enumerating after this many sets of the best class and keep the best so far
#: (a safety net: on the bench/ machines a decision enumerates at most 56 sets)
MAX_CANDIDATES = 1_500
#: requests larger than this over GPUs that are all equally linked (NVSwitch boxes)
#: grow the set one GPU at a time instead of enumerating every set
GREEDY_FROM = 2
#: future request sizes the leftover is judged for (besides the current one)
FUTURE_SIZES = (8, 4, 2)


class TreePolicy:
    """Best slowest link, then bandwidth, then least fragmentation, then affinity."""

    name = "tree"

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """See :class:`dlc.scheduler.allocator.base.Policy`."""
        eligible = eligible_gpus(topology, free, request)
        tables = tables_for(topology)
        chosen = choose(
            tables, tables.mask_of(eligible), tables.mask_of(request.required), request.count
        )
        return tuple(sorted(tables.gpus_of(chosen)))


def choose(tables: MachineTables, free: int, required: int, count: int) -> int:
    """The bitmask of the chosen set (``required`` and ``free`` are masks)."""
    if required.bit_count() == count:
        return required
    sizes = future_sizes(len(tables.indices), count)
    if count == 1:
        return _single(tables, free, sizes)
    threshold = best_threshold(tables, free, required, count)
    pool = candidates(tables.adjacency[threshold], free, required) or 0
    if count > GREEDY_FROM and _uniform(tables, pool | required):
        return _grow(tables, free, required, count, pool, sizes)
    return _best_set(tables, free, required, count, threshold, sizes)


def _uniform(tables: MachineTables, pool: int) -> bool:
    """Whether every pair of ``pool`` has the same rank and bandwidth."""
    members = positions(pool)
    first = members[0]
    rank, milli = tables.rank[first][members[1]], tables.milli_gbps[first][members[1]]
    return all(
        tables.rank[a][b] == rank and tables.milli_gbps[a][b] == milli
        for i, a in enumerate(members)
        for b in members[i + 1 :]
    )


def _grow(
    tables: MachineTables, free: int, required: int, count: int, pool: int, sizes: tuple[int, ...]
) -> int:
    """Every set of ``pool`` is equally fast, so only the leftover and affinity
    decide: take the closest, then fullest, tree subtree or NUMA node the request
    fits in, and add its GPUs one at a time where they fragment least."""
    need = count - required.bit_count()
    fits = [
        (level, (mask & pool).bit_count(), mask)
        for level, mask in tables.subtrees
        if not required & ~mask and (mask & pool).bit_count() >= need
    ]
    pool &= min(fits)[2]  # the whole machine always fits
    chosen = required
    for _ in range(count - required.bit_count()):
        best_key, best = None, 0
        for p in positions(pool):
            if tables.twin_below[p] & pool:
                continue
            grown = chosen | (1 << p)
            key = (
                leftover_key(tables, sizes, free & ~grown),
                -sum(1 for m in tables.numa_masks if m & grown),
                -sum(tables.level[p][q] for q in positions(chosen)),
            )
            if best_key is None or key > best_key:
                best_key, best = key, 1 << p
        chosen |= best
        pool &= ~best
    return chosen


def future_sizes(gpus: int, count: int) -> tuple[int, ...]:
    """Request sizes the leftover is judged for: 8, 4, 2 and this one, largest first."""
    return tuple(sorted({m for m in (*FUTURE_SIZES, count) if 2 <= m <= gpus}, reverse=True))


def leftover_key(
    tables: MachineTables, sizes: tuple[int, ...], leftover: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """How well free GPUs ``leftover`` serve future requests (larger is better)."""
    return (future_packing(tables, sizes, leftover), tables.leftover_value(leftover))


def _single(tables: MachineTables, free: int, sizes: tuple[int, ...]) -> int:
    best_key, best = None, 0
    for p in positions(free):
        if tables.twin_below[p] & free:
            continue  # a lower twin is free and leaves the same leftover
        bit = 1 << p
        key = leftover_key(tables, sizes, free & ~bit)
        if best_key is None or key > best_key:
            best_key, best = key, bit
    return best


def _best_set(
    tables: MachineTables, free: int, required: int, count: int, t: int, sizes: tuple[int, ...]
) -> int:
    adjacency = tables.adjacency[t]
    milli, level = tables.milli_gbps, tables.level
    full = (1 << len(tables.indices)) - 1
    req = positions(required)
    base_milli = sum(milli[a][b] for i, a in enumerate(req) for b in req[i + 1 :])
    base_level = sum(level[a][b] for i, a in enumerate(req) for b in req[i + 1 :])
    found: list[tuple[int, int, int]] = []  # (summed MB/s, set, summed PCIe level)

    def walk(chosen: int, members: list[int], cand: int, need: int, m_sum: int, l_sum: int) -> None:
        if need == 0:
            found.append((m_sum, chosen, l_sum))
            return
        rest = cand
        while rest.bit_count() >= need and len(found) < MAX_CANDIDATES:
            low = rest & -rest
            rest ^= low
            v = low.bit_length() - 1
            if tables.twin_below[v] & cand & ~low:
                continue  # a lower interchangeable GPU was skipped: same sets, lower ids
            walk(
                chosen | low,
                [*members, v],
                rest & adjacency[v],
                need - 1,
                m_sum + sum(milli[v][c] for c in members),
                l_sum + sum(level[v][c] for c in members),
            )

    cand = candidates(adjacency, free, required) or 0
    walk(required, req, cand, count - required.bit_count(), base_milli, base_level)
    # Bandwidth comes first, so only the sets with the top sum need the costlier keys.
    top = max(f[0] for f in found)
    best_key, best = None, required
    for m_sum, chosen, l_sum in found:
        if m_sum != top:
            continue
        key = (
            future_packing(tables, sizes, free & ~chosen),
            future_packing(tables, sizes, full & ~chosen),  # alignment, see module doc
            tables.leftover_value(free & ~chosen),
            -sum(1 for m in tables.numa_masks if m & chosen),
            -l_sum,
        )
        if best_key is None or key > best_key:
            best_key, best = key, chosen
    return best


POLICY = TreePolicy()
