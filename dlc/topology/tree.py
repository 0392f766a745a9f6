"""The topology tree of one machine, recovered from its PCIe level matrix.

``nvidia-smi topo -m`` does not print the PCIe tree; it prints, for every device
pair, the level of their common ancestor (``PIX`` < ``PXB`` < ``PHB`` < ``NODE`` <
``SYS``). Those levels form an ultrametric: the devices under one PCIe switch are
exactly a connected group when only pairs at ``PIX`` or closer are linked. So the
tree is recovered by single-linkage clustering at each level threshold:

``root`` (SYS) -> NUMA nodes (NODE) -> host bridges (PHB) -> PCIe switch trees (PXB)
-> single switches (PIX) -> GPU and NIC leaves.

A switch or bridge level that adds nothing (one child group only) is left out, so a
GPU alone under its host bridge hangs directly off its NUMA node; NUMA nodes are
always kept. Their labels are unique: groups split by a printed ``SYS`` although their
GPUs report one NUMA node are "NUMA node 0, group a/b", and NICs ``SYS`` away from
every GPU share one "other NUMA node(s)" group (NIC-NIC levels are never printed).

``topo -m`` prints ``NV#`` instead of the PCIe level of NVLinked pairs; those levels
are inferred: first from the tightest bound the other devices (GPUs and NICs) give
(``level(a, b) <= max(level(a, c), level(c, b))``), then from CPU/NUMA affinity
(same affinity: at most ``NODE``; different: ``SYS``). Tree nodes whose grouping
rests on an inferred level carry ``inferred=True``.

NVLink is not a tree level (DGX-1's cube-mesh joins GPUs in different sockets); it is
kept as an overlay graph over GPU indices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from dlc.errors import TopologyQueryError
from dlc.topology.bandwidth import estimate_gbps
from dlc.topology.levels import level_matrix
from dlc.topology.model import PairLink, PcieLevel, Topology, format_cpu_list

#: levels below the root at which the tree groups devices, outermost first
_GROUP_LEVELS = (PcieLevel.NODE, PcieLevel.PHB, PcieLevel.PXB, PcieLevel.PIX)
_KIND_BY_LEVEL = {
    PcieLevel.NODE: "numa",
    PcieLevel.PHB: "host_bridge",
    PcieLevel.PXB: "switch",
    PcieLevel.PIX: "switch",
}


def link_rank(link: PairLink) -> int:
    """How fast a pair is as a class: higher is faster.

    NVLinked pairs rank above every PCIe pair, more links higher (``100 + n``).
    P2P-capable PCIe pairs rank ``PIX`` 9, ``PXB`` 8, ``PHB`` 7, ``NODE`` 6, ``SYS`` 5.
    Pairs without real P2P support copy through host memory and rank below any
    P2P pair (4 down to 0 by PCIe level; 0 when the level is unknown).
    """
    if link.nvlinks > 0:
        return 100 + link.nvlinks
    level = link.pcie_level
    if link.p2p_capable and level is not None:
        return 10 - int(level)
    return 0 if level is None else 5 - int(level)


@dataclass
class TopologyTree:
    """A machine's PCIe tree with the NVLink overlay.

    Attributes:
        topology: the machine it was built from.
        graph: directed tree ``root -> numa -> host_bridge -> switch -> gpu|nic``.
            Node ids: ``"root"``, ``"numa0"``, ``"bridge0.0"``, ``"switch0.0.0"``
            (PXB level), ``"switch0.0.0.0"`` (PIX level), ``"gpu3"``, ``"nic:mlx5_0"``;
            the numbers give the group's position at each level (NUMA node, host
            bridge, upstream switch, switch), counting groups left out as one-child.
            Attributes: ``kind`` (root, numa, host_bridge, switch, gpu, nic),
            ``label``, ``level`` (the :class:`PcieLevel` a pair meeting at this node
            has; ``None`` for leaves), ``inferred``, ``gpu`` (index, gpu leaves) and
            ``nic`` (name, nic leaves).
        nvlink: undirected graph over all GPU indices; an edge per NVLinked pair
            with ``nvlinks`` and ``gbps`` (estimated or measured, one direction).
        pcie_levels: the recovered PCIe level of every GPU pair ``(a, b)``, a < b.
        inferred_pairs: GPU pairs whose level was not printed and was inferred.
    """

    topology: Topology
    graph: nx.DiGraph
    nvlink: nx.Graph
    pcie_levels: dict[tuple[int, int], PcieLevel]
    inferred_pairs: frozenset[tuple[int, int]]
    _parent: dict[str, str] = field(default_factory=dict, repr=False)
    _gpus_under: dict[str, frozenset[int]] = field(default_factory=dict, repr=False)

    @staticmethod
    def gpu_node(index: int) -> str:
        """The node id of GPU ``index`` (``"gpu3"``)."""
        return f"gpu{index}"

    def parent(self, node: str) -> str | None:
        """The parent of ``node`` (``None`` for the root)."""
        self._check_node(node)
        return self._parent.get(node)

    def path_to_root(self, node: str) -> list[str]:
        """``node`` and its ancestors, nearest first, ending at ``"root"``."""
        self._check_node(node)
        path = [node]
        while path[-1] in self._parent:
            path.append(self._parent[path[-1]])
        return path

    def gpus_under(self, node: str) -> frozenset[int]:
        """Indices of the GPU leaves in the subtree of ``node``."""
        self._check_node(node)
        return self._gpus_under[node]

    def lowest_common_ancestor(self, gpus: Iterable[int]) -> str:
        """The deepest node above every GPU of ``gpus`` (the leaf itself for one GPU).

        Raises:
            TopologyQueryError: ``gpus`` is empty or names a GPU the machine lacks.
        """
        indices = sorted(set(gpus))
        if not indices:
            raise TopologyQueryError("gpus: give at least one GPU index")
        paths = [self.path_to_root(self._leaf(i))[::-1] for i in indices]
        common = "root"
        for nodes in zip(*paths, strict=False):
            if any(n != nodes[0] for n in nodes):
                break
            common = nodes[0]
        return common

    def level_of(self, a: int, b: int) -> PcieLevel:
        """The recovered PCIe level of GPUs ``a`` and ``b`` (their LCA's level)."""
        return self.graph.nodes[self.lowest_common_ancestor((a, b))]["level"]

    def _leaf(self, index: int) -> str:
        node = self.gpu_node(index)
        if node not in self.graph:
            known = ", ".join(str(i) for i in self.topology.gpu_indices)
            raise TopologyQueryError(f"gpus: no GPU{index} on this machine (GPUs: {known})")
        return node

    def _check_node(self, node: str) -> None:
        if node not in self.graph:
            raise TopologyQueryError(f"node: no tree node {node!r}; use an id such as 'numa0'")


def build_tree(topo: Topology) -> TopologyTree:
    """Recover the PCIe tree of ``topo`` and attach its NVLink overlay.

    Args:
        topo: the machine (from ``topo -m`` text, NVML, or an encoding).

    Returns:
        The tree; see :class:`TopologyTree`.
    """
    devices = [TopologyTree.gpu_node(i) for i in topo.gpu_indices]
    devices += [f"nic:{nic.name}" for nic in topo.nics]
    matrix, known = level_matrix(topo, devices)

    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_node("root", kind="root", label="machine", level=PcieLevel.SYS, inferred=False)
    numa_groups = _sorted_groups(_clusters(range(len(devices)), matrix, PcieLevel.NODE), devices)
    gpu_groups = [g for g in numa_groups if min(g) < len(topo.gpus)]
    keys = numa_keys(topo)
    if keys is None:
        labels = _numa_labels(topo, [[devices[i] for i in g] for g in gpu_groups])
        for n, (members, label) in enumerate(zip(gpu_groups, labels, strict=True)):
            node = f"numa{n}"
            graph.add_node(node, kind="numa", label=label, level=PcieLevel.NODE, inferred=False)
            graph.add_edge("root", node)
            _add_groups(graph, node, str(n), members, 1, matrix, devices)
    else:
        _add_numa_by_affinity(graph, topo, keys, gpu_groups, matrix, devices)
    _add_nic_only_groups(graph, numa_groups[len(gpu_groups) :], matrix, devices)
    for device in devices:
        _add_leaf(graph, topo, device)

    tree = TopologyTree(
        topology=topo,
        graph=graph,
        nvlink=_nvlink_overlay(topo),
        pcie_levels={},
        inferred_pairs=frozenset(),
    )
    tree._parent = {child: parent for parent, child in graph.edges}
    tree._gpus_under = _gpus_under(graph)
    gpu_count = len(topo.gpus)
    tree.pcie_levels = {
        (topo.gpus[i].index, topo.gpus[j].index): PcieLevel(matrix[i][j])
        for i in range(gpu_count)
        for j in range(i + 1, gpu_count)
    }
    # NIC-NIC levels are never in the model, so only pairs with a GPU count as inferred.
    inferred = [(i, j) for i in range(len(devices)) for j in range(i) if not known[i][j]]
    inferred = [(i, j) for i, j in inferred if j < gpu_count]
    tree.inferred_pairs = frozenset(
        (topo.gpus[j].index, topo.gpus[i].index) for i, j in inferred if i < gpu_count
    )
    for i, j in inferred:
        graph.nodes[_lca_of_nodes(tree, devices[i], devices[j])]["inferred"] = True
    return tree


def numa_keys(topo: Topology) -> list[object] | None:
    """Each GPU's NUMA node as its affinity columns give it, or ``None`` when they do not.

    The NUMA Affinity column when every GPU has one, else the CPU list when every GPU has
    one (GPUs with the same CPUs share a NUMA node), else ``None``: the ``topo -m`` matrix
    then decides. The tree, the report's NUMA count and the picture all follow this.
    """
    if topo.gpus and all(g.numa_node is not None for g in topo.gpus):
        return [g.numa_node for g in topo.gpus]
    cpu_sets = [g.cpus() for g in topo.gpus]
    if cpu_sets and all(cpu_sets):
        return list(cpu_sets)
    return None


def _add_numa_by_affinity(
    graph: nx.DiGraph,
    topo: Topology,
    keys: list[object],
    gpu_groups: list[list[int]],
    matrix: list[list[int]],
    devices: list[str],
) -> None:
    """One ``numa`` node per affinity key, holding the matrix's groups of its GPUs.

    A matrix group whose GPUs name two NUMA nodes is split (a NIC goes with its nearest
    GPU); groups that ``topo -m`` prints ``SYS`` apart but that name the same NUMA node
    share it, and that node's level is ``SYS`` (what the matrix says between them).
    """
    parts: dict[object, list[list[int]]] = {}
    for group in gpu_groups:
        gpus = [m for m in group if m < len(keys)]
        split: dict[object, list[int]] = {}
        for m in group:
            nearest = m if m < len(keys) else min(gpus, key=lambda g: (matrix[m][g], g))
            split.setdefault(keys[nearest], []).append(m)
        for key, members in split.items():
            parts.setdefault(key, []).append(sorted(members))
    order = sorted(parts, key=lambda k: min(min(g) for g in parts[k]))
    for n, key in enumerate(order):
        groups = sorted(parts[key], key=min)
        node = f"numa{n}"
        label = _affinity_label(topo, key, n)
        level = PcieLevel.NODE if len(groups) == 1 else PcieLevel.SYS
        graph.add_node(node, kind="numa", label=label, level=level, inferred=False)
        graph.add_edge("root", node)
        if len(groups) == 1:
            _add_groups(graph, node, str(n), groups[0], 1, matrix, devices)
            continue
        for k, group in enumerate(groups):
            path = f"{n}{chr(ord('a') + k % 26)}"
            parent = node
            if len(group) > 1:  # the matrix's own NUMA-level group keeps its node
                parent = f"group{path}"
                name = f"{label.split(' (')[0]}, group {path[-1]}"
                graph.add_node(parent, kind="host_bridge", label=name, level=PcieLevel.NODE,
                               inferred=False)  # fmt: skip
                graph.add_edge(node, parent)
            _add_groups(graph, parent, path, group, 1, matrix, devices)


def _affinity_label(topo: Topology, key: object, position: int) -> str:
    """``NUMA node 1 (CPUs 24-47)``: the printed node number, else the position."""
    gpus = [g for g, k in zip(topo.gpus, numa_keys(topo) or [], strict=False) if k == key]
    number = key if isinstance(key, int) else position
    cpu_sets = {g.cpus() for g in gpus if g.cpus()}
    cpus = f" (CPUs {format_cpu_list(cpu_sets.pop())})" if len(cpu_sets) == 1 else ""
    return f"NUMA node {number}{cpus}"


def _clusters(members: Iterable[int], matrix: list[list[int]], level: PcieLevel) -> list[list[int]]:
    """Single-linkage groups of ``members``: connected where the level is <= ``level``."""
    remaining = list(members)
    groups: list[list[int]] = []
    while remaining:
        group, frontier = [remaining.pop(0)], 0
        while frontier < len(group):
            here = group[frontier]
            near = [m for m in remaining if matrix[here][m] <= level]
            remaining = [m for m in remaining if matrix[here][m] > level]
            group.extend(near)
            frontier += 1
        groups.append(sorted(group))
    return groups


def _sorted_groups(groups: list[list[int]], devices: list[str]) -> list[list[int]]:
    # GPUs come first in ``devices``, so the smallest position orders groups by GPU index
    # and NIC-only groups last.
    del devices
    return sorted(groups, key=min)


def _add_groups(
    graph: nx.DiGraph,
    parent: str,
    path: str,
    members: list[int],
    depth: int,
    matrix: list[list[int]],
    devices: list[str],
) -> None:
    """Add the groups of ``members`` below ``parent`` from level ``_GROUP_LEVELS[depth]`` on."""
    if depth == len(_GROUP_LEVELS):
        for m in members:
            graph.add_edge(parent, devices[m])
        return
    level = _GROUP_LEVELS[depth]
    groups = _sorted_groups(_clusters(members, matrix, level), devices)
    for k, group in enumerate(groups):
        sub_path = f"{path}.{k}"
        if _adds_a_level(group, depth, matrix):
            node = _group_node(graph, parent, sub_path, level)
            _add_groups(graph, node, sub_path, group, depth + 1, matrix, devices)
        else:
            _add_groups(graph, parent, sub_path, group, depth + 1, matrix, devices)


def _adds_a_level(group: list[int], depth: int, matrix: list[list[int]]) -> bool:
    """Whether a group is worth a node: it splits further at the next level down."""
    if len(group) < 2:
        return False
    if depth + 1 == len(_GROUP_LEVELS):
        return True
    return len(_clusters(group, matrix, _GROUP_LEVELS[depth + 1])) > 1


def _group_node(graph: nx.DiGraph, parent: str, path: str, level: PcieLevel) -> str:
    kind = _KIND_BY_LEVEL[level]
    if kind == "host_bridge":
        node, label = f"bridge{path}", f"host bridge {path}"
    else:
        node, label = f"switch{path}", f"PCIe switch {path} ({level.name})"
    graph.add_node(node, kind=kind, label=label, level=level, inferred=False)
    graph.add_edge(parent, node)
    return node


def _add_leaf(graph: nx.DiGraph, topo: Topology, device: str) -> None:
    if device.startswith("nic:"):
        name = device.removeprefix("nic:")
        graph.add_node(device, kind="nic", label=f"NIC {name}", level=None, nic=name)
        graph.nodes[device]["inferred"] = False
        return
    gpu = topo.gpu(int(device.removeprefix("gpu")))
    label = f"{gpu.name} {gpu.model}" if gpu.model else gpu.name
    graph.add_node(device, kind="gpu", label=label, level=None, gpu=gpu.index, inferred=False)


def _add_nic_only_groups(
    graph: nx.DiGraph, groups: list[list[int]], matrix: list[list[int]], devices: list[str]
) -> None:
    """One ``numa`` node for the devices ``SYS`` away from every GPU (NICs only).

    ``topo -m`` prints no NIC-NIC levels, so such NICs cannot be told apart by NUMA
    node: they share one node labelled "other NUMA node(s)" instead of each faking a
    NUMA node of its own (the truncated DGX-2 has six of them).
    """
    if not groups:
        return
    n = sum(1 for node in graph.successors("root"))
    node = f"numa{n}"
    if len(groups) == 1:
        graph.add_node(
            node, kind="numa", label="other NUMA node", level=PcieLevel.NODE, inferred=False
        )
        graph.add_edge("root", node)
        _add_groups(graph, node, str(n), groups[0], 1, matrix, devices)
        return
    # Whether these NICs share a node is unknown: only SYS bounds a pair meeting here.
    label = "other NUMA node(s)"
    graph.add_node(node, kind="numa", label=label, level=PcieLevel.SYS, inferred=False)
    graph.add_edge("root", node)
    for k, group in enumerate(groups):
        _add_groups(graph, node, f"{n}{chr(ord('a') + k % 26)}", group, 1, matrix, devices)


def _numa_labels(topo: Topology, groups: list[list[str]]) -> list[str]:
    """Labels of the GPU-holding top-level groups, each unique.

    A group is named after its GPUs' NUMA node (else its position). ``topo -m`` can
    print ``SYS`` between GPUs that report the same NUMA node (PCIe boxes with NVLink
    bridge pairs); those groups become "NUMA node 0, group a", "NUMA node 0, group b".
    """
    names = [_numa_name(topo, members, position) for position, members in enumerate(groups)]
    seen: dict[str, int] = {}
    labels = []
    for name, cpus in names:
        total = sum(1 for other, _ in names if other == name)
        if total > 1:
            letter = chr(ord("a") + seen.setdefault(name, 0) % 26)
            seen[name] += 1
            name = f"{name}, group {letter}"
        labels.append(f"{name} (CPUs {cpus})" if cpus else name)
    return labels


def _numa_name(topo: Topology, members: list[str], position: int) -> tuple[str, str | None]:
    """``("NUMA node N", cpu affinity or None)`` for one top-level group."""
    gpus = [topo.gpu(int(m.removeprefix("gpu"))) for m in members if m.startswith("gpu")]
    numa_ids = {g.numa_node for g in gpus}
    affinities = {g.cpus() for g in gpus if g.cpus()}
    number = numa_ids.pop() if len(numa_ids) == 1 and None not in numa_ids else position
    return f"NUMA node {number}", format_cpu_list(affinities.pop()) if len(
        affinities
    ) == 1 else None


def _gpus_under(graph: nx.DiGraph) -> dict[str, frozenset[int]]:
    under: dict[str, frozenset[int]] = {}
    for node in reversed(list(nx.topological_sort(graph))):
        own = {graph.nodes[node]["gpu"]} if graph.nodes[node]["kind"] == "gpu" else set()
        for child in graph.successors(node):
            own |= under[child]
        under[node] = frozenset(own)
    return under


def _lca_of_nodes(tree: TopologyTree, a: str, b: str) -> str:
    above_a = set(tree.path_to_root(a))
    for node in tree.path_to_root(b):
        if node in above_a:
            return node
    return "root"


def _nvlink_overlay(topo: Topology) -> nx.Graph:
    overlay: nx.Graph[int] = nx.Graph()
    overlay.add_nodes_from(topo.gpu_indices)
    for (a, b), link in topo.links.items():
        if link.nvlinks > 0:
            model = topo.gpu(a).model
            overlay.add_edge(a, b, nvlinks=link.nvlinks, gbps=estimate_gbps(link, model))
    return overlay


def p2p_groups(topo: Topology) -> list[frozenset[int]]:
    """Maximal GPU sets whose every pair is P2P-capable, largest first.

    A GPU with no P2P partner is its own group.
    """
    graph: nx.Graph[int] = nx.Graph()
    graph.add_nodes_from(topo.gpu_indices)
    graph.add_edges_from(pair for pair, link in topo.links.items() if link.p2p_capable)
    groups = [frozenset(c) for c in nx.find_cliques(graph)]
    return sorted(groups, key=lambda g: (-len(g), sorted(g)))


def nvlink_groups(topo: Topology) -> list[frozenset[int]]:
    """Connected NVLink islands of more than one GPU, largest first."""
    overlay = _nvlink_overlay(topo)
    groups = [frozenset(c) for c in nx.connected_components(overlay) if len(c) > 1]
    return sorted(groups, key=lambda g: (-len(g), sorted(g)))


def links_within(topo: Topology, gpus: Iterable[int]) -> list[PairLink]:
    """The links between every pair of ``gpus``, ``(a, b)`` ascending.

    Raises:
        TopologyQueryError: a GPU index the machine lacks.
    """
    chosen = set(gpus)
    missing = sorted(chosen - set(topo.gpu_indices))
    if missing:
        raise TopologyQueryError(f"gpus: no GPU {missing} on this machine")
    return list(topo.pairs(chosen))


def slowest_link(topo: Topology, gpus: Iterable[int]) -> PairLink | None:
    """The slowest pair of ``gpus`` by :func:`link_rank` (``None`` for fewer than 2 GPUs).

    Collective operations run at the speed of this link.
    """
    links = links_within(topo, gpus)
    if not links:
        return None
    return min(links, key=lambda link: (link_rank(link), link.a, link.b))
