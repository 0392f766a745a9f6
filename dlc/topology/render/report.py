"""The human-readable topology report behind ``dlc topology``.

:func:`analyze` derives everything a reader (or the JSON document, or the
picture) needs from a :class:`~dlc.topology.model.Topology`: the PCIe tree, the
P2P and NVLink groups, each NIC's nearest GPUs and a one-line summary.
:func:`render_report` prints it with rich: the tree, the colour-coded link
matrix, the bandwidth matrix, the groups and the NICs.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import networkx as nx
from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from dlc.topology.bandwidth import estimate_gbps
from dlc.topology.discovery.discover import describe_source
from dlc.topology.model import AMD, PairLink, PcieLevel, Topology, format_cpu_list
from dlc.topology.tree import TopologyTree, build_tree, nvlink_groups, p2p_groups

#: order of node kinds among siblings (devices after the bridges above them)
_KIND_ORDER = {"root": 0, "numa": 1, "host_bridge": 2, "switch": 3, "gpu": 4, "nic": 5}

#: rich style of each PCIe level in the matrix: the farther, the hotter
LEVEL_STYLES: dict[PcieLevel, str] = {
    PcieLevel.PIX: "cyan",
    PcieLevel.PXB: "blue",
    PcieLevel.PHB: "yellow",
    PcieLevel.NODE: "dark_orange",
    PcieLevel.SYS: "red",
}
#: NVLink cells, fewest links first (dim green to bold bright green)
NVLINK_STYLES = ("green4", "green3", "bold green1")


@dataclass(frozen=True)
class TopologyFacts:
    """What the report, the JSON document and the picture show about one machine.

    Attributes:
        topo: the machine.
        tree: its PCIe tree (``dlc.topology.tree``).
        p2p_groups: maximal sets of >1 GPU whose every pair is P2P-capable, largest first.
        nvlink_groups: NVLink-connected sets of >1 GPU, largest first.
        nic_nearest: NIC name -> (GPUs at the closest PCIe level, that level).
        numa_nodes: number of NUMA nodes that hold GPUs.
        summary: the one-line description.
    """

    topo: Topology
    tree: TopologyTree
    p2p_groups: tuple[frozenset[int], ...]
    nvlink_groups: tuple[frozenset[int], ...]
    nic_nearest: dict[str, tuple[frozenset[int], PcieLevel | None]] = field(default_factory=dict)
    numa_nodes: int = 1
    summary: str = ""

    def children(self, node: str) -> list[str]:
        """Children of a tree node in reading order (by lowest GPU index, then kind)."""
        graph = self.tree.graph

        def key(child: str) -> tuple[int, int, str]:
            gpus = self.tree.gpus_under(child)
            kind = _KIND_ORDER.get(graph.nodes[child].get("kind", ""), 9)
            return (min(gpus) if gpus else 10**6, kind, child)

        return sorted(graph.successors(node), key=key)


def analyze(topo: Topology) -> TopologyFacts:
    """Derive the tree, groups, NIC neighbours and summary of ``topo``."""
    tree = build_tree(topo)
    facts = TopologyFacts(
        topo=topo,
        tree=tree,
        p2p_groups=tuple(g for g in p2p_groups(topo) if len(g) > 1),
        nvlink_groups=tuple(sorted(nvlink_groups(topo), key=lambda g: (-len(g), min(g)))),
        nic_nearest={nic.name: _nearest_gpus(topo, nic.name) for nic in topo.nics},
        numa_nodes=_count_numa_nodes(topo, tree),
    )
    return _with_summary(facts)


def _count_numa_nodes(topo: Topology, tree: TopologyTree) -> int:
    """NUMA nodes holding GPUs: the tree's ``numa`` nodes, so summary, tree and picture agree.

    The tree follows the affinity columns where they are complete
    (:func:`~dlc.topology.tree.numa_keys`), else the ``topo -m`` matrix.
    """
    del topo
    numa = [n for n, kind in tree.graph.nodes(data="kind") if kind == "numa"]
    return max(1, sum(1 for n in numa if tree.gpus_under(n)))


def _with_summary(facts: TopologyFacts) -> TopologyFacts:
    return replace(facts, summary=summary_line(facts))


def _nearest_gpus(topo: Topology, nic: str) -> tuple[frozenset[int], PcieLevel | None]:
    levels = {gpu: lvl for (name, gpu), lvl in topo.nic_levels.items() if name == nic}
    if not levels:
        return frozenset(), None
    best = min(levels.values())
    return frozenset(g for g, lvl in levels.items() if lvl == best), best


# ----------------------------------------------------------------- the summary


def fmt_set(gpus: Iterable[int]) -> str:
    """``{0,1,2,3}``: a GPU set as the report writes it."""
    return "{" + ",".join(str(g) for g in sorted(gpus)) + "}"


def summary_line(facts: TopologyFacts) -> str:
    """One factual line: GPUs (and model), NUMA nodes, NICs, NVLink shape, P2P."""
    topo = facts.topo
    n = len(topo.gpus)
    models = {g.model for g in topo.gpus}
    head = f"{n} GPU{'s' if n != 1 else ''}"
    if len(models) == 1 and None not in models:
        head += f" ({models.pop()})"
    if topo.truncated:  # say so first: every count below is a lower bound
        head = f"truncated table, complete rows only: {head}"
    parts = [f"{head} on {facts.numa_nodes} NUMA node{'s' if facts.numa_nodes != 1 else ''}"]
    if topo.nics:
        parts.append(f"{len(topo.nics)} NIC{'s' if len(topo.nics) != 1 else ''}")
    if n > 1:
        parts.append(describe_nvlink(topo, facts.nvlink_groups))
        parts.append(describe_p2p(topo, facts.p2p_groups))
    return ", ".join(parts)


def nvlink_graph(topo: Topology) -> nx.Graph:
    """GPU indices joined where the pair has NVLinks (edge attribute ``nvlinks``)."""
    graph: nx.Graph[int] = nx.Graph()
    graph.add_nodes_from(topo.gpu_indices)
    for link in topo.pairs():
        if link.nvlinks:
            graph.add_edge(link.a, link.b, nvlinks=link.nvlinks)
    return graph


def is_complete(topo: Topology, gpus: frozenset[int]) -> bool:
    """Whether every pair of ``gpus`` is NVLinked."""
    return all(link.nvlinks for link in topo.pairs(gpus))


def _counts(topo: Topology, gpus: frozenset[int]) -> str:
    counts = sorted({link.nvlinks for link in topo.pairs(gpus) if link.nvlinks})
    return "/".join(f"{topo.fabric}{c}" for c in counts)


def fabric_words(topo: Topology, text: str) -> str:
    """``text`` in the machine's own fabric words: XGMI (Infinity Fabric) on AMD GPUs.

    The report and picture are written in NVLink words; an AMD machine's direct XGMI
    links fill the same role (the model counts them in ``nvlinks``), so only the words
    change. An all-to-all XGMI hive has no switch, hence no "NVSwitch" there.
    """
    if topo.vendor != AMD:
        return text
    text = text.replace(" (NVSwitch fabric)", "").replace("NVSwitch fabric", "XGMI all-to-all")
    text = text.replace("NVLink NV#", "XGMI#").replace("NV#", "XGMI#")
    text = text.replace("NVLink XGMI", "XGMI")  # "NVLink NV2" was written "NVLink XGMI2"
    return text.replace("NVLinked", "XGMI-linked").replace("NVLink", "XGMI")


def describe_nvlink(topo: Topology, groups: tuple[frozenset[int], ...]) -> str:
    """The NVLink (or XGMI) shape in words: none, all-to-all, pairs, cube-mesh, or groups."""
    return _dual_die(topo) or fabric_words(topo, _describe_nvlink(topo, groups))


def _dual_die(topo: Topology) -> str | None:
    """MI250X-style packages: the most-linked XGMI pairs pair off every GPU (two dies each)."""
    links = [link for link in topo.pairs() if link.nvlinks]
    if topo.vendor != AMD or len(topo.gpus) < 4 or not links:
        return None
    most = max(link.nvlinks for link in links)
    pairs = [(link.a, link.b) for link in links if link.nvlinks == most]
    dies = [g for pair in pairs for g in pair]
    if len(dies) != len(topo.gpus) or len(set(dies)) != len(dies):
        return None
    between = sorted({link.nvlinks for link in links if link.nvlinks != most}, reverse=True)
    listed = " ".join(fmt_set(p) for p in pairs)
    names = "/".join(f"XGMI{c}" for c in between) or "none"
    total = len(topo.gpus) * (len(topo.gpus) - 1) // 2
    return (
        f"XGMI: {len(pairs)} dual-die packages {listed} (XGMI{most} inside, {names} between; "
        f"{len(links)} of {total} pairs linked)"
    )


def _describe_nvlink(topo: Topology, groups: tuple[frozenset[int], ...]) -> str:
    if not groups:
        return "no NVLink"
    n = len(topo.gpus)
    if n == 2:
        return f"NVLink {_counts(topo, groups[0])} between the two GPUs"
    if len(groups) == 1 and len(groups[0]) == n and is_complete(topo, groups[0]):
        fabric = " (NVSwitch fabric)" if n > 4 else ""
        return f"NVLink all-to-all{fabric}: {_counts(topo, groups[0])} between every pair"
    if all(is_complete(topo, g) for g in groups):
        sizes = {len(g) for g in groups}
        kind = "pairs" if sizes == {2} else "fully NVLinked groups"
        listed = " ".join(fmt_set(g) for g in groups)
        return (
            f"NVLink: {len(groups)} {kind} {listed} ({_counts(topo, frozenset().union(*groups))})"
        )
    quads = _cube_mesh_quads(topo, groups)
    if quads:
        cross = sum(1 for a in quads[0] for b in quads[1] if topo.link(a, b).nvlinks)
        return (
            f"NVLink hybrid cube-mesh: 2 groups of 4 fully NVLinked {fmt_set(quads[0])} "
            f"{fmt_set(quads[1])} + {cross} cross links ({_counts(topo, groups[0])})"
        )
    described = []
    for g in groups:
        linked = sum(1 for link in topo.pairs(g) if link.nvlinks)
        total = len(g) * (len(g) - 1) // 2
        described.append(f"{fmt_set(g)} ({linked} of {total} pairs linked)")
    return "NVLink: " + ", ".join(described)


def _cube_mesh_quads(
    topo: Topology, groups: tuple[frozenset[int], ...]
) -> tuple[frozenset[int], frozenset[int]] | None:
    """The two fully linked quads of an 8-GPU hybrid cube-mesh (DGX-1), if that is the shape."""
    if len(groups) != 1 or len(groups[0]) != 8:
        return None
    graph = nvlink_graph(topo).subgraph(groups[0])
    quads = [frozenset(c) for c in nx.find_cliques(graph) if len(c) == 4]
    for q1, q2 in itertools.combinations(quads, 2):
        if not q1 & q2 and len(q1 | q2) == 8:
            return (q1, q2) if min(q1) < min(q2) else (q2, q1)
    return None


def describe_p2p(topo: Topology, groups: tuple[frozenset[int], ...]) -> str:
    """P2P in words: all pairs, none (with the reported reason), or the groups."""
    if groups and len(groups[0]) == len(topo.gpus):
        n = len(topo.gpus)
        return "P2P between the two GPUs" if n == 2 else f"P2P between all {n} GPUs"
    if not groups:
        reasons = Counter(link.p2p.value for link in topo.pairs())
        why = ", ".join(sorted(reasons)) if "U" not in reasons else "PCIe level too far"
        return f"no P2P-capable pair ({why})"
    return "P2P groups " + " ".join(fmt_set(g) for g in groups)


# ------------------------------------------------------------------ rendering


def render_report(facts: TopologyFacts, console: Console, *, bandwidth: bool = True) -> None:
    """Print the whole report to ``console`` (its width decides the wrapping).

    Args:
        facts: from :func:`analyze`.
        console: where to print.
        bandwidth: also print the GB/s matrix.
    """
    topo = facts.topo
    console.print(Text(facts.summary, style="bold"))
    source = f"source: {describe_source(topo)}"
    if topo.truncated:
        source += " (cut short: the machine has more GPUs or NICs than shown)"
    if topo.driver_version:
        source += f", driver {topo.driver_version}"
    if topo.cuda_version:
        source += f", CUDA {topo.cuda_version}"
    console.print(Text(source, style="dim"))
    console.print(Rule("PCIe tree", style="dim"))
    console.print(tree_view(facts))
    if len(topo.gpus) > 1:
        console.print(Rule("links", style="dim"))
        console.print(link_matrix(topo, console.width))
        console.print(legend())
        if bandwidth:
            console.print(Rule("bandwidth", style="dim"))
            console.print(bandwidth_matrix(topo, console.width))
        console.print(Rule("groups", style="dim"))
        console.print(groups_view(facts))
    if topo.nics:
        console.print(Rule("NICs", style="dim"))
        console.print(nic_table(facts))


def tree_view(facts: TopologyFacts) -> Tree:
    """The PCIe tree as a rich Tree; GPU leaves carry model, memory, affinity and NVLinks."""
    root = Tree(_node_text(facts, "root"), guide_style="grey50")
    stack = [(root, "root")]
    while stack:
        branch, node = stack.pop()
        for child in reversed(facts.children(node)):
            sub = branch.add(_node_text(facts, child))
            stack.append((sub, child))
    # Tree.add appends, and we visited children in reverse: put them back in order.
    _reverse_children(root)
    return root


def _reverse_children(tree: Tree) -> None:
    tree.children.reverse()
    for child in tree.children:
        _reverse_children(child)


_NODE_STYLES = {
    "root": "bold",
    "numa": "bold magenta",
    "host_bridge": "yellow",
    "switch": "cyan",
    "gpu": "bold green",
    "nic": "bold blue",
}


def _node_text(facts: TopologyFacts, node: str) -> Text:
    attrs = facts.tree.graph.nodes[node]
    kind = attrs.get("kind", "")
    label = attrs.get("label", node)
    if kind == "gpu":
        label = facts.topo.gpu(attrs["gpu"]).name  # the model follows in the details
    text = Text()
    text.append(str(label), style=_NODE_STYLES.get(kind, ""))
    if attrs.get("inferred") and kind != "root":
        text.append(" (inferred)", style="dim italic")
    if kind == "gpu":
        text.append_text(gpu_details(facts.topo, attrs["gpu"]))
    elif kind == "nic":
        nearest, level = facts.nic_nearest.get(node.removeprefix("nic:"), (frozenset(), None))
        if level is not None:
            text.append(f"  nearest GPUs {fmt_set(nearest)} ({level.name})", style="dim")
    return text


def gpu_details(topo: Topology, index: int) -> Text:
    """``model 16 GiB · CPU 0-11 · NUMA 0 · NVLink NV2: 3,4 NV1: 1,2`` for one GPU."""
    gpu = topo.gpu(index)
    bits = []
    if gpu.model:
        bits.append(gpu.model)
    if gpu.memory_mib:
        bits.append(f"{gpu.memory_mib / 1024:.0f} GiB")
    if gpu.cpu_affinity:
        bits.append(f"CPU {format_cpu_list(gpu.cpu_affinity)}")
    if gpu.numa_node is not None:
        bits.append(f"NUMA {gpu.numa_node}")
    if gpu.mig_mode == "enabled":
        bits.append("MIG on")
    text = Text("  " + " · ".join(bits) if bits else "")
    partners = nvlink_partners(topo, index)
    if partners:
        text.append("  ")
        text.append(partners if topo.vendor == AMD else f"NVLink {partners}", style="green")
    return text


def nvlink_partners(topo: Topology, index: int) -> str:
    """``NV2→3,4 NV1→1,2`` (most links first), or ``NV18→all 7`` when linked to every GPU."""
    by_count: dict[int, list[int]] = {}
    for other in topo.gpu_indices:
        if other != index and (n := topo.link(index, other).nvlinks):
            by_count.setdefault(n, []).append(other)
    if not by_count:
        return ""
    others = len(topo.gpus) - 1
    if len(by_count) == 1 and len(next(iter(by_count.values()))) == others > 2:
        return f"{topo.fabric}{next(iter(by_count))}→all {others}"
    ordered = sorted(by_count.items(), reverse=True)
    return " ".join(f"{topo.fabric}{n}→" + ",".join(map(str, gpus)) for n, gpus in ordered)


def link_style(link: PairLink, max_nvlinks: int) -> str:
    """Style of a matrix cell: NV# greens (brighter = more links), PCIe levels cool to red."""
    if link.nvlinks:
        step = (link.nvlinks * len(NVLINK_STYLES) - 1) // max(max_nvlinks, 1)
        return NVLINK_STYLES[min(step, len(NVLINK_STYLES) - 1)]
    if link.pcie_level is None:
        return "dim"
    return LEVEL_STYLES[link.pcie_level]


