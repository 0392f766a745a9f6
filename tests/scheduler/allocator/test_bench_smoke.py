"""The benchmark and the machine generator run and produce what they promise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlc.scheduler.allocator import allocate
from dlc.topology.parse_topo import parse_topo_m
from dlc.topology.tree import build_tree

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))
import topogen  # noqa: E402


def test_benchmark_smoke_writes_the_promised_json(tmp_path):
    out = tmp_path / "allocator.json"
    cmd = [sys.executable, str(BENCH / "allocator.py"), "--machines", "tf-gdr", "--jobs", "30"]
    cmd += ["--repeats", "1", "--seed", "7", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Targets for tree" in done.stdout
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "results", "decision_times", "targets"}
    assert {t["policy"] for t in data["decision_times"]} == set(data["meta"]["policies"])
    assert data["meta"]["machines"] == ["tf-gdr-readme_4gpu_phb-soc_mlx4_tabs"]
    assert {r["policy"] for r in data["results"]} == set(data["meta"]["policies"])
    row = data["results"][0]
    for key in (
        "machine",
        "stream",
        "seed",
        "multi_gpu_decisions",
        "best_link_share",
        "score_vs_optimal_pct",
        "fragmented",
        "fragmented_avoidable",
        "cross_socket_share",
        "failed",
        "p50_ms",
        "p99_ms",
    ):
        assert key in row
    assert all({"target", "met", "detail"} <= set(t) for t in data["targets"])


@pytest.mark.parametrize("name", sorted(topogen.MACHINES))
def test_generated_machines_parse_and_keep_their_levels(name):
    text = topogen.MACHINES[name]()
    topo = parse_topo_m(text)
    tree = build_tree(topo)
    for (a, b), link in topo.links.items():
        if link.pcie_level is not None:
            assert tree.level_of(a, b) == link.pcie_level


@pytest.mark.parametrize(
    ("name", "count", "expected"),
    [
        ("gen-pcie-tree-16", 4, (8, 9, 10, 11)),
        ("gen-pcie-tree-16", 8, (0, 1, 2, 3, 4, 5, 6, 7)),
        ("gen-dgx2-nvswitch-16", 8, (0, 1, 2, 3, 4, 5, 6, 7)),
        ("gen-bridge-pairs-interleaved-8", 2, (0, 4)),
        ("gen-mixed-pix-pxb-8", 3, (0, 1, 2)),
    ],
    ids=[
        "PCIe tree quad takes a PHB-side switch, keeping the PXB socket for 8",
        "PCIe tree 8 is the PXB socket",
        "NVSwitch 8 stays on one socket",
        "interleaved bridge pair",
        "PIX triple",
    ],
)
def test_tree_policy_on_generated_machines(name, count, expected):
    topo = parse_topo_m(topogen.MACHINES[name]())
    assert allocate(topo, set(topo.gpu_indices), count) == expected
