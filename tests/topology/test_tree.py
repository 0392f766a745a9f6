"""The topology tree: structure recovered from level matrices, inference, queries."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlc.errors import DlcError, TopologyQueryError
from dlc.topology.model import Gpu, Nic, P2PStatus, PairLink, PcieLevel, Topology
from dlc.topology.tree import (
    build_tree,
    link_rank,
    links_within,
    nvlink_groups,
    p2p_groups,
    slowest_link,
)

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "topology"


def machine(table: str, numa: list[int] | None = None, p2p: dict | None = None) -> Topology:
    """A Topology from a small ``topo -m``-like table (header row of device names)."""
    rows = [line.split() for line in table.strip().splitlines()]
    names = rows[0]
    gpus = [n for n in names if n.startswith("GPU")]
    cells = {row[0]: dict(zip(names, row[1:], strict=True)) for row in rows[1:]}
    links, nic_levels = {}, {}
    for a, b in itertools.combinations(range(len(gpus)), 2):
        cell = cells[gpus[a]][gpus[b]]
        nv = int(cell[2:]) if cell.startswith("NV") else 0
        level = None if nv else PcieLevel.from_text(cell)
        links[(a, b)] = PairLink(a, b, pcie_level=level, nvlinks=nv)
    nics = tuple(Nic(n) for n in names if not n.startswith("GPU"))
    for nic in nics:
        for g in range(len(gpus)):
            nic_levels[(nic.name, g)] = PcieLevel.from_text(cells[gpus[g]][nic.name])
    numa = numa or [None] * len(gpus)
    topo = Topology(
        gpus=tuple(Gpu(i, numa_node=numa[i]) for i in range(len(gpus))),
        links=links,
        nics=nics,
        nic_levels=nic_levels,
    )
    return topo.with_p2p(p2p) if p2p else topo


DGX1 = machine(
    """
    GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7 mlx5_0
    GPU0 X    NV1  NV1  NV2  NV2  SYS  SYS  SYS  NODE
    GPU1 NV1  X    NV2  NV1  SYS  NV2  SYS  SYS  NODE
    GPU2 NV1  NV2  X    NV2  SYS  SYS  NV1  SYS  PIX
    GPU3 NV2  NV1  NV2  X    SYS  SYS  SYS  NV1  PIX
    GPU4 NV2  SYS  SYS  SYS  X    NV1  NV1  NV2  SYS
    GPU5 SYS  NV2  SYS  SYS  NV1  X    NV2  NV1  SYS
    GPU6 SYS  SYS  NV1  SYS  NV1  NV2  X    NV2  SYS
    GPU7 SYS  SYS  SYS  NV1  NV2  NV1  NV2  X    SYS
    """,
    numa=[0, 0, 0, 0, 1, 1, 1, 1],
)
P40 = machine(
    """
    GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7 mlx5_0
    GPU0 X   PIX PIX PIX PXB PXB PXB PXB SOC
    GPU1 PIX X   PIX PIX PXB PXB PXB PXB SOC
    GPU2 PIX PIX X   PIX PXB PXB PXB PXB SOC
    GPU3 PIX PIX PIX X   PXB PXB PXB PXB SOC
    GPU4 PXB PXB PXB PXB X   PIX PIX PIX SOC
    GPU5 PXB PXB PXB PXB PIX X   PIX PIX SOC
    GPU6 PXB PXB PXB PXB PIX PIX X   PIX SOC
    GPU7 PXB PXB PXB PXB PIX PIX PIX X   SOC
    """
)
K8S = machine(
    """
    GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7 mlx4_0
    GPU0 X   PIX PHB PHB SYS SYS SYS SYS PHB
    GPU1 PIX X   PHB PHB SYS SYS SYS SYS PHB
    GPU2 PHB PHB X   PIX SYS SYS SYS SYS PHB
    GPU3 PHB PHB PIX X   SYS SYS SYS SYS PHB
    GPU4 SYS SYS SYS SYS X   PIX PHB PHB SYS
    GPU5 SYS SYS SYS SYS PIX X   PHB PHB SYS
    GPU6 SYS SYS SYS SYS PHB PHB X   PIX SYS
    GPU7 SYS SYS SYS SYS PHB PHB PIX X   SYS
    """
)
HGX_A100 = machine(
    """
    GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7 NIC0 NIC1 NIC2 NIC3
    GPU0 X    NV12 NV12 NV12 NV12 NV12 NV12 NV12 PXB  PXB  NODE NODE
    GPU1 NV12 X    NV12 NV12 NV12 NV12 NV12 NV12 PXB  PXB  NODE NODE
    GPU2 NV12 NV12 X    NV12 NV12 NV12 NV12 NV12 NODE NODE PXB  PXB
    GPU3 NV12 NV12 NV12 X    NV12 NV12 NV12 NV12 NODE NODE PXB  PXB
    GPU4 NV12 NV12 NV12 NV12 X    NV12 NV12 NV12 SYS  SYS  SYS  SYS
    GPU5 NV12 NV12 NV12 NV12 NV12 X    NV12 NV12 SYS  SYS  SYS  SYS
    GPU6 NV12 NV12 NV12 NV12 NV12 NV12 X    NV12 SYS  SYS  SYS  SYS
    GPU7 NV12 NV12 NV12 NV12 NV12 NV12 NV12 X    SYS  SYS  SYS  SYS
    """,
    numa=[0, 0, 0, 0, 1, 1, 1, 1],
)
H100_NO_AFFINITY = machine(
    """
    GPU0 GPU1 GPU2
    GPU0 X    NV18 NV18
    GPU1 NV18 X    NV18
    GPU2 NV18 NV18 X
    """
)
BRIDGE_PAIRS = machine(
    """
    GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
    GPU0 X    SYS  NV12 SYS  SYS  SYS  SYS  SYS
    GPU1 SYS  X    SYS  NV12 SYS  SYS  SYS  SYS
    GPU2 NV12 SYS  X    SYS  SYS  SYS  SYS  SYS
    GPU3 SYS  NV12 SYS  X    SYS  SYS  SYS  SYS
    GPU4 SYS  SYS  SYS  SYS  X    NV12 SYS  SYS
    GPU5 SYS  SYS  SYS  SYS  NV12 X    SYS  SYS
    GPU6 SYS  SYS  SYS  SYS  SYS  SYS  X    NV12
    GPU7 SYS  SYS  SYS  SYS  SYS  SYS  NV12 X
    """,
    numa=[0, 0, 0, 0, 1, 1, 1, 1],
)
RTX5090_GNS = machine(
    """
    GPU0 GPU1
    GPU0 X   PHB
    GPU1 PHB X
    """,
    p2p={(0, 1): P2PStatus.GNS},
)


def parents(tree, gpus):
    return {tree.parent(tree.gpu_node(g)) for g in gpus}


@pytest.mark.parametrize(
    ("topo", "node", "kind", "level", "gpus"),
    [
        (P40, "switch0.0.0.0", "switch", PcieLevel.PIX, {0, 1, 2, 3}),
        (P40, "switch0.0.0.1", "switch", PcieLevel.PIX, {4, 5, 6, 7}),
        (P40, "switch0.0.0", "switch", PcieLevel.PXB, set(range(8))),
        (P40, "numa0", "numa", PcieLevel.NODE, set(range(8))),
        (P40, "numa1", "numa", PcieLevel.NODE, set()),  # the NIC's socket, across SOC
        (K8S, "bridge0.0", "host_bridge", PcieLevel.PHB, {0, 1, 2, 3}),
        (K8S, "switch0.0.0.0", "switch", PcieLevel.PIX, {0, 1}),
        (K8S, "switch1.0.1.0", "switch", PcieLevel.PIX, {6, 7}),
        (K8S, "numa1", "numa", PcieLevel.NODE, {4, 5, 6, 7}),
        (DGX1, "switch0.2.0.0", "switch", PcieLevel.PIX, {2, 3}),
        (DGX1, "numa0", "numa", PcieLevel.NODE, {0, 1, 2, 3}),
        (HGX_A100, "switch0.0.0", "switch", PcieLevel.PXB, {0, 1}),
        (HGX_A100, "root", "root", PcieLevel.SYS, set(range(8))),
    ],
    ids=[
        "p40 first PIX quad",
        "p40 second PIX quad",
        "p40 quads meet at PXB",
        "p40 single socket",
        "p40 NIC alone on other socket",
        "k8s host bridge quad",
        "k8s PIX pair",
        "k8s PIX pair on socket 1",
        "k8s socket 1",
        "dgx1 PIX pair inferred through mlx5_0",
        "dgx1 socket by affinity",
        "hgx a100 pair inferred PXB through NIC0",
        "root holds all",
    ],
)
def test_tree_nodes(topo, node, kind, level, gpus):
    tree = build_tree(topo)
    attrs = tree.graph.nodes[node]
    assert (attrs["kind"], attrs["level"]) == (kind, level)
    assert tree.gpus_under(node) == frozenset(gpus)


@pytest.mark.parametrize(
    ("topo", "pair", "level", "inferred"),
    [
        (DGX1, (2, 3), PcieLevel.PIX, True),  # both PIX to mlx5_0
        (DGX1, (0, 1), PcieLevel.NODE, True),  # both NODE to mlx5_0
        (DGX1, (0, 4), PcieLevel.SYS, True),
        (DGX1, (0, 5), PcieLevel.SYS, False),
        (HGX_A100, (0, 1), PcieLevel.PXB, True),
        (HGX_A100, (0, 2), PcieLevel.NODE, True),
        (HGX_A100, (4, 5), PcieLevel.NODE, True),  # no NIC near: affinity says one node
        (HGX_A100, (3, 4), PcieLevel.SYS, True),
        (H100_NO_AFFINITY, (0, 1), PcieLevel.SYS, True),  # nothing known: assume the worst
        (BRIDGE_PAIRS, (0, 2), PcieLevel.NODE, True),
        (BRIDGE_PAIRS, (0, 4), PcieLevel.SYS, False),
        (P40, (0, 4), PcieLevel.PXB, False),
    ],
    ids=[
        "dgx1 hidden PIX via NIC",
        "dgx1 hidden NODE via NIC",
        "dgx1 NV2 across sockets stays SYS",
        "dgx1 printed SYS",
        "hgx hidden PXB via NIC",
        "hgx hidden NODE via NIC",
        "hgx affinity NODE",
        "hgx cross socket",
        "no facts means SYS",
        "bridge pair same socket",
        "printed SYS across sockets",
        "printed PXB",
    ],
)
def test_pair_levels_and_inference(topo, pair, level, inferred):
    tree = build_tree(topo)
    assert tree.pcie_levels[pair] == level
    assert tree.level_of(*pair) == level
    assert (pair in tree.inferred_pairs) is inferred


def test_inferred_nodes_are_marked():
    tree = build_tree(DGX1)
    assert tree.graph.nodes["switch0.2.0.0"]["inferred"] is True
    assert build_tree(P40).graph.nodes["switch0.0.0.0"]["inferred"] is False


def test_nics_are_leaves_next_to_their_gpus():
    tree = build_tree(DGX1)
    assert tree.parent("nic:mlx5_0") == "switch0.2.0.0"
    assert tree.graph.nodes["nic:mlx5_0"]["kind"] == "nic"


def test_lone_gpus_hang_off_their_numa_node():
    tree = build_tree(DGX1)
    assert parents(tree, [0, 1]) == {"numa0"}
    assert parents(tree, range(4, 8)) == {"numa1"}


def test_printed_sys_inside_one_numa_node_keeps_the_node_and_splits_below_it():
    # k8s-device-plugin #546: GPU0-GPU1 print SYS though both sit on NUMA node 0: the
    # affinity column names the NUMA node; each hidden bridge pair is a group inside it,
    # and the NUMA node's own level is SYS, as the matrix says between the pairs.
    tree = build_tree(BRIDGE_PAIRS)
    groups = sorted(tree.gpus_under(n) for n in tree.graph.successors("root"))
    assert sorted(map(sorted, groups)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    inner = sorted(sorted(tree.gpus_under(n)) for n in tree.graph.successors("numa0"))
    assert inner == [[0, 2], [1, 3]]
    assert tree.level_of(0, 1) == PcieLevel.SYS


@pytest.mark.parametrize(
    ("topo", "gpus", "lca"),
    [
        (P40, [1, 2], "switch0.0.0.0"),
        (P40, [1, 6], "switch0.0.0"),
        (K8S, [0, 3], "bridge0.0"),
        (K8S, [0, 4], "root"),
        (K8S, [5], "gpu5"),
        (DGX1, [2, 3, 0], "numa0"),
    ],
    ids=["same switch", "across switches", "host bridge", "across sockets", "one gpu", "socket"],
)
def test_lowest_common_ancestor(topo, gpus, lca):
    assert build_tree(topo).lowest_common_ancestor(gpus) == lca


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda t: t.lowest_common_ancestor([]), "gpus"),
        (lambda t: t.lowest_common_ancestor([0, 9]), "GPU9"),
        (lambda t: t.gpus_under("switch7"), "switch7"),
        (lambda t: links_within(t.topology, [0, 12]), "12"),
    ],
    ids=["empty set", "unknown gpu", "unknown node", "links of unknown gpu"],
)
def test_bad_queries_raise_one_line_errors(call, field):
    with pytest.raises(TopologyQueryError) as err:
        call(build_tree(P40))
    assert isinstance(err.value, DlcError)
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("topo", "groups"),
    [
        (P40, [set(range(8))]),
        (K8S, [{0, 1, 2, 3}, {4, 5, 6, 7}]),
        (BRIDGE_PAIRS, [{0, 2}, {1, 3}, {4, 5}, {6, 7}]),
        (RTX5090_GNS, [{0}, {1}]),
    ],
    ids=["p40 all PCIe P2P", "k8s P2P per socket", "bridge pairs", "GeForce GNS is not P2P"],
)
def test_p2p_groups(topo, groups):
    assert p2p_groups(topo) == [frozenset(g) for g in groups]


@pytest.mark.parametrize(
    ("topo", "groups"),
    [
        (BRIDGE_PAIRS, [{0, 2}, {1, 3}, {4, 5}, {6, 7}]),
        (DGX1, [set(range(8))]),
        (P40, []),
    ],
    ids=["non-adjacent bridge pairs", "dgx1 cube-mesh", "no nvlink"],
)
def test_nvlink_groups(topo, groups):
    assert nvlink_groups(topo) == [frozenset(g) for g in groups]


def test_nvlink_overlay_carries_links_and_bandwidth():
    overlay = build_tree(DGX1).nvlink
    assert overlay.edges[0, 3]["nvlinks"] == 2
    assert overlay.edges[0, 3]["gbps"] == 2 * overlay.edges[0, 1]["gbps"]
    assert not overlay.has_edge(0, 5)


@pytest.mark.parametrize(
    ("topo", "gpus", "label", "pair"),
    [
        (DGX1, [0, 1, 3], "NV1", (0, 1)),
        (DGX1, [0, 3, 4], "SYS", (3, 4)),
        (K8S, [0, 1, 2], "PHB", (0, 2)),
        (RTX5090_GNS, [0, 1], "PHB", (0, 1)),
    ],
    ids=["dgx1 all-nvlink triple", "dgx1 triple with SYS", "k8s PHB", "GNS pair"],
)
def test_slowest_link(topo, gpus, label, pair):
    link = slowest_link(topo, gpus)
    assert (link.label, (link.a, link.b)) == (label, pair)
    assert slowest_link(topo, gpus[:1]) is None


def test_link_rank_order():
    ordered = [
        PairLink(0, 1, PcieLevel.PHB, p2p=P2PStatus.GNS),
        PairLink(0, 1, PcieLevel.SYS, p2p=P2PStatus.OK),
        PairLink(0, 1, PcieLevel.NODE, p2p=P2PStatus.OK),
        PairLink(0, 1, PcieLevel.PHB),
        PairLink(0, 1, PcieLevel.PXB),
        PairLink(0, 1, PcieLevel.PIX),
        PairLink(0, 1, None, nvlinks=1),
        PairLink(0, 1, None, nvlinks=2),
    ]
    ranks = [link_rank(link) for link in ordered]
    assert ranks == sorted(set(ranks))


# --- properties over generated trees and real fixtures ------------------------------


@st.composite
def tree_machines(draw):
    """A random PCIe tree as a level matrix, with some levels hidden behind NVLink."""
    sockets = draw(st.integers(1, 2))
    paths: list[tuple[int, int, int, int]] = []  # (numa, bridge, pxb, pix) per GPU
    for numa in range(sockets):
        for _ in range(draw(st.integers(1, 5))):
            bridge, pxb, pix = (draw(st.integers(0, 1)) for _ in range(3))
            paths.append((numa, bridge, pxb, pix))
    hide = draw(st.lists(st.booleans(), min_size=len(paths) ** 2, max_size=len(paths) ** 2))
    links = {}
    for a, b in itertools.combinations(range(len(paths)), 2):
        hidden = hide[a * len(paths) + b]
        level = None if hidden else _true_level(paths, a, b)
        links[(a, b)] = PairLink(a, b, level, nvlinks=int(hidden))
    gpus = tuple(Gpu(i, numa_node=p[0]) for i, p in enumerate(paths))
    truth = {k: _true_level(paths, *k) for k in links}
    return Topology(gpus=gpus, links=links), truth


def _true_level(paths, a, b):
    """The level of the first path component where two GPUs differ."""
    common = next((d for d in range(4) if paths[a][d] != paths[b][d]), 4)
    return (PcieLevel.SYS, PcieLevel.NODE, PcieLevel.PHB, PcieLevel.PXB, PcieLevel.PIX)[common]


def check_tree_invariants(topo: Topology) -> None:
    tree = build_tree(topo)
    leaves = [n for n, d in tree.graph.nodes(data=True) if d["kind"] == "gpu"]
    assert sorted(tree.graph.nodes[n]["gpu"] for n in leaves) == list(topo.gpu_indices)
    assert all(tree.graph.in_degree(n) == 1 and tree.graph.out_degree(n) == 0 for n in leaves)
    assert tree.gpus_under("root") == frozenset(topo.gpu_indices)
    for (a, b), link in topo.links.items():
        lca = tree.lowest_common_ancestor((a, b))
        assert {a, b} <= tree.gpus_under(lca)
        for gpu in (a, b):
            assert lca in tree.path_to_root(tree.gpu_node(gpu))
        if link.pcie_level is not None:
            assert tree.level_of(a, b) == link.pcie_level, (a, b)
    for (nic, gpu), level in topo.nic_levels.items():
        assert tree.graph.nodes[_lca(tree, f"nic:{nic}", tree.gpu_node(gpu))]["level"] == level


def _lca(tree, a, b):
    above = tree.path_to_root(a)
    return next(n for n in tree.path_to_root(b) if n in above)


@settings(max_examples=150, deadline=None)
@given(tree_machines())
def test_generated_trees_reproduce_levels_and_bound_hidden_ones(case):
    topo, truth = case
    check_tree_invariants(topo)
    tree = build_tree(topo)
    for pair, level in truth.items():
        # inference gives the tightest level the facts allow: never closer than the truth
        assert tree.pcie_levels[pair] >= level


def complete_fixtures() -> list[Path]:
    names = sorted(FIXTURES.glob("*.txt"))
    return [p for p in names if "TRUNCATED" not in p.name and not p.name.endswith(".p2p.txt")]


@pytest.mark.parametrize("path", complete_fixtures(), ids=lambda p: p.stem)
def test_real_fixtures_give_consistent_trees(path):
    from dlc.topology.parse_topo import parse_topo_m

    check_tree_invariants(parse_topo_m(path.read_text()))


def test_fixture_directory_is_found():
    assert len(complete_fixtures()) >= 10


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_lca_of_any_set_is_the_lowest_common_ancestor(data):
    from dlc.topology.parse_topo import parse_topo_m

    path = data.draw(st.sampled_from(complete_fixtures()))
    topo = _parsed(path, parse_topo_m)
    gpus = data.draw(st.sets(st.sampled_from(topo.gpu_indices), min_size=1))
    tree = build_tree(topo)
    lca = tree.lowest_common_ancestor(gpus)
    assert all(lca in tree.path_to_root(tree.gpu_node(g)) for g in gpus)
    assert set(gpus) <= tree.gpus_under(lca)
    # lowest: no child of the LCA holds the whole set
    assert not any(set(gpus) <= tree.gpus_under(c) for c in tree.graph.successors(lca))


_PARSED: dict = {}


def _parsed(path, parse):
    if path not in _PARSED:
        _PARSED[path] = parse(path.read_text())
    return _PARSED[path]
