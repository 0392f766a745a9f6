"""Policies x seeds through the sharing-cost simulator, summarised with 95% intervals.

For one seed every policy sees the same sampled nodes, the same jobs (shape, length, tenant,
kernel class, arrival) and the same fault clock per job, so the differences are the policies'.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from dlc.errors import FieldError
from dlc.sim import io
from dlc.sim.metrics import mean_ci
from dlc.sim.sharing.costs import SharingCostModel, default_model
from dlc.sim.sharing.engine import FaultSpec, Result, Simulation
from dlc.sim.sharing.policy import BackendPolicy
from dlc.sim.sharing.workload import PodLife, WorkloadSpec, make_jobs, parse_lives, sample_nodes
from dlc.sim.trace import NodeSpec

#: the per-run numbers the summary reports, in table order
METRICS = (
    "allocated_gpu_h",
    "useful_gpu_h",
    "useful_per_allocated",
    "lost_gpu_h",
    "lost_other_tenant_gpu_h",
    "lost_same_tenant_gpu_h",
    "lost_own_gpu_h",
    "killed_other_tenant",
    "killed_same_tenant",
    "faults",
    "completed",
    "queued_at_end",
)


def load_lives(root: Path, trace: str) -> list[PodLife]:
    """The GPU pods (shape and life) of ``openb_pod_list_<trace>.csv``."""
    path = root / io.OPENB_DIR / f"{io.POD_PREFIX}{trace}.csv"
    if not path.is_file():
        have = ", ".join(io.available_traces(root)) or "none"
        raise FieldError("--trace", f"no trace {trace!r} (present: {have})")
    with path.open(newline="") as fh:
        return parse_lives(csv.DictReader(fh))


def load_inputs(trace_dir: str | Path | None, trace: str) -> tuple[list[NodeSpec], list[PodLife]]:
    """The openb GPU nodes and the GPU pods of one trace."""
    root = io.trace_root(trace_dir)
    return io.load_nodes(root), load_lives(root, trace)


def simulate(
    nodes: Sequence[NodeSpec],
    lives: Sequence[PodLife],
    policy: BackendPolicy,
    seed: int,
    work: WorkloadSpec,
    faults: FaultSpec,
    model: SharingCostModel | None = None,
) -> Result:
    """One policy and seed (the workload depends on the seed only)."""
    work.check()
    rng = np.random.default_rng(seed)
    picked = sample_nodes(nodes, work.nodes, rng)
    jobs = make_jobs(lives, sum(n.gpus for n in picked), work, rng)
    sim = Simulation(picked, jobs, policy, model or default_model(), faults, seed, work.hours)
    return sim.run()


def row_of(result: Result, seconds: float) -> dict:
    """One run as a flat dict of the metrics."""
    row = asdict(result)
    row.update(
        lost_gpu_h=result.lost_gpu_h,
        killed_by_others=result.killed_by_others,
        useful_per_allocated=result.useful_gpu_h / max(result.allocated_gpu_h, 1e-9),
        seconds=seconds,
    )
    return row


def run_all(
    nodes: Sequence[NodeSpec],
    lives: Sequence[PodLife],
    policies: Sequence[BackendPolicy],
    seeds: Sequence[int],
    work: WorkloadSpec,
    faults: FaultSpec,
    tick: Callable[[str, int], None] | None = None,
) -> list[dict]:
    """Every policy under every seed: one row per run."""
    rows = []
    for seed in seeds:
        for policy in policies:
            started = time.process_time()
            result = simulate(nodes, lives, policy, seed, work, faults)
            rows.append(row_of(result, time.process_time() - started))
            if tick:
                tick(policy.name, seed)
    return rows


def summarise(rows: Sequence[dict], baseline: str | None = None) -> dict[str, dict]:
    """Per policy: mean and 95% half-width of each metric over the seeds, and
    ``useful_vs_baseline``: useful GPU-hours in percent of the ``baseline`` policy's (default:
    the first), paired by seed (same nodes, jobs and fault clocks)."""
    out: dict[str, dict] = {}
    names = list(dict.fromkeys(r["policy"] for r in rows))
    base = {r["seed"]: r["useful_gpu_h"] for r in rows if r["policy"] == (baseline or names[0])}
    for name in names:
        mine = [r for r in rows if r["policy"] == name]
        entry: dict = {
            "seeds": [r["seed"] for r in mine],
            "cpu_seconds_per_run": float(np.mean([r["seconds"] for r in mine])),
        }
        for m in METRICS:
            ci = mean_ci([float(r[m]) for r in mine])
            entry[m] = {"mean": ci.mean, "ci95": ci.half_width}
        ratio = mean_ci(
            [
                100.0 * r["useful_gpu_h"] / base[r["seed"]] - 100.0
                for r in mine
                if base.get(r["seed"])
            ]
        )
        entry["useful_vs_baseline_pct"] = {"mean": ratio.mean, "ci95": ratio.half_width}
        out[name] = entry
    return out
