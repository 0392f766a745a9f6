"""The AIStation scenario under P0-P4 (docs/simulator.md, "Mesos-driven simulator").

Runs ``examples/sim/aistation.yaml`` through DLC's scheduler core on simulated Mesos agents:
the policies over seeds (95% intervals) at several session SM duty cycles, sweeps of the
assumptions that drive the result, and the cards needed for the SLOs (``cluster.nodes``
swept). Prints tables, writes ``bench/results/sim_aistation.json`` and plots beside it::

    .venv/bin/python bench/sim_aistation.py --seeds 1-10 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlc.cli.simulate_cmd import parse_seeds  # noqa: E402
from dlc.sim.cluster_sim import report  # noqa: E402
from dlc.sim.cluster_sim.runs import run_all, summarise  # noqa: E402
from dlc.sim.cluster_sim.scenario import load_scenario  # noqa: E402


def _cards_needed(summary: list[dict], per_node: int) -> dict:
    """Per policy: the fewest cards whose mean session p95 start (and training JCT p95)
    meets the SLOs, among the swept node counts (``None``: none of them)."""
    out: dict[str, dict] = {}
    for row in sorted(summary, key=lambda r: r["sweep"][1]):
        nodes = row["sweep"][1]
        m = row["metrics"]
        pol = out.setdefault(
            row["policy"], {"session_slo": None, "both_slos": None, "by_cards": {}}
        )
        s95 = m["session_wait_p95_min"]["mean"]
        j95 = m["training_jct_over_isolated_p95"]["mean"]
        pol["by_cards"][nodes * per_node] = {"session_wait_p95_min": s95, "jct_p95": j95}
        if pol["session_slo"] is None and s95 is not None and s95 <= 2.0:
            pol["session_slo"] = nodes * per_node
        if pol["both_slos"] is None and m["slo_met"]["mean"] == 1.0:
            pol["both_slos"] = nodes * per_node
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "examples/sim/aistation.yaml"))
    parser.add_argument("--policies", default="P0,P1,P2,P3,P4")
    parser.add_argument("--seeds", default="1-10")
    parser.add_argument("--sweep-seeds", default="1-5", help="seeds of the sweeps")
    parser.add_argument("--activity", default="0.05,0.10,0.15,0.30")
    parser.add_argument("--sweeps", default="sessions.median_hours=1,4;"
                        "training.outstanding_per_user=1,4")  # fmt: skip
    parser.add_argument("--nodes", default="2,3,4,5,6", help="cluster.nodes for cards needed")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench/results"))
    parser.add_argument(
        "--part",
        choices=("all", "main", "sweeps", "cards", "summarise"),
        default="all",
        help="run one part (each writes sim_aistation-PART.json)",
    )
    args = parser.parse_args()

    scenario = load_scenario(Path(args.scenario))
    policies = args.policies.split(",")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)  # bench/results/ is gitignored: absent in a clone
    started = time.time()
    duties = [float(d) for d in args.activity.split(",")]
    parts = ("main", "sweeps", "cards") if args.part == "all" else (args.part,)
    payload = {
        "scenario": scenario.name, "sections": scenario.sections, "policies": scenario.policies,
        "command": " ".join(sys.argv),
    }  # fmt: skip
    plots: list[Path] = []
    if args.part == "summarise":
        lines = (out_dir / "sim_aistation-main.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        summary = summarise(rows)
        report.print_table(summary, "aistation")
        payload["main"] = {"runs": rows, "summary": summary}
        plots += report.plot(summary, out_dir / "sim_aistation", "aistation")
        for duty in sorted({r["sm_duty"] for r in summary}):
            print(f"\nsession SM duty {duty:g}, seeds {sorted({r['seed'] for r in rows})}:")
            print(report.markdown(summary, duty))
    if "main" in parts:
        duties = [float(d) for d in args.activity.split(",")]
        partial = out_dir / "sim_aistation-main.jsonl"
        partial.unlink(missing_ok=True)

        def save(part: list[dict]) -> None:
            with partial.open("a") as f:
                f.writelines(json.dumps(r, default=str) + "\n" for r in part)

        rows = run_all(scenario, policies, parse_seeds(args.seeds), None, duties, args.jobs,
                       on_rows=save)  # fmt: skip
        summary = summarise(rows)
        report.print_table(summary, "aistation")
        payload["main"] = {"runs": rows, "summary": summary}
        plots += report.plot(summary, out_dir / "sim_aistation", "aistation")
    if "sweeps" in parts:
        rows = []
        for text in filter(None, args.sweeps.split(";")):
            field, _, values = text.partition("=")
            swept = (field, [float(v) if "." in v else int(v) for v in values.split(",")])
            rows += run_all(scenario, policies, parse_seeds(args.sweep_seeds), swept, (), args.jobs)
        summary = summarise(rows)
        report.print_table(summary, "aistation-sweeps")
        payload["sweeps"] = {"runs": rows, "summary": summary}
        plots += report.plot(summary, out_dir / "sim_aistation", "aistation-sweep")
    if "cards" in parts:
        nodes = ("cluster.nodes", [int(n) for n in args.nodes.split(",")])
        rows = run_all(scenario, policies, parse_seeds(args.sweep_seeds), nodes, (), args.jobs)
        cards = _cards_needed(summarise(rows), scenario["cluster"]["gpus_per_node"])
        for policy, found in cards.items():
            print(f"cards needed {policy}: session SLO {found['session_slo']}, "
                  f"both SLOs {found['both_slos']}; {found['by_cards']}")  # fmt: skip
        payload["cards_needed"] = {"runs": rows, "found": cards}
    payload["wall_s"] = round(time.time() - started, 1)
    name = "sim_aistation.json" if args.part == "all" else f"sim_aistation-{args.part}.json"
    report.write_json(out_dir / name, payload)
    print(f"wrote {out_dir / name} and {len(plots)} plots in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