def _matrix(topo: Topology, title: str, cell, width: int) -> Group:
    """A GPU x GPU table; wide machines get short headers, then column blocks."""
    gpus = topo.gpu_indices
    cells = {(a, b): cell(topo.link(a, b)) for a in gpus for b in gpus if a != b}
    cell_w = max([len(t.plain) for t in cells.values()] + [2])  # cells start with a blank
    row_w = len(f"GPU{gpus[-1]}")
    long_w = max(cell_w, len(f" GPU{gpus[-1]}"))
    short_w = max(cell_w, len(f" {gpus[-1]}"))
    short = row_w + len(gpus) * long_w > width
    col_w = short_w if short else long_w
    per_block = max(1, (width - row_w) // col_w)
    parts: list[Text | Table] = [Text(title, style="italic")]
    for start in range(0, len(gpus), per_block):
        block = gpus[start : start + per_block]
        table = Table(box=None, padding=(0, 0), pad_edge=False)
        table.add_column("GPU" if short else "", style="bold", no_wrap=True, min_width=row_w)
        for b in block:
            header = f" {b}" if short else f" GPU{b}"
            table.add_column(header, justify="right", no_wrap=True, min_width=col_w)
        for a in gpus:
            row = [Text(f"GPU{a}")]
            row += [cells.get((a, b)) or Text(" X", style="dim") for b in block]
            table.add_row(*row)
        parts.append(table)
    return Group(*parts)


def link_matrix(topo: Topology, width: int = 100) -> Group:
    """GPU x GPU matrix of ``NV#``/PCIe-level labels, coloured by class, fitted to ``width``."""
    max_nv = max((link.nvlinks for link in topo.pairs()), default=0)

    def cell(link: PairLink) -> Text:
        name = topo.link_label(link)
        label = name if link.p2p_capable else f"{name}!"
        return Text(" " + label, style=link_style(link, max_nv))

    return _matrix(topo, "link class (! = no P2P)", cell, width)


def bandwidth_matrix(topo: Topology, width: int = 100) -> Group:
    """GPU x GPU one-direction GB/s: measured (bold) where probed, else estimated (``~``)."""
    measured = any(link.measured_gbps is not None for link in topo.pairs())
    max_nv = max((link.nvlinks for link in topo.pairs()), default=0)

    def cell(link: PairLink) -> Text:
        model = topo.gpu(link.a).model or topo.gpu(link.b).model
        gbps = estimate_gbps(link, model)
        if link.measured_gbps is not None:
            return Text(f" {gbps:.0f}", style="bold " + link_style(link, max_nv))
        return Text(f" ~{gbps:.0f}", style=link_style(link, max_nv))

    title = "GB/s one direction (" + ("bold = measured, " if measured else "")
    title += "~ = estimated from the link class)"
    return _matrix(topo, title, cell, width)


def legend() -> Text:
    """One line naming the colours of the matrix."""
    text = Text("legend: ")
    text.append("NV# NVLink", style="bold green1")
    for level, style in LEVEL_STYLES.items():
        text.append("  ")
        text.append(level.name, style=style)
    text.append("  (PIX one PCIe switch … SYS across CPU sockets)", style="dim")
    return text


def groups_view(facts: TopologyFacts) -> Group:
    """The P2P-capable and NVLink groups, one per line."""
    topo = facts.topo
    lines = [Text("P2P-capable groups: ", style="bold")]
    if facts.p2p_groups:
        lines[0].append(" ".join(fmt_set(g) for g in facts.p2p_groups))
    else:
        lines[0].append(describe_p2p(topo, ()), style="red")
    line = Text(fabric_words(topo, "NVLink groups:      "), style="bold")
    shapes: dict[str, list[frozenset[int]]] = {}
    for g in facts.nvlink_groups:
        shape = "fully linked" if is_complete(topo, g) else "partly linked"
        shapes.setdefault(f"{shape} {_counts(topo, g)}", []).append(g)
    described = []
    for shape, groups in shapes.items():
        each = "each " if len(groups) > 1 else ""
        described.append(" ".join(fmt_set(g) for g in groups) + f" {each}{shape}")
    line.append("; ".join(described) if described else "none", style="" if described else "dim")
    lines.append(line)
    return Group(*lines)


def nic_table(facts: TopologyFacts) -> Table:
    """Each NIC with its nearest GPUs and their PCIe level."""
    table = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False)
    table.add_column("NIC", style="bold blue", no_wrap=True)
    table.add_column("nearest GPUs")
    table.add_column("level")
    for nic in facts.topo.nics:
        nearest, level = facts.nic_nearest.get(nic.name, (frozenset(), None))
        name = nic.name + (f" ({nic.alias})" if nic.alias else "")
        style = LEVEL_STYLES.get(level, "dim") if level is not None else "dim"
        table.add_row(name, fmt_set(nearest), Text(level.name if level else "?", style=style))
    return table
