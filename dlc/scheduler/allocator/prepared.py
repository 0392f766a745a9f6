"""Per-machine tables, built once and cached: what every policy asks for first.

:func:`tables_for` builds a topology's :class:`~dlc.scheduler.allocator.tables.MachineTables`
and warms the best-class clique tables of every request size
(:func:`~dlc.scheduler.allocator.cliques.ideal_sets`), so that a decision only reads them.
It lives apart from ``tables.py`` because the clique tables build on those tables: keeping
the cache here leaves ``tables <- cliques <- prepared`` without an import cycle.
"""

from __future__ import annotations

from dlc.scheduler.allocator.cliques import ideal_sets
from dlc.scheduler.allocator.tables import MachineTables, build_tables
from dlc.topology.model import Topology

#: how many machines' tables are kept (a cluster has few distinct layouts)
_CACHE_SIZE = 128

_cache: dict[int, tuple[Topology, MachineTables]] = {}


def tables_for(topo: Topology) -> MachineTables:
    """The tables of ``topo``, built on first use and cached by object identity."""
    hit = _cache.get(id(topo))
    if hit is not None and hit[0] is topo:
        return hit[1]
    tables = build_tables(topo)
    # The best-class cliques of every request size are part of the one-time build,
    # not of a decision.
    for size in range(2, len(tables.indices) + 1):
        ideal_sets(tables, size)
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[id(topo)] = (topo, tables)
    return tables
