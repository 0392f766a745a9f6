"""The openb-scale benches run and are sound: ``bench/core_scale.py --quick`` writes sane
figures, and two identical ``bench/sim_scale.py`` replays give identical results."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dlc.errors import DlcError
from dlc.sim import io

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _traces() -> Path:
    try:
        return io.trace_root()
    except DlcError:
        pytest.fail("the openb traces are missing: ../shared/traces must be beside the checkout")


def test_core_scale_quick_writes_sane_figures(tmp_path):
    root = _traces()
    out = tmp_path / "core_scale.json"
    cmd = [sys.executable, str(BENCH / "core_scale.py"), "--quick", "--no-fail",
           "--trace-dir", str(root), "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    for key in ("round_ms_p50", "round_ms_p99", "first_round_ms", "empty_round_ms",
                "first_empty_round_ms", "submits_per_s", "submit_p99_ms", "even_submit_p99_ms",
                "rss_mib"):  # fmt: skip
        assert isinstance(data[key], float) and math.isfinite(data[key]) and data[key] > 0, key
    assert data["round_ms_p50"] <= data["round_ms_p99"]
    # the cyclic collector's time inside the rounds (part of their figures) and outside them
    for key in ("first_round_gc_ms", "round_gc_ms", "round_gc_runs", "even_round_gc_ms",
                "empty_round_gc_ms", "cycle_gc_outside_ms", "cycle_gc_outside_runs"):  # fmt: skip
        assert isinstance(data[key], float) and math.isfinite(data[key]) and data[key] >= 0, key
    assert data["round_gc_ms"] <= data["round_ms_p99"]
    assert data["submit_errors"] == 0
    assert data["running_tasks"] > 0  # the rounds placed pods
    assert isinstance(data["missed"], list)
    assert "round_ms_p50" in done.stdout  # the table


def test_sim_scale_identical_runs_place_identical_counts():
    root = _traces()
    sys.path.insert(0, str(BENCH))
    try:
        import sim_scale
    finally:
        sys.path.remove(str(BENCH))
    keep = ("placed", "withdrawn", "rounds", "gpu_memory_allocated_ratio", "problems", "refused")
    runs = [sim_scale.replay(root, "default", 42, 5.0, 1.3, agents_limit=40) for _ in range(2)]
    first, second = ({k: r[k] for k in keep} for r in runs)
    assert first["placed"] > 0 and first["withdrawn"] > 0  # a batch that does not all fit
    assert first == second
