"""``bench/sim_hold_trigger.py``: the share hold switched on at a given arrived demand.

Its figures (README, docs/simulator.md "The share hold, started late") rest on two facts
checked here on a seeded openb slice: before its start the policy places exactly as DLC's
array policy without a hold, and from a start at 0 exactly as ``dlc-admit:R``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlc.sim import io
from dlc.sim.policies import get_policy
from dlc.sim.replay import replay
from dlc.sim.workload import arrival_sequence, target_mix

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sim_hold_trigger.py"
_spec = importlib.util.spec_from_file_location("sim_hold_trigger", BENCH)
assert _spec and _spec.loader
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def sliced():
    root = io.trace_root()
    nodes, pods = io.load_nodes(root), io.load_pods(root, "default")
    rng = np.random.default_rng(7)
    nodes = [nodes[i] for i in sorted(rng.choice(len(nodes), 120, replace=False))]
    pods = [pods[i] for i in sorted(rng.choice(len(pods), 600, replace=False))]
    return nodes, pods


def _replay(sliced, policy):
    nodes, pods = sliced
    total = sum(n.gpus for n in nodes) * 1000
    rng = np.random.default_rng(42)
    arrivals = arrival_sequence(pods, total, 1.3, rng)
    return replay(nodes, arrivals, policy, target_mix(pods), rng)


def _used(sliced, policy):
    return _replay(sliced, policy).used_gpu_milli


def test_before_its_start_it_is_the_array_policy_and_from_zero_the_share_hold(sliced):
    plain = _used(sliced, get_policy("dlc-arrays"))
    held = _used(sliced, get_policy("dlc-admit:1.5"))
    assert not np.array_equal(plain, held)  # the slice is one where the hold changes things
    assert np.array_equal(_used(sliced, bench.LateHold(1.5, None)), plain)
    assert np.array_equal(_used(sliced, bench.LateHold(1.5, 0.0)), held)
    late = _replay(sliced, bench.LateHold(1.5, 0.9))
    assert not np.array_equal(late.used_gpu_milli, plain)
    # the first event that differs comes once 90% of the slice's GPUs have arrived
    diverged = int(np.argmax(late.used_gpu_milli != plain))
    assert late.arrived_gpu_milli[diverged] >= 0.9 * late.total_gpu_milli


def test_the_bench_writes_every_whole_curve(tmp_path):
    out = tmp_path / "hold.json"
    cmd = [sys.executable, str(BENCH), "--seeds", "42", "--reserve", "1.5",
           "--from", "none,0", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["from_pct"] for r in rows] == [None, 0.0]
    assert all(len(r["curve"]) == 131 for r in rows)
    none, always = rows
    # the documented trade-off: the hold from the start loses at 100% and gains at 130%
    assert always["alloc_100"] < none["alloc_100"] and always["alloc_130"] > none["alloc_130"]
