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
    assert "Targets for tree" in done.stdout, done.stderr
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "results", "decision_times", "targets"}
    # the exit status says whether every target was met, naming each missed one
    missed = [t["target"] for t in data["targets"] if not t["met"]]
    assert done.returncode == (1 if missed else 0), (done.returncode, missed, done.stderr)
    assert all(f"target missed: {m}" in done.stderr for m in missed)
    assert {t["policy"] for t in data["decision_times"]} == set(data["meta"]["policies"])
    assert data["meta"]["machines"] == ["tf-gdr-readme_4gpu_phb-soc_mlx4_tabs"]
    assert {r["policy"] for r in data["results"]} == set(data["meta"]["policies"])
    assert data["meta"]["seeds"] == [7, 7] and data["meta"]["jobs"] == 30
    for row in data["results"]:
        _check_row(row)
    for t in data["decision_times"]:
        assert 0 <= t["p50_ms"] <= t["p99_ms"] < 1000, t
    assert len(data["targets"]) == 5
    for t in data["targets"]:
        assert isinstance(t["met"], bool) and t["target"] and t["detail"], t


def _check_row(row: dict) -> None:
    """The figures of one (machine, stream, seed, policy) row are within their ranges."""
    assert row["machine"] == "tf-gdr-readme_4gpu_phb-soc_mlx4_tabs" and row["seed"] == 7
    assert row["stream"], row
    assert row["multi_gpu_decisions"] >= 0 and row["failed"] >= 0
    assert 0.0 <= row["best_link_share"] <= 1.0, row
    assert 0.0 <= row["score_vs_optimal_pct"] <= 100.0 + 1e-9, row
    assert 0 <= row["fragmented_avoidable"] <= row["fragmented"], row
    assert 0.0 <= row["cross_socket_share"] <= 1.0, row
    assert 0 <= row["p50_ms"] <= row["p99_ms"] < 1000, row


def test_a_missed_target_fails_the_run_unless_no_fail(capsys):
    import allocator

    targets = [
        {"target": "summed score >= 98%", "met": True, "detail": "99%"},
        {"target": "decision p99 <= 1 ms", "met": False, "detail": "worst 3 ms"},
    ]
    assert allocator.missed_exit(targets, no_fail=False) == 1
    assert "target missed: decision p99 <= 1 ms (worst 3 ms)" in capsys.readouterr().err
    assert allocator.missed_exit(targets, no_fail=True) == 0
    assert allocator.missed_exit(targets[:1], no_fail=False) == 0


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
