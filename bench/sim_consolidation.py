"""Consolidation in the AIStation scenario: 8-GPU jobs' wait and allocation, with and without.

    .venv/bin/python bench/sim_consolidation.py --policies P0,P0c,P1,P1c --seeds 1-10 \\
        --out bench/results/sim_consolidation.json

Runs the scenario of examples/sim/aistation.yaml through the real scheduler core
(dlc/sim/cluster_sim) and prints a Markdown table (mean +- 95% interval over the seeds) of the
metrics that the consolidation target of issue 28 names; docs/scheduler.md keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dlc.sim.cluster_sim.runs import run_all, summarise
from dlc.sim.cluster_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
METRICS = (
    ("training_wait_p95_min_8gpu", "8-GPU training wait p95 (min)", "{:.0f}"),
    ("training_wait_p50_min_8gpu", "8-GPU training wait p50 (min)", "{:.0f}"),
    ("training_wait_p95_min", "training wait p95 (min)", "{:.0f}"),
    ("allocation_ratio", "allocation ratio", "{:.3f}"),
    ("training_completed_per_week", "training jobs completed / week", "{:.1f}"),
    ("consolidation_moves_per_week", "consolidation moves / week", "{:.1f}"),
    ("consolidation_gpu_h_bound_per_week", "GPU-h lost to moves / week (bound)", "{:.1f}"),
    ("preempted_gpu_h_lost_per_week", "GPU-h lost to all preemption / week (sim)", "{:.2f}"),
    ("preemptions_per_week", "preemptions / week (incl. moves)", "{:.1f}"),
    ("session_wait_p95_min", "session wait p95 (min)", "{:.1f}"),
)


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def _append(out: str, rows: list[dict]) -> None:
    """Save each run's rows as it ends (a long run cut short keeps what it did)."""
    with open(f"{out}.rows", "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def table(summary: list[dict], policies: list[str]) -> str:
    by = {row["policy"]: row["metrics"] for row in summary}
    lines = ["| metric | " + " | ".join(policies) + " |", "|---" * (len(policies) + 1) + "|"]
    for key, label, fmt in METRICS:
        cells = []
        for p in policies:
            stat = by[p].get(key, {})
            mean, ci = stat.get("mean"), stat.get("ci95")
            cells.append(
                "-"
                if mean is None
                else fmt.format(mean) + ("" if ci is None else " ± " + fmt.format(ci))
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(ROOT / "examples/sim/aistation.yaml"))
    ap.add_argument("--policies", default="P0,P0c,P1,P1c")
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--days", type=float, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--set", default="", help='scenario overrides, "FIELD=VALUE;..."')
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    started = time.time()
    scenario = load_scenario(Path(args.scenario))
    for pair in filter(None, args.set.split(";")):
        field, _, value = pair.partition("=")
        scenario = scenario.with_value(field.strip(), _number(value.strip()))
    rows = run_all(
        scenario,
        policies,
        _seeds(args.seeds),
        jobs=args.jobs,
        days=args.days,
        progress=lambda n, t: print(f"{n}/{t} runs", file=sys.stderr),
        on_rows=(lambda part: _append(args.out, part)) if args.out else None,
    )
    summary = summarise(rows)
    if args.out:  # the rows went to OUT.rows as they came; the summary goes to OUT
        Path(args.out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    print(table(summary, policies))
    print(f"\n{len(rows)} runs in {time.time() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
