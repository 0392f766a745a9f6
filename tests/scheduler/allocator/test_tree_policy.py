"""Named placement cases for DLC's ``tree`` policy and how the baselines differ."""

from __future__ import annotations

import pytest
from alloc_machines import (
    bridge_pairs,
    dgx1_volta,
    geforce_gns_box,
    hgx_a100,
    pcie_8gpu,
    rtx4090_all_sys,
    with_hardware,
)

from dlc.scheduler.allocator import DEFAULT_POLICY, allocate
from dlc.scheduler.allocator.cliques import future_packing
from dlc.scheduler.allocator.prepared import tables_for
from dlc.topology.tree import slowest_link

ALL8 = frozenset(range(8))

CASES = [
    # (id, machine, free, count, required, expected)
    ("DGX-1 3 of {0,1,3,4} takes all-NVLink {0,1,3}", dgx1_volta, {0, 1, 3, 4}, 3, (), (0, 1, 3)),
    # both quads are all-NVLink; 4-7 keeps the PIX switch of GPU2/3 (and the NIC) whole
    ("DGX-1 4 of 8 takes a whole NVLink quad", dgx1_volta, ALL8, 4, (), (4, 5, 6, 7)),
    ("DGX-1 pair takes an NV2 pair", dgx1_volta, {0, 1, 4}, 2, (), (0, 4)),
    (
        "single GPU avoids breaking an NVLink pair on the bridge-pair box",
        bridge_pairs,
        ALL8 - {3},
        1,
        (),
        (1,),
    ),
    ("pair lands on NV12 bridge 0-2 not index-adjacent 0-1", bridge_pairs, ALL8, 2, (), (0, 2)),
    ("bridge box pair with required GPU takes its partner", bridge_pairs, ALL8, 2, (4,), (4, 5)),
    ("GeForce GNS pair is not P2P", geforce_gns_box, {0, 1, 2, 3}, 2, (), (2, 3)),
    ("affinity breaks ties on the all-SYS 4090 box", rtx4090_all_sys, {0, 4, 5}, 2, (), (4, 5)),
    ("4090 single GPU keeps a socket whole", rtx4090_all_sys, {0, 1, 2, 4, 5, 6, 7}, 1, (), (0,)),
    ("P40 pair best-fits the broken PIX quad", pcie_8gpu, ALL8 - {3}, 2, (), (0, 1)),
    ("P40 single GPU goes to the broken quad", pcie_8gpu, ALL8 - {5}, 1, (), (4,)),
    ("P40 quad stays inside one PIX switch", pcie_8gpu, ALL8 - {0}, 4, (), (4, 5, 6, 7)),
    ("HGX A100 4 of 8 stays on one socket", hgx_a100, ALL8, 4, (), (0, 1, 2, 3)),
    ("HGX A100 pair shares a NIC switch", hgx_a100, ALL8 - {0}, 2, (), (2, 3)),
    ("count equal to required returns required", dgx1_volta, ALL8, 2, (0, 5), (0, 5)),
]


@pytest.mark.parametrize(
    ("machine", "free", "count", "required", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_tree_policy_named_cases(machine, free, count, required, expected):
    assert allocate(machine(), free, count, required, policy="tree") == expected


def test_tree_is_the_default_policy():
    assert DEFAULT_POLICY == "tree"
    assert allocate(bridge_pairs(), ALL8, 2) == (0, 2)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("first-fit", (0, 1)), ("tkestack", (0, 2)), ("optimal", (0, 2)), ("best-effort", (0, 2))],
    ids=[
        "first-fit pairs by index",
        "tkestack on the recovered tree (bridge partners inferred NODE)",
        "optimal",
        "best-effort",
    ],
)
def test_baselines_on_non_adjacent_bridges(policy, expected):
    assert allocate(bridge_pairs(), ALL8, 2, policy=policy) == expected


@pytest.mark.parametrize(
    ("request_kwargs", "expected"),
    [
        ({"gpu_model": "v100"}, (4, 7)),
        ({"gpu_model": "A100", "min_memory_mib": 40000}, (2, 3)),
        ({"min_memory_mib": 32000}, (2, 3)),
    ],
    ids=["model substring, case-insensitive", "model and memory", "memory only"],
)
def test_model_and_memory_constraints(request_kwargs, expected):
    topo = with_hardware(
        dgx1_volta(),
        ["A100-SXM4"] * 4 + ["Tesla V100-SXM2"] * 4,
        [20000, 20000, 81920, 81920, 16384, 16384, 16384, 16384],
    )
    assert allocate(topo, ALL8, 2, policy="tree", **request_kwargs) == expected


def test_tree_matches_optimal_on_the_bottleneck_example():
    topo = dgx1_volta()
    chosen = allocate(topo, {0, 1, 3, 4}, 3, policy="tree")
    assert slowest_link(topo, chosen).label == "NV1"
    assert slowest_link(topo, (0, 3, 4)).label == "SYS"


def test_tables_are_cached_per_topology_object():
    topo = dgx1_volta()
    assert tables_for(topo) is tables_for(topo)


@pytest.mark.parametrize(
    ("machine", "size", "busy", "expected"),
    [
        (dgx1_volta, 2, set(), 4),  # NV2 pairs form an 8-cycle: a perfect matching
        (dgx1_volta, 2, {0}, 3),
        (dgx1_volta, 2, {0, 2}, 2),  # left: the path 1-5-6-7-4 and a lone GPU3
        (dgx1_volta, 4, set(), 2),  # the two NVLink quads
        (dgx1_volta, 4, {5}, 1),
        (bridge_pairs, 2, {0, 1}, 2),
        (pcie_8gpu, 4, {3}, 1),
        (pcie_8gpu, 2, {3}, 3),
    ],
    ids=[
        "dgx1 pairs empty",
        "dgx1 pairs minus one",
        "dgx1 pairs minus two",
        "dgx1 quads empty",
        "dgx1 quads minus one",
        "bridge pairs minus two halves",
        "p40 quads minus one",
        "p40 pairs minus one",
    ],
)
def test_future_packing_counts_disjoint_best_class_sets(machine, size, busy, expected):
    tables = tables_for(machine())
    free = tables.mask_of(set(tables.indices) - busy)
    assert future_packing(tables, (size,), free) == (expected,)
