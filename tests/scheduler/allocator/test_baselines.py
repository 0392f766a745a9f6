"""Baselines keep their published behaviour, weaknesses included."""

from __future__ import annotations

import itertools

import pytest
from alloc_machines import bridge_pairs, dgx1_volta, fixture, pcie_8gpu

from dlc.errors import AllocationError
from dlc.scheduler.allocator import allocate
from dlc.scheduler.allocator.base import AllocationRequest
from dlc.scheduler.allocator.best_effort import BestEffortPolicy, _partitions
from dlc.scheduler.allocator.prepared import tables_for

ALL8 = frozenset(range(8))


def test_best_effort_padded_set_bug_is_reproduced():
    # 3 of 5 free: the best partition is [[0, 1, 6], [4, 5, nil]] and its NV12 pair
    # outscores the complete SYS triple, so the Go code returns 2 GPUs + nil (PR #80).
    with pytest.raises(AllocationError) as err:
        allocate(bridge_pairs(), {0, 1, 4, 5, 6}, 3, policy="best-effort")
    assert err.value.reason == "padded_set"
    assert "[4, 5]" in str(err.value)
    assert len(allocate(bridge_pairs(), {0, 1, 4, 5, 6}, 3, policy="tree")) == 3


def test_best_effort_single_gpu_takes_the_first_free():
    # size 1: every partition scores 0, so the first GPU wins and breaks an NVLink pair
    assert allocate(bridge_pairs(), ALL8 - {3}, 1, policy="best-effort") == (0,)


@pytest.mark.parametrize(
    ("pair", "score"),
    [((0, 3), 220), ((0, 4), 210), ((0, 5), 10), ((2, 3), 250), ((0, 1), 120)],
    ids=["NV2 same socket", "NV2 across sockets", "SYS", "NV2 on one PIX switch", "NV1"],
)
def test_best_effort_pair_scores(pair, score):
    tables = tables_for(dgx1_volta())
    assert tables.go_score[pair[0]][pair[1]] == score


def test_best_effort_ignores_nv18():
    tables = tables_for(fixture("hgx-h100"))
    assert tables.go_score[0][1] == 20  # NODE points only: NV18 is past TwelveNVLINKLinks


@pytest.mark.parametrize(
    ("devices", "size", "count"),
    [(4, 2, 3), (6, 2, 15), (6, 3, 10), (5, 3, 10), (8, 4, 35), (3, 1, 3)],
    ids=[
        "4 in pairs",
        "6 in pairs",
        "6 in triples",
        "5 in triples padded",
        "8 in quads",
        "singles",
    ],
)
def test_best_effort_partition_counts(devices, size, count):
    assert sum(1 for _ in _partitions(list(range(devices)), size)) == count


def test_best_effort_partition_cap_is_counted():
    policy = BestEffortPolicy(max_partitions=3)
    chosen = policy.allocate(dgx1_volta(), ALL8, AllocationRequest(2))
    assert len(chosen) == 2 and policy.capped == 1


@pytest.mark.parametrize(
    ("free", "count", "expected"),
    [
        (ALL8 - {3}, 2, (0, 1)),
        (ALL8 - {0}, 3, (1, 2, 3)),
        (ALL8 - {5}, 1, (4,)),
        (ALL8, 5, (0, 1, 2, 3, 4)),
    ],
    ids=[
        "best-fit quad",
        "best-fit before the whole quad",
        "single best-fit",
        "spans the PXB switch",
    ],
)
def test_tkestack_tree_walk(free, count, expected):
    assert allocate(pcie_8gpu(), free, count, policy="tkestack") == expected


def test_first_fit_takes_lowest_indices():
    assert allocate(dgx1_volta(), {7, 2, 5, 4}, 3, required={7}, policy="first-fit") == (2, 4, 7)


def test_optimal_is_exhaustive_on_the_bottleneck():
    assert allocate(dgx1_volta(), {0, 1, 3, 4}, 3, policy="optimal") == (0, 1, 3)


def test_best_effort_on_the_dgx1_bottleneck_example():
    # With NVLink points only, {0,3,4} (NV2+NV2+SYS) outscores {0,1,3} (NV1+NV2+NV1),
    # 410 to 400. NVML also reports the PCIe level of NVLinked pairs; with the tree's
    # inferred levels standing in for it the sums become 440 and 460.
    tables = tables_for(dgx1_volta())

    def score(gpus, nvlink_only):
        topo = dgx1_volta()
        total = 0
        for a, b in itertools.combinations(gpus, 2):
            link = topo.link(a, b)
            total += 100 * link.nvlinks if nvlink_only else tables.go_score[a][b]
            if nvlink_only and not link.nvlinks:
                total += 10  # SYS
        return total

    assert (score((0, 3, 4), True), score((0, 1, 3), True)) == (410, 400)
    assert (score((0, 3, 4), False), score((0, 1, 3), False)) == (440, 460)
    assert allocate(dgx1_volta(), {0, 1, 3, 4}, 3, policy="best-effort") == (0, 1, 3)
