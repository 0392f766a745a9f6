"""Fair share over time in the Mesos-driven simulator (issue 28): Jain's fairness index of
each group's decayed GPU-hours over its weight after a simulated week, with and without
``--fair-share-half-life``, over seeds, with 95% intervals.

The workload: 4 groups of equal weight (each guaranteed the same few GPUs; the rest of the
cluster is lent by borrowing), uneven demand in time: ``early`` has a backlog from day 0,
``steady`` submits all week, ``late`` arrives on day 2 and ``latest`` on day 4, each with
more work than its quarter of the week, so every group could use its share; only *when* it
asks differs. The core, its quotas, borrowing and preemption are DLC's own
(:class:`dlc.sim.cluster_sim.engine.Engine`); only the half-life changes between the runs.

    .venv/bin/python bench/sim_fairshare.py --seeds 1-10 --json bench/results/sim_fairshare.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.scheduler.core.facade import CoreConfig  # noqa: E402
from dlc.scheduler.jobs.job import JobSpec  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.scheduler.tenancy.policy import DEFAULT_POOL, Group, Policy, Quota, Resources  # noqa: E402
from dlc.sim.cluster_sim.engine import Engine, EngineParams, WorkItem  # noqa: E402
from dlc.sim.cluster_sim.master import SimAgentSpec  # noqa: E402
from dlc.sim.cluster_sim.week import decayed_usage, jain  # noqa: E402
from dlc.topology import gpu_shares  # noqa: E402

DAY = 86400.0
WEEK = 7 * DAY
NODES, GPUS = 4, 8  # 32 GPUs
GUARANTEE = 4.0  # per group: 16 of 32 guaranteed, 16 lent by borrowing
#: group -> (first submission day, last submission day, GPU-hours submitted in the week)
DEMAND = {
    "early": (0.0, 7.0, 2400.0),
    "steady": (0.0, 7.0, 1600.0),
    "late": (2.0, 5.0, 1600.0),
    "latest": (4.0, 6.0, 1400.0),
}
SIZES = (2, 4, 8)


def agents() -> list[SimAgentSpec]:
    """Agents as ``dlc node-config`` declares them (``gpu_mem`` blocks: the engine reads each
    task's GPUs from them)."""
    gpus = range(GPUS)
    mem = gpu_shares.ranges_text(gpu_shares.mem_ranges(dict.fromkeys(gpus, 81920)))
    core = gpu_shares.ranges_text(gpu_shares.core_ranges(gpus))
    text = (f"cpus:64;mem:524288;disk:1048576;ports:[31000-32000];gpus:{GPUS};"
            f"gpu_ids:{{{','.join(map(str, gpus))}}};gpu_mem:{mem};gpu_core:{core}")  # fmt: skip
    attributes = {"gpu_model": "A100", gpu_shares.ATTR_SHARING: "shim"}
    return [SimAgentSpec(f"agent-{n}", f"node{n}", text, attributes) for n in range(NODES)]


def policy() -> Policy:
    groups = {g: Group(g, frozenset({f"{g}-u{i}" for i in range(3)})) for g in DEMAND}
    quotas = {(g, DEFAULT_POOL): Quota(g, DEFAULT_POOL, Resources(GUARANTEE, 1e9, 1e12))
              for g in groups}  # fmt: skip
    return Policy(groups=groups, quotas=quotas, grace_s=30)


def workload(seed: int) -> list[WorkItem]:
    """Training jobs of 2-8 GPUs, 4-16 h each (log-uniform), arriving uniformly in each
    group's window until its GPU-hours are submitted."""
    rng = np.random.default_rng(seed)
    items = []
    for group, (first, last, gpu_hours) in DEMAND.items():
        submitted, n = 0.0, 0
        while submitted < gpu_hours:
            gpus = int(rng.choice(SIZES, p=(0.4, 0.4, 0.2)))
            hours = float(math.exp(rng.uniform(math.log(4), math.log(16))))
            at = float(rng.uniform(first, last) * DAY)
            user = f"{group}-u{n % 3}"
            spec = JobSpec(image="sim/train:1", gpus=gpus, cpus=2, mem_mib=8192)
            items.append(WorkItem(f"{group}-{n:04d}", "training", user, group, at, spec,
                                  hours * 3600))  # fmt: skip
            submitted += gpus * hours
            n += 1
    return items


def run(seed: int, half_life_s: float, measure_half_life_s: float) -> dict:
    config = CoreConfig(placement=PlacementConfig("first-fit"), fair_share_half_life_s=half_life_s)
    engine = Engine(agents(), config, policy(), EngineParams(offer_delay_s=30.0, tick_s=900.0))
    for item in workload(seed):
        engine.add(item)
    started = time.perf_counter()
    result = engine.run(WEEK)
    decayed = dict.fromkeys(DEMAND, 0.0) | decayed_usage(result, measure_half_life_s)
    plain = dict.fromkeys(DEMAND, 0.0) | decayed_usage(result, 0.0)  # no decay: GPU-hours
    busy = sum(plain.values()) / (NODES * GPUS * WEEK / 3600)
    preempted = sum(r.preemptions for r in result.records.values())
    return {
        "seed": seed, "half_life_s": half_life_s,
        "jain_decayed": jain([decayed[g] / GUARANTEE for g in DEMAND]),
        "jain_gpu_hours": jain([plain[g] / GUARANTEE for g in DEMAND]),
        "gpu_hours": plain, "decayed": decayed, "allocation": busy,
        "preemptions": preempted, "problems": result.problems,
        "wall_s": time.perf_counter() - started,
    }  # fmt: skip


def interval95(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}
    return mean, t.get(len(values), 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    import logging

    logging.disable(logging.WARNING)  # the agents' "no dlc_topo" notes: first-fit is meant
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-10")
    parser.add_argument("--half-life", type=float, default=7 * DAY, help="seconds (the feature)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = []
    for seed in seeds_of(args.seeds):
        for half_life in (0.0, args.half_life):
            runs.append(run(seed, half_life, args.half_life))
            r = runs[-1]
            print(f"seed {seed} half-life {half_life / DAY:g} d: Jain decayed "
                  f"{r['jain_decayed']:.4f}, GPU-hours {r['jain_gpu_hours']:.4f}, "
                  f"allocation {r['allocation']:.3f}, preemptions {r['preemptions']}, "
                  f"{r['wall_s']:.1f} s", flush=True)  # fmt: skip
    print("| fair share | Jain, decayed usage / weight (95% CI) | Jain, GPU-hours / weight | "
          "allocation | preemptions |")  # fmt: skip
    print("|---|---|---|---|---|")
    for half_life in (0.0, args.half_life):
        rows = [r for r in runs if r["half_life_s"] == half_life]
        keys = ("jain_decayed", "jain_gpu_hours", "allocation", "preemptions")
        cells = [interval95([r[k] for r in rows]) for k in keys]
        name = "off (DRF on borrowing)" if not half_life else f"half-life {half_life / DAY:g} d"
        print(f"| {name} | {cells[0][0]:.4f} ± {cells[0][1]:.4f} | {cells[1][0]:.4f} ± "
              f"{cells[1][1]:.4f} | {cells[2][0]:.3f} ± {cells[2][1]:.3f} | "
              f"{cells[3][0]:.1f} ± {cells[3][1]:.1f} |")  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": runs, "demand": DEMAND}, indent=1))


if __name__ == "__main__":
    main()
