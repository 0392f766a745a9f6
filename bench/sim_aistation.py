"""The AIStation scenario under P0-P4 (docs/simulator.md, "Mesos-driven simulator").

Runs ``examples/sim/aistation.yaml`` through DLC's scheduler core on simulated Mesos agents:
the policies over seeds (95% intervals) at several session SM duty cycles, sweeps of the
assumptions that drive the result, and the cards needed for the SLOs (per policy and seed,
``cluster.nodes`` grown until both SLOs hold). Prints tables, writes
``bench/results/sim_aistation[-PART][TAG].json`` and plots beside it::

    .venv/bin/python bench/sim_aistation.py --seeds 1-10 --jobs 2
    .venv/bin/python bench/sim_aistation.py --part cards --sweep-seeds 1-10 --jobs 1 \
        --tag=-open064 --set "training.outstanding_per_user=0;\
        training.open_per_user_per_day=0.64;quotas.scale_with_cluster=true"
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
from dlc.errors import FieldError  # noqa: E402
from dlc.sim.cluster_sim import report  # noqa: E402
from dlc.sim.cluster_sim.runs import cards_table, run_all, search_cards, summarise  # noqa: E402
from dlc.sim.cluster_sim.scenario import load_scenario  # noqa: E402


def _value(text: str):
    """A ``--set``/``--sweeps`` value: true/false, an int, a float or a [lo, hi] list."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    try:
        if text.startswith("["):
            return [float(v) for v in text.strip("[]").split("/")]
        return float(text) if "." in text else int(text)
    except ValueError:
        raise FieldError("--set", f"{text!r} is not true/false, a number or [lo/hi]") from None


def _print_cards(found: dict) -> None:
    for policy, f in found.items():
        line = (f"cards needed {policy}: both SLOs {f['both_mean']} ± {f['both_ci95']} "
                f"({f['both_unmet_seeds']} seeds unmet), session SLO {f['session_mean']} "
                f"± {f['session_ci95']}")  # fmt: skip
        if "fewer_cards_mean" in f:
            line += f"; fewer cards than P0: {f['fewer_cards_mean']} ± {f['fewer_cards_ci95']}"
        print(line)
        print("   per seed:", {k: v["both"] for k, v in f["per_seed"].items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "examples/sim/aistation.yaml"))
    parser.add_argument("--policies", default="P0,P1,P2,P3,P4")
    parser.add_argument("--seeds", default="1-10")
    parser.add_argument("--sweep-seeds", default="1-5", help="seeds of the sweeps")
    parser.add_argument("--activity", default="0.05,0.10,0.15,0.30")
    parser.add_argument("--sweeps", default="sessions.median_hours=1,4;"
                        "training.outstanding_per_user=1,4")  # fmt: skip
    parser.add_argument("--nodes", default="2-16", help="cluster.nodes tried for cards needed")
    parser.add_argument(
        "--set",
        default="",
        help="FIELD=VALUE;... applied to the scenario "
        "first, e.g. training.open_per_user_per_day=0.64 (lists: [12/19])",
    )
    parser.add_argument("--days", type=float, default=None, help="simulated days (default: file)")
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench/results"))
    parser.add_argument(
        "--part",
        choices=("all", "main", "sweeps", "cards", "summarise", "cards-summarise"),
        default="all",
        help="run one part (each writes sim_aistation-PART.json)",
    )
    args = parser.parse_args()

    scenario = load_scenario(Path(args.scenario))
    for text in filter(None, args.set.split(";")):
        field, _, value = text.partition("=")
        scenario = scenario.with_value(field.strip(), _value(value))
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
    if args.part == "cards-summarise":  # the table again from a cards run's saved rows
        rows = []  # --tag=-a,-b merges runs made in parts (other policies or seeds)
        for tag in args.tag.split(","):
            lines = (out_dir / f"sim_aistation-cards{tag}.jsonl").read_text().splitlines()
            rows += [json.loads(line) for line in lines if line.strip()]
        found = cards_table(rows, scenario["cluster"]["gpus_per_node"], "P0")
        _print_cards(found)
        print(report.cards_markdown(found))
        payload["cards_needed"] = {"runs": rows, "found": found, "summary": summarise(rows)}
        name = f"cards{args.tag.split(',')[0]}"
        plots += report.plot_cards(found, out_dir / "sim_aistation" / name, f"aistation {name}")
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
            swept = (field, [_value(v) for v in values.split(",")])
            rows += run_all(scenario, policies, parse_seeds(args.sweep_seeds), swept, (), args.jobs,
                            days=args.days)  # fmt: skip
        summary = summarise(rows)
        report.print_table(summary, "aistation-sweeps")
        payload["sweeps"] = {"runs": rows, "summary": summary}
        plots += report.plot(summary, out_dir / "sim_aistation", "aistation-sweep")
    if "cards" in parts:
        partial = out_dir / f"sim_aistation-cards{args.tag}.jsonl"
        partial.unlink(missing_ok=True)

        def save_cards(part: list[dict]) -> None:
            with partial.open("a") as f:
                f.writelines(json.dumps(r, default=str) + "\n" for r in part)

        rows = search_cards(scenario, policies, parse_seeds(args.sweep_seeds),
                            parse_seeds(args.nodes), args.jobs, args.days, save_cards)  # fmt: skip
        per_node = scenario["cluster"]["gpus_per_node"]
        found = cards_table(rows, per_node, "P0" if "P0" in policies else None)
        _print_cards(found)
        print(report.cards_markdown(found))
        payload["cards_needed"] = {"runs": rows, "found": found, "summary": summarise(rows)}
        name = f"cards{args.tag}"
        plots += report.plot_cards(found, out_dir / "sim_aistation" / name, f"aistation {name}")
    payload["wall_s"] = round(time.time() - started, 1)
    name = "sim_aistation.json" if args.part == "all" else f"sim_aistation-{args.part}.json"
    name = name.replace(".json", f"{args.tag.split(',')[0]}.json")
    report.write_json(out_dir / name, payload)
    print(f"wrote {out_dir / name} and {len(plots)} plots in {time.time() - started:.0f} s")


if __name__ == "__main__":
    from dlc.errors import DlcError

    try:
        main()
    except DlcError as exc:  # a bad --set/--sweeps field or value: one line, no traceback
        sys.exit(f"error: {exc}")
