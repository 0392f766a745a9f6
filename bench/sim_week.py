"""A simulated week with every scheduling feature on and each one off (issue 28's figures).

    nice -n 10 .venv/bin/python bench/sim_week.py --seeds 1-10 --jobs 2 \\
        --json bench/results/sim_week.json --md bench/results/sim_week.md

Two workloads through DLC's real scheduler core in the Mesos-driven simulator
(dlc/sim/cluster_sim/week.py): the AIStation scenario (policy P1 with open training
arrivals) and a multi-node workload on openb-sized 8-GPU agents in switches and racks, with
groups of equal weight and uneven demand. Each runs with all features on (fair share over
time, consolidation, gang topology, protected runtime), each feature off in turn, and all
off, on the same arrivals per seed. Prints a Markdown table per workload (mean ± 95% t
interval over the seeds) and the issue's targets, met or missed, with the figures; exits 1
on a missed target (``--no-fail``: 0). ``--quick`` is the CI smoke size (one seed, one
simulated day). Each run's row is appended to ``JSON.rows`` as it ends;
``--from-rows`` summarises those rows again without simulating.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlc.cli.simulate_cmd import parse_seeds  # noqa: E402
from dlc.sim.cluster_sim import week  # noqa: E402
from dlc.sim.cluster_sim.runs import mean_ci  # noqa: E402
from dlc.sim.cluster_sim.scenario import Scenario, load_scenario  # noqa: E402

WORKLOADS = ("aistation", "multinode")
#: the AIStation scenario's training as open arrivals (docs/simulator.md, consolidation)
AISTATION_SET = {"training.outstanding_per_user": 0, "training.open_per_user_per_day": 0.5}
METRICS = (
    ("jain", "Jain's index, decayed GPU-h / weight", "{:.3f}"),
    ("wait_p95_min_8gpu", "8-GPU jobs' wait p95 (min)", "{:.0f}"),
    ("wait_p95_min_multinode", "multi-node jobs' wait p95 (min)", "{:.0f}"),
    ("lost_gpu_h_preemption", "GPU-h lost to preemption (sim)", "{:.1f}"),
    ("lost_gpu_h_consolidation", "GPU-h lost to consolidation (sim)", "{:.1f}"),
    ("lost_gpu_h_consolidation_bound", "GPU-h lost to consolidation (core's bound)", "{:.1f}"),
    ("preemptions", "preemptions (not moves)", "{:.1f}"),
    ("moves", "consolidation moves", "{:.1f}"),
    ("allocation", "allocation ratio", "{:.3f}"),
    ("gangs_in_one_switch", "gangs that fit one switch placed in one", "{:.1%}"),
    ("jobs", "jobs submitted", "{:.0f}"),
)
#: the waits the consolidation target names
WAITS = (("wait_p95_min_8gpu", "8-GPU"), ("wait_p95_min_multinode", "multi-node"))
#: (workload, variant) pairs not run: the AIStation scenario has no gangs, so gang topology
#: off is the same run as all on
SKIP = {("aistation", "no-topology")}


def _scenario(days: float | None) -> Scenario:
    scenario = load_scenario(ROOT / "examples/sim/aistation.yaml")
    for path, value in AISTATION_SET.items():
        scenario = scenario.with_value(path, value)
    return replace(scenario, days=days) if days else scenario


def _one(task: tuple[str, str, int, float | None, int]) -> dict:
    """One run (a worker process): ``(workload, variant, seed, days, agents)`` -> its row."""
    logging.disable(logging.WARNING)  # openb agents carry no dlc_topo: placement goes first-fit
    workload, variant, seed, days, agents = task
    started = time.perf_counter()
    features = week.VARIANTS[variant]
    if workload == "aistation":
        metrics = week.aistation_run(_scenario(days), features, seed)
    else:
        load = week.MultiNode(agents=agents, days=days or 7.0)
        metrics = week.multinode_run(load, features, seed)
    return {"workload": workload, "variant": variant, "seed": seed, "metrics": metrics,
            "wall_s": time.perf_counter() - started}  # fmt: skip


def run_all(tasks: list[tuple], jobs: int, rows_path: Path | None) -> list[dict]:
    """Every task's row, in task order; each appended to ``rows_path`` as it ends."""
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for row in pool.map(_one, tasks):
            rows.append(row)
            m = row["metrics"]
            print(f"{row['workload']} {row['variant']} seed {row['seed']}: Jain {m['jain']:.3f}, "
                  f"allocation {m['allocation']:.3f}, {row['wall_s']:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
            if rows_path:
                with rows_path.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return rows


def summarise(rows: list[dict]) -> dict:
    """workload -> variant -> metric -> {mean, ci95, n}."""
    out: dict[str, dict] = {}
    for row in rows:
        out.setdefault(row["workload"], {}).setdefault(row["variant"], []).append(row)
    for variants in out.values():
        for variant, members in variants.items():
            stats = {}
            for key, *_ in METRICS:
                mean, ci = mean_ci([m["metrics"].get(key) for m in members])
                stats[key] = {"mean": mean, "ci95": ci}
            stats["seeds"] = sorted(m["seed"] for m in members)
            variants[variant] = stats
    return out


def _paired(rows: list[dict], workload: str, key: str, on: str, off: str, fn) -> list[float]:
    """``fn(value with on, value with off)`` per seed that has both (``None``s dropped)."""
    got = {(r["variant"], r["seed"]): r["metrics"].get(key) for r in rows
           if r["workload"] == workload}  # fmt: skip
    out = []
    for (variant, seed), value in got.items():
        other = got.get((off, seed))
        if variant == on and value is not None and other is not None:
            out.append(fn(value, other))
    return out


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets, each with its figure and whether it is met."""
    out = []
    for workload in WORKLOADS:
        for key, label in WAITS:
            cut = _paired(rows, workload, key, "all", "no-consolidation",
                          lambda a, b: 1.0 - a / b if b else 0.0)  # fmt: skip
            if cut:
                mean, ci = mean_ci(cut)
                out.append({"target": f"{workload}: {label} p95 wait >= 30% lower with "
                            "consolidation (paired by seed)", "value": mean, "ci95": ci,
                            "met": mean >= 0.30, "format": "{:.1%}"})  # fmt: skip
        lost = _paired(rows, workload, "allocation", "all", "no-consolidation",
                       lambda a, b: b - a)  # fmt: skip
        if lost:
            mean, ci = mean_ci(lost)
            out.append({"target": f"{workload}: allocation points lost to consolidation <= 1 "
                        "(paired by seed)", "value": 100 * mean, "ci95": None if ci is None
                        else 100 * ci, "met": mean <= 0.01, "format": "{:+.2f}"})  # fmt: skip
    jain = [r["metrics"]["jain"] for r in rows if (r["workload"], r["variant"]) ==
            ("multinode", "all")]  # fmt: skip
    if jain:
        mean, ci = mean_ci(jain)
        out.append({"target": "multinode (equal weights, uneven demand): Jain's index over the "
                    "week >= 0.95", "value": mean, "ci95": ci, "met": mean >= 0.95,
                    "format": "{:.3f}"})  # fmt: skip
    fit = [r["metrics"] for r in rows if (r["workload"], r["variant"]) == ("multinode", "all")]
    fitting = sum(m["gangs_fit_one_switch"] or 0 for m in fit)
    if fitting:
        placed = sum((m["gangs_in_one_switch"] or 0) * (m["gangs_fit_one_switch"] or 0)
                     for m in fit)  # fmt: skip
        share = placed / fitting
        out.append({"target": f"multinode: >= 90% of the gangs that fit one switch placed in "
                    f"one (pooled over seeds: {round(placed)} of {fitting})", "value": share,
                    "ci95": None, "met": share >= 0.90, "format": "{:.1%}"})  # fmt: skip
    return out


def _cell(stat: dict, fmt: str) -> str:
    mean, ci = stat.get("mean"), stat.get("ci95")
    if mean is None:
        return "-"
    return fmt.format(mean) + ("" if ci is None else " ± " + fmt.format(ci))


def markdown(summary: dict, found: list[dict]) -> str:
    """A table per workload (metrics by variant), then the targets."""
    lines = []
    for workload in WORKLOADS:
        variants = [v for v in week.VARIANTS if v in summary.get(workload, {})]
        if not variants:
            continue
        seeds = summary[workload][variants[0]]["seeds"]
        lines += [f"**{workload}** (seeds {seeds[0]}-{seeds[-1]}, mean ± 95% t interval)", "",
                  "| metric | " + " | ".join(variants) + " |",
                  "|---" * (len(variants) + 1) + "|"]  # fmt: skip
        for key, label, fmt in METRICS:
            cells = [_cell(summary[workload][v][key], fmt) for v in variants]
            if any(c != "-" for c in cells):
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["| target | figure | met |", "|---|---|---|"]
    for t in found:
        value = t["format"].format(t["value"])
        if t["ci95"] is not None:
            value += " ± " + t["format"].replace("+", "").format(t["ci95"])
        lines.append(f"| {t['target']} | {value} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default=None, help="default 1-10 (--quick: 1)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--variants", default=",".join(week.VARIANTS))
    ap.add_argument("--agents", type=int, default=16, help="multinode: 8-GPU agents (x8)")
    ap.add_argument("--days", type=float, default=None, help="simulated days (default: 7)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--quick", action="store_true", help="CI smoke: seed 1, 1 day")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path, help="also write the tables here")
    ap.add_argument("--from-rows", type=Path, help="summarise these saved rows, run nothing")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 on a missed target")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.days = args.seeds or "1", args.days or 1.0
    args.seeds = args.seeds or "1-10"
    for name, known in ((args.workloads, WORKLOADS), (args.variants, tuple(week.VARIANTS))):
        unknown = set(name.split(",")) - set(known)
        if unknown:
            ap.error(f"{', '.join(sorted(unknown))}: not known; use some of {','.join(known)}")
    if args.agents % 8:
        ap.error("--agents must be a multiple of 8 (a rack: 2 switches of 4 agents)")
    started = time.time()
    if args.from_rows:
        rows = [json.loads(line) for line in args.from_rows.read_text().splitlines() if line]
    else:
        tasks = [(w, v, s, args.days, args.agents) for s in parse_seeds(args.seeds)
                 for w in args.workloads.split(",") for v in args.variants.split(",")
                 if (w, v) not in SKIP]  # fmt: skip
        rows_path = args.json.with_suffix(".rows.jsonl") if args.json else None
        if rows_path:
            rows_path.parent.mkdir(parents=True, exist_ok=True)
            rows_path.write_text("")
        rows = run_all(tasks, args.jobs, rows_path)
    summary, found = summarise(rows), targets(rows)
    text = markdown(summary, found)
    print(text)
    if args.json:
        meta = {"seeds": args.seeds, "days": args.days or 7.0, "agents": args.agents,
                "aistation_set": AISTATION_SET, "half_life_s": week.HALF_LIFE_S,
                "moves_per_hour": week.MOVES_PER_HOUR, "protect": week.PROTECT,
                "wall_s": round(time.time() - started)}  # fmt: skip
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "targets": found,
                                         "rows": rows}, indent=1) + "\n")  # fmt: skip
    if args.md:
        args.md.write_text(text)
    missed = [t["target"] for t in found if not t["met"]]
    for name in missed:
        print(f"missed: {name}", file=sys.stderr)
    return 1 if missed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
