"""Run an openb experiment: policies x seeds on one trace, summarised per policy."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dlc.sim.metrics import allocation_curve, frag_curve, mean_ci
from dlc.sim.policies import get_policy
from dlc.sim.replay import replay
from dlc.sim.trace import MILLI, NodeSpec, PodSpec
from dlc.sim.workload import arrival_sequence, target_mix

#: the arrival steps the summary table reports
REPORT_STEPS = (100, 110, 120, 130)


@dataclass
class PolicyRuns:
    """One policy's replays on one trace, one entry per seed."""

    policy: str
    seeds: list[int] = field(default_factory=list)
    curves: list[np.ndarray] = field(default_factory=list)
    frag_curves: list[np.ndarray] = field(default_factory=list)
    failed_pods: list[int] = field(default_factory=list)
    #: GPU thousandths the failed pods asked for, over all arrived
    failed_gpu_share: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    #: CPU seconds of this process per replay (wall time depends on what else runs)
    cpu_seconds: list[float] = field(default_factory=list)
    #: ``--mode core``: per seed, what the core did beside the curve (rounds, withdrawn ...)
    core: list[dict] = field(default_factory=list)

    def mean_curve(self) -> np.ndarray:
        """Allocation ratio per step, mean over seeds (NaN at a step no seed reached)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "mean of empty slice": the NaN
            return np.nanmean(np.vstack(self.curves), axis=0)

    def summary(self, total_gpus: int) -> dict:
        """Mean and 95% CI at the report steps, and unallocated GPUs at 130%."""
        out: dict = {"policy": self.policy, "seeds": self.seeds}
        for k in REPORT_STEPS:
            ci = mean_ci([c[k] for c in self.curves])
            out[f"alloc_{k}"] = {"mean": ci.mean, "ci95": ci.half_width}
        final = mean_ci([c[130] for c in self.curves])
        out["unallocated_gpus_130"] = (100 - final.mean) / 100 * total_gpus
        out["failed_pods_mean"] = float(np.mean(self.failed_pods))
        if self.failed_gpu_share:
            out["failed_gpu_share_mean"] = float(np.mean(self.failed_gpu_share))
        out["seconds_per_replay"] = float(np.mean(self.seconds))
        out["cpu_seconds_per_replay"] = float(np.mean(self.cpu_seconds))
        if self.core:
            out["core"] = self.core
        return out


def run_trace(
    nodes: list[NodeSpec],
    pods: list[PodSpec],
    policies: list[str],
    seeds: list[int],
    tune: float = 1.3,
    progress: Callable[[str, int], None] | None = None,
    mode: str = "replay",
    batch_pct: float = 1.0,
) -> dict[str, PolicyRuns]:
    """Replay ``pods`` on ``nodes`` under each policy and seed (same arrivals per seed).

    ``mode="core"``: through DLC's scheduler core on simulated Mesos agents
    (:mod:`dlc.sim.cluster_sim.openb_core`, pods in batches of ``batch_pct`` percent of the
    GPUs); the policies are then ``dlc`` or ``dlc-admit:R`` (the core's share hold at R).
    """
    mix = target_mix(pods)
    total = sum(n.gpus for n in nodes) * MILLI
    runs = {p: PolicyRuns(p) for p in policies}
    for seed in seeds:
        for name in policies:
            rng = np.random.default_rng(seed)
            arrivals = arrival_sequence(pods, total, tune, rng)
            started, cpu_started = time.perf_counter(), time.process_time()
            tick = (lambda n, name=name: progress(name, n)) if progress else None
            r = runs[name]
            if mode == "core":
                result, stats = _core(nodes, arrivals, name, batch_pct, tick)
                r.core.append(stats.as_dict())
            else:
                result = replay(nodes, arrivals, get_policy(name), mix, rng, tick)
            r.seconds.append(time.perf_counter() - started)
            r.cpu_seconds.append(time.process_time() - cpu_started)
            r.seeds.append(seed)
            r.curves.append(allocation_curve(result))
            r.frag_curves.append(frag_curve(result))
            r.failed_pods.append(len(result.failed))
            r.failed_gpu_share.append(
                result.failed_gpu_milli / max(int(result.arrived_gpu_milli[-1]), 1)
            )
    return runs


def _core(nodes, arrivals, name: str, batch_pct: float, tick):
    from dlc.sim.cluster_sim.openb_core import replay_core
    from dlc.sim.policies import hold_reserve

    return replay_core(nodes, arrivals, batch_pct, hold_reserve(name), tick)
