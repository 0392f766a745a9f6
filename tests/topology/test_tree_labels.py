"""Top-level tree groups carry unique, truthful labels; NICs far from every GPU share one group."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc.topology.discovery.discover import discover
from dlc.topology.model import PcieLevel
from dlc.topology.tree import build_tree
from tests.fixture_files import FIXTURE_DIR, complete_topo_files, truncated_topo_files

BRIDGE_PAIRS = FIXTURE_DIR / "pcie-8gpu_nv12-bridge-pairs_non-adjacent_all-sys_tabs_k8s-dp-546.txt"
DGX2_CUT = FIXTURE_DIR / "dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt"
P40 = FIXTURE_DIR / "p40-8gpu_pix-pxb-soc_mlx5_tabs_paddle.txt"


def tree_of(path: Path):
    return build_tree(discover(from_file=path, allow_truncated=True))


def top_groups(tree) -> dict[str, dict]:
    return {node: tree.graph.nodes[node] for node in tree.graph.successors("root")}


@pytest.mark.parametrize(
    "path",
    complete_topo_files() + truncated_topo_files(),
    ids=lambda p: p.name[:40],
)
def test_top_level_labels_are_unique_and_at_most_one_group_lacks_gpus(path):
    tree = tree_of(path)
    groups = top_groups(tree)
    labels = [attrs["label"] for attrs in groups.values()]
    assert len(labels) == len(set(labels)), labels
    assert all(attrs["kind"] == "numa" for attrs in groups.values())
    without_gpus = [node for node in groups if not tree.gpus_under(node)]
    assert len(without_gpus) <= 1, without_gpus
    # Every NIC is still a leaf of the tree.
    nics = {n for n, kind in tree.graph.nodes(data="kind") if kind == "nic"}
    assert nics == {f"nic:{nic.name}" for nic in tree.topology.nics}


def test_bridge_pairs_name_their_numa_node_and_tell_groups_apart():
    tree = tree_of(BRIDGE_PAIRS)
    by_gpus = {tuple(sorted(tree.gpus_under(n))): a["label"] for n, a in top_groups(tree).items()}
    assert by_gpus == {(0, 1, 2, 3): "NUMA node 0 (CPUs 0-31)",
                       (4, 5, 6, 7): "NUMA node 1 (CPUs 32-63)"}  # fmt: skip
    pairs = {
        tuple(sorted(tree.gpus_under(n))): tree.graph.nodes[n]["label"]
        for top in top_groups(tree) for n in tree.graph.successors(top)
    }  # fmt: skip
    assert pairs == {(0, 2): "NUMA node 0, group a", (1, 3): "NUMA node 0, group b",
                     (4, 5): "NUMA node 1, group a", (6, 7): "NUMA node 1, group b"}  # fmt: skip


def test_nics_sys_from_every_gpu_share_one_other_numa_group():
    tree = tree_of(DGX2_CUT)
    far = [
        nic.name
        for nic in tree.topology.nics
        if all(
            tree.topology.nic_levels.get((nic.name, g)) == PcieLevel.SYS
            for g in tree.topology.gpu_indices
        )
    ]
    assert len(far) > 1
    [other] = [n for n in top_groups(tree) if not tree.gpus_under(n)]
    assert tree.graph.nodes[other]["label"] == "other NUMA node(s)"
    # Whether those NICs share a NUMA node is unknown, so only SYS is claimed between them.
    assert tree.graph.nodes[other]["level"] is PcieLevel.SYS
    assert sorted(tree.graph.successors(other)) == sorted(f"nic:{name}" for name in far)


def test_a_single_far_nic_keeps_a_numa_level_group():
    tree = tree_of(P40)
    [other] = [n for n in top_groups(tree) if not tree.gpus_under(n)]
    attrs = tree.graph.nodes[other]
    assert (attrs["label"], attrs["level"]) == ("other NUMA node", PcieLevel.NODE)
    assert [tree.graph.nodes[c]["kind"] for c in tree.graph.successors(other)] == ["nic"]
