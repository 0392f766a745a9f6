"""Per-machine lookup tables shared by the allocation policies.

Everything a policy asks about a pair or a group of GPUs is computed once per
topology and kept as lists and bitmasks indexed by GPU *position* (the order of
``Topology.gpus``), so a decision is integer arithmetic only. Tables are cached by
the identity of the :class:`~dlc.topology.model.Topology` object: the scheduler keeps
one object per agent, so a machine's tables are built once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx

from dlc.topology.bandwidth import estimate_gbps
from dlc.topology.model import Gpu, PairLink, PcieLevel, Topology
from dlc.topology.tree import TopologyTree, build_tree, link_rank

#: go-gpuallocator's points for the PCIe level of a pair (NVML common ancestor).
GO_LEVEL_POINTS = {
    PcieLevel.SYS: 10,
    PcieLevel.NODE: 20,
    PcieLevel.PHB: 30,
    PcieLevel.PXB: 40,
    PcieLevel.PIX: 50,
}
#: its NVLink points stop at this many links (``TwelveNVLINKLinks`` in the version read)
GO_MAX_NVLINKS = 12


#: see :func:`~dlc.scheduler.allocator.cliques.ideal_sets`: the cliques (GPU masks), whether
#: they are disjoint, their union and a memo of exact packing counts (free mask -> count)
IdealSets = tuple[list[int], bool, int, dict[int, int]]


@dataclass
class MachineTables:
    """Lookup tables of one machine, by GPU position.

    Attributes:
        topology: the machine.
        tree: its topology tree.
        indices: GPU index at each position.
        pos: position of each GPU index.
        rank: ``rank[i][j]`` = :func:`~dlc.topology.tree.link_rank` of the pair.
        milli_gbps: estimated pair bandwidth in MB/s (integers: exact sums and ties).
        level: recovered PCIe level of the pair (inferred where ``topo -m`` hid it).
        go_score: go-gpuallocator's pair score.
        numa: NUMA group of each GPU (affinity when known, else the tree's NUMA node).
        numa_masks: one bitmask per NUMA group.
        thresholds: the distinct pair ranks, best first.
        adjacency: for each threshold, per position the mask of partners at least
            that good.
        leftover_groups: groups whose intactness counts for future requests, one tuple
            of masks per component, most important first (see ``leftover_value``).
        twin_below: per position, the mask of lower positions that are exact twins
            (interchangeable in every table), used to skip symmetric choices.
    """

    topology: Topology
    tree: TopologyTree
    indices: tuple[int, ...]
    pos: dict[int, int]
    rank: list[list[int]]
    milli_gbps: list[list[int]]
    level: list[list[int]]
    go_score: list[list[int]]
    numa: list[int]
    numa_masks: tuple[int, ...]
    thresholds: tuple[int, ...]
    adjacency: dict[int, list[int]]
    leftover_groups: tuple[tuple[int, ...], ...]
    twin_below: list[int]
    #: (PCIe level, GPU mask) of every tree switch, bridge and NUMA node, plus the
    #: NUMA groups from affinity and the whole machine (level 5), closest first
    subtrees: tuple[tuple[int, int], ...] = ()
    #: per request size: the best-class cliques of the empty machine (see cliques.py)
    ideal: dict[int, IdealSets] = field(default_factory=dict)
    #: memoised leftover figures by free mask (bounded by 2**GPUs per key kind): a mask
    #: (leftover) or ``(sizes, mask)`` (future packing) -> figures
    memo: dict[int | tuple[tuple[int, ...], int], tuple[int, ...]] = field(default_factory=dict)

    def mask_of(self, gpus: frozenset[int] | set[int]) -> int:
        """Bitmask of GPU indices."""
        mask = 0
        for gpu in gpus:
            mask |= 1 << self.pos[gpu]
        return mask

    def gpus_of(self, mask: int) -> tuple[int, ...]:
        """GPU indices of a bitmask, ascending by position."""
        return tuple(self.indices[p] for p in positions(mask))

    def leftover_value(self, mask: int) -> tuple[int, ...]:
        """How well the free GPUs in ``mask`` can serve future multi-GPU requests.

        One number per group component: the pairs still free inside each group,
        summed. A pair count grows with the square of a group's free size, so
        leaving groups whole (best-fit) scores higher than spreading the same free
        GPUs over many groups.
        """
        hit = self.memo.get(mask)
        if hit is None:
            hit = self.memo[mask] = tuple(
                sum(_PAIRS[(g & mask).bit_count()] for g in groups)
                for groups in self.leftover_groups
            )
        return hit

    def set_rank(self, mask: int) -> int:
        """The slowest pair's rank in a set (a large value for fewer than 2 GPUs)."""
        members = positions(mask)
        return min((self.rank[a][b] for a, b in itertools.combinations(members, 2)), default=999)

    def set_milli_gbps(self, mask: int) -> int:
        """Summed pair bandwidth of a set (MB/s)."""
        members = positions(mask)
        return sum(self.milli_gbps[a][b] for a, b in itertools.combinations(members, 2))


_PAIRS = [n * (n - 1) // 2 for n in range(257)]


def positions(mask: int) -> list[int]:
    """Set bit positions of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def build_tables(topo: Topology) -> MachineTables:
    """The raw tables of ``topo`` (no cache; :func:`~dlc.scheduler.allocator.prepared.tables_for`
    caches them and warms the clique tables)."""
    return _build(topo)


def _build(topo: Topology) -> MachineTables:
    tree = build_tree(topo)
    indices = topo.gpu_indices
    size = len(indices)
    rank = [[999] * size for _ in range(size)]
    milli = [[0] * size for _ in range(size)]
    level = [[0] * size for _ in range(size)]
    go = [[0] * size for _ in range(size)]
    for a, b in itertools.combinations(range(size), 2):
        link = topo.link(indices[a], indices[b])
        pcie = tree.pcie_levels[(indices[a], indices[b])]
        values = (
            link_rank(link),
            round(1000 * estimate_gbps(link, topo.gpus[a].model)),
            int(pcie),
            _go_pair_score(link, pcie),
        )
        for table, value in zip((rank, milli, level, go), values, strict=True):
            table[a][b] = table[b][a] = value
    numa = _numa_groups(topo, tree)
    numa_masks = tuple(sum(1 << p for p in range(size) if numa[p] == n) for n in sorted(set(numa)))
    thresholds = tuple(sorted({rank[a][b] for a, b in itertools.combinations(range(size), 2)}))[
        ::-1
    ]
    adjacency = {
        t: [sum(1 << j for j in range(size) if j != i and rank[i][j] >= t) for i in range(size)]
        for t in thresholds
    }
    tables = MachineTables(
        topology=topo,
        tree=tree,
        indices=indices,
        pos={g: p for p, g in enumerate(indices)},
        rank=rank,
        milli_gbps=milli,
        level=level,
        go_score=go,
        numa=numa,
        numa_masks=numa_masks,
        thresholds=thresholds,
        adjacency=adjacency,
        leftover_groups=(),
        twin_below=[],
    )
    tables.leftover_groups = _leftover_groups(tables)
    tables.twin_below = _twins(tables)
    tables.subtrees = _subtrees(tables)
    return tables


def _subtrees(tables: MachineTables) -> tuple[tuple[int, int], ...]:
    tree = tables.tree
    found = {(int(PcieLevel.SYS), (1 << len(tables.indices)) - 1)}
    for node, data in tree.graph.nodes(data=True):
        if data["kind"] not in ("gpu", "nic") and tree.gpus_under(node):
            found.add((int(data["level"]), tables.mask_of(tree.gpus_under(node))))
    found.update((int(PcieLevel.NODE), m) for m in tables.numa_masks)
    return tuple(sorted(found))


def _go_pair_score(link: PairLink, pcie: PcieLevel) -> int:
    """go-gpuallocator's score: PCIe level points plus 100 per NVLink (up to 12).

    NVML reports the PCIe level of NVLinked pairs too; ``topo -m`` hides it, so the
    tree's inferred level stands in for what NVML would give.
    """
    nvlink_points = 100 * link.nvlinks if link.nvlinks <= GO_MAX_NVLINKS else 0
    return GO_LEVEL_POINTS[pcie] + nvlink_points


def _numa_groups(topo: Topology, tree: TopologyTree) -> list[int]:
    """NUMA group per position: NUMA affinity, else CPU affinity, else the tree."""
    gpus: tuple[Gpu, ...] = topo.gpus
    if all(g.numa_node is not None for g in gpus):
        return [int(g.numa_node) for g in gpus]  # type: ignore[arg-type]
    cpu_sets = [g.cpus() for g in gpus]
    if all(cpu_sets) and len(set(cpu_sets)) > 1:
        ids = {cpus: n for n, cpus in enumerate(dict.fromkeys(cpu_sets))}
        return [ids[c] for c in cpu_sets]
    numa_nodes = list(tree.graph.successors("root"))
    return [
        next(n for n, node in enumerate(numa_nodes) if g.index in tree.gpus_under(node))
        for g in gpus
    ]


def _leftover_groups(tables: MachineTables) -> tuple[tuple[int, ...], ...]:
    """Groups worth keeping whole, most important first.

    1. For every link class, best first: the maximal cliques of GPUs joined at
       least that well (NVLink islands, PCIe switches seen through the link ranks).
    2. The PCIe tree's switches, host bridges and NUMA nodes, closest level first
       (they matter on all-NVLink machines where every rank is equal).
    3. The NUMA groups from CPU affinity.
    """
    size = len(tables.indices)
    components: list[tuple[int, ...]] = []
    for t in tables.thresholds:
        graph: nx.Graph[int] = nx.Graph()
        graph.add_nodes_from(range(size))
        graph.add_edges_from(
            (a, b) for a, b in itertools.combinations(range(size), 2) if tables.rank[a][b] >= t
        )
        cliques = [c for c in nx.find_cliques(graph) if len(c) > 1 and len(c) < size]
        if cliques:
            components.append(tuple(sum(1 << p for p in c) for c in cliques))
    tree = tables.tree
    for level in (PcieLevel.PIX, PcieLevel.PXB, PcieLevel.PHB, PcieLevel.NODE):
        masks = [
            tables.mask_of(tree.gpus_under(node))
            for node, data in tree.graph.nodes(data=True)
            if data["level"] == level and 1 < len(tree.gpus_under(node)) < size
        ]
        if masks:
            components.append(tuple(masks))
    numa = [m for m in tables.numa_masks if 1 < m.bit_count() < size]
    if numa:
        components.append(tuple(numa))
    return tuple(components)


def _twins(tables: MachineTables) -> list[int]:
    """Per position, lower positions that every table treats identically."""
    size = len(tables.indices)
    gpus = tables.topology.gpus

    def signature(p: int, other: int) -> tuple[object, ...]:
        rows = (tables.rank, tables.milli_gbps, tables.level, tables.go_score)
        cells = tuple(tuple(r[p][q] for q in range(size) if q not in (p, other)) for r in rows)
        return (cells, tables.numa[p], gpus[p].model, gpus[p].memory_mib)

    twin_below = [0] * size
    for a, b in itertools.combinations(range(size), 2):
        if signature(a, b) == signature(b, a):
            twin_below[b] |= 1 << a
    return twin_below
