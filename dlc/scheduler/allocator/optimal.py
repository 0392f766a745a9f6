"""``optimal``: exhaustive search, the quality ceiling of a single decision.

Tries every set of ``count`` free GPUs holding the required ones and keeps the one
with the fastest slowest link, then the highest summed pair bandwidth, then the
lowest indices. It looks at one decision only (no leftover, no affinity) and is
exponential in the free GPUs: a yardstick for the benchmark, not for production.
"""

from __future__ import annotations

import itertools

from dlc.scheduler.allocator.base import AllocationRequest, eligible_gpus
from dlc.scheduler.allocator.prepared import tables_for
from dlc.scheduler.allocator.tables import MachineTables
from dlc.topology.model import Topology


class OptimalPolicy:
    """Best (slowest link, summed bandwidth) over all sets."""

    name = "optimal"

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """See :class:`dlc.scheduler.allocator.base.Policy`."""
        eligible = eligible_gpus(topology, free, request)
        tables = tables_for(topology)
        required = sorted(tables.pos[g] for g in request.required)
        others = sorted(tables.pos[g] for g in eligible - request.required)
        best_key = None
        best: tuple[int, ...] = ()
        for extra in itertools.combinations(others, request.count - len(required)):
            chosen = tuple(sorted((*required, *extra)))
            key = set_quality(tables, chosen)
            if best_key is None or key > best_key:
                best_key, best = key, chosen
        return tuple(sorted(tables.indices[p] for p in best))


def set_quality(tables: MachineTables, chosen: tuple[int, ...] | list[int]) -> tuple[int, int]:
    """``(slowest link rank, summed MB/s)`` of a set of GPU positions."""
    pairs = list(itertools.combinations(chosen, 2))
    slowest = min((tables.rank[a][b] for a, b in pairs), default=999)
    return slowest, sum(tables.milli_gbps[a][b] for a, b in pairs)


POLICY = OptimalPolicy()
