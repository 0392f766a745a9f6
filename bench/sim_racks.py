"""Gangs across racks: how many gangs that fit under one switch are placed under one.

Usage::

    .venv/bin/python bench/sim_racks.py [--agents 64] [--hours 24] [--seeds 1-5]
        [--json bench/results/sim_racks.json]

The cluster is openb-sized: the first ``--agents`` 8-GPU G2 machines of the Alibaba openb node
list (their CPUs and memory as listed), four agents to a switch, two switches to a rack. The
workload is a Poisson stream at about 85% of the GPUs: single-node jobs of 1, 2, 4 or 8 GPUs
(mean one hour) and gangs of 2 to 4 nodes of 8 or 4 GPUs (mean three hours). DLC's real
scheduler core places everything through the simulated master (dlc.sim.cluster_sim).

Two runs per seed on the same arrivals: with the preference (agents carry ``dlc_rack`` and
``dlc_switch``, gangs prefer one switch, then one rack: DLC's default) and without it (the
same agents without those attributes: gangs best-fit node by node, as before). For each gang
placed, "fits" means that at the start of its offer round some switch had ``nodes`` agents
each with the gang's GPUs, CPUs and memory free (so a gang that the jobs placed ahead of it
in the same round crowded out still counts: the share is conservative). Reported: the share
of fitting gangs placed under one switch, the share of all gangs under one switch and one
rack, the mean and p95 gang wait, and the GPU allocation over the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from pathlib import Path

from dlc.cli.simulate_cmd import parse_seeds
from dlc.scheduler.core.facade import CoreConfig
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.sim.cluster_sim.engine import EngineParams, WorkItem
from dlc.sim.cluster_sim.racks import (
    AGENTS_PER_SWITCH,
    EXECUTOR_CPUS,
    EXECUTOR_MEM,
    SWITCHES_PER_RACK,
    RackEngine,
    racked_agents,
)


def workload(seed: int, hours: float, gpus_total: int, load: float = 0.85) -> list[WorkItem]:
    """Poisson arrivals of single-node jobs and gangs at ``load`` of ``gpus_total``."""
    rng = random.Random(seed)
    shapes = [((1, 1), 0.40, 3600), ((2, 1), 0.15, 3600), ((4, 1), 0.10, 3600),
              ((8, 1), 0.10, 3600), ((8, 2), 0.10, 10800), ((4, 2), 0.05, 10800),
              ((8, 3), 0.05, 10800), ((8, 4), 0.05, 10800)]  # fmt: skip
    mean_gpu_s = sum(g * n * p * d for (g, n), p, d in shapes)
    rate = load * gpus_total / mean_gpu_s  # arrivals per second
    items, at, n = [], 0.0, 0
    while True:
        at += rng.expovariate(rate)
        if at > hours * 3600:
            return items
        (gpus, nodes), _, mean = rng.choices(shapes, [p for _, p, _ in shapes])[0]
        spec = JobSpec(image="sim/train:1", gpus=gpus, nodes=nodes, cpus=4.0 * gpus,
                       mem_mib=16384 * gpus, name=f"j{n}")  # fmt: skip
        work = max(60.0, rng.expovariate(1 / mean))
        items.append(WorkItem(f"j{n}", "training", f"u{n % 8}", "-", at, spec, work))
        n += 1


def run(seed: int, args, advertise: bool) -> dict:
    agents, where = racked_agents(args.agents, advertise)
    items = workload(seed, args.hours, 8 * args.agents)
    config = CoreConfig(placement=PlacementConfig(policy="tree", executor_cpus=EXECUTOR_CPUS,
                                                  executor_mem_mib=EXECUTOR_MEM))  # fmt: skip
    engine = RackEngine(agents, config, where, params=EngineParams(tick_s=600.0))
    for item in items:
        engine.add(item)
    started = time.perf_counter()
    result = engine.run(args.hours * 3600)
    notes = engine.notes
    fitting = [n for n in notes if n.fits_switch]
    waits = sorted(
        r.first_start - r.submitted for r in result.records.values()
        if r.item.spec.nodes > 1 and r.first_start is not None
    )  # fmt: skip
    gpu_s = sum((i.end - i.start) for i in result.intervals if i.end is not None)
    return {
        "seed": seed,
        "preference": advertise,
        "gangs": len(notes),
        "fit_one_switch": len(fitting),
        "fit_placed_one_switch": sum(1 for n in fitting if n.switches == 1),
        "one_switch": sum(1 for n in notes if n.switches == 1),
        "one_rack": sum(1 for n in notes if n.racks == 1),
        "gang_wait_mean_s": statistics.fmean(waits) if waits else 0.0,
        "gang_wait_p95_s": waits[int(0.95 * (len(waits) - 1))] if waits else 0.0,
        "allocation": gpu_s / (8 * args.agents * args.hours * 3600),
        "jobs": len(items),
        "problems": len(result.problems),
        "wall_s": time.perf_counter() - started,
    }


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def table(rows: list[dict]) -> str:
    """The markdown table docs/scheduler.md quotes: per seed and preference, then totals."""
    out = ["| seed | preference | gangs | fit one switch | of those placed in one | all gangs "
           "in one switch | in one rack | gang wait mean / p95 (min) | GPU allocation |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        out.append(
            f"| {r['seed']} | {'on' if r['preference'] else 'off'} | {r['gangs']} | "
            f"{r['fit_one_switch']} | {_pct(r['fit_placed_one_switch'], r['fit_one_switch'])} | "
            f"{_pct(r['one_switch'], r['gangs'])} | {_pct(r['one_rack'], r['gangs'])} | "
            f"{r['gang_wait_mean_s'] / 60:.1f} / {r['gang_wait_p95_s'] / 60:.1f} | "
            f"{100 * r['allocation']:.1f}% |"
        )
    for pref in (True, False):
        sub = [r for r in rows if r["preference"] is pref]
        if not sub:
            continue
        keys = ("gangs", "fit_one_switch", "fit_placed_one_switch", "one_switch", "one_rack")
        total = {k: sum(r[k] for r in sub) for k in keys}
        out.append(
            f"| all | {'on' if pref else 'off'} | {total['gangs']} | {total['fit_one_switch']} | "
            f"{_pct(total['fit_placed_one_switch'], total['fit_one_switch'])} | "
            f"{_pct(total['one_switch'], total['gangs'])} | "
            f"{_pct(total['one_rack'], total['gangs'])} | "
            f"{statistics.fmean(r['gang_wait_mean_s'] for r in sub) / 60:.1f} / "
            f"{statistics.fmean(r['gang_wait_p95_s'] for r in sub) / 60:.1f} | "
            f"{100 * statistics.fmean(r['allocation'] for r in sub):.1f}% |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    # openb agents carry no dlc_topo: placement warns once per agent that it goes first-fit
    logging.getLogger("dlc.scheduler.placement.gpu_choice").setLevel(logging.ERROR)
    if args.agents % (AGENTS_PER_SWITCH * SWITCHES_PER_RACK):
        ap.error(f"--agents must be a multiple of {AGENTS_PER_SWITCH * SWITCHES_PER_RACK}")
    rows = []
    for seed in parse_seeds(args.seeds):
        for advertise in (True, False):
            rows.append(run(seed, args, advertise))
            print(json.dumps(rows[-1]), file=sys.stderr)
    print(table(rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"agents": args.agents, "hours": args.hours, "agents_per_switch": AGENTS_PER_SWITCH,
                "switches_per_rack": SWITCHES_PER_RACK}  # fmt: skip
        args.json.write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
