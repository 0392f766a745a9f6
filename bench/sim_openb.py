"""Validate the simulator's baselines against the FGD paper's published curves.

Usage::

    .venv/bin/python bench/sim_openb.py [--trace default] [--policies all] [--seeds 42-51]
        [--json bench/results/sim_openb.json] [--plot docs/images/sim-default.png]

For each policy: the mean over seeds of our allocation curve at every 1% step of
arrived demand against the mean of the published ``analysis_allo_discrete.csv``
curves, the largest absolute difference over the steps (the issue's bar: 1 point
on ``default``), and the wall time of one full replay on this machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np

from dlc.cli.simulate_cmd import parse_seeds
from dlc.sim import io
from dlc.sim.plot import plot_curves
from dlc.sim.policies import POLICIES, label
from dlc.sim.report import experiment, print_table, to_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="default")
    ap.add_argument("--policies", default="all")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--json", type=Path, default=Path("bench/results/sim_openb.json"))
    ap.add_argument("--plot", type=Path)
    ap.add_argument(
        "--table", nargs="+", type=Path, help="print the DLC vs FGD table of these JSONs and stop"
    )
    args = ap.parse_args(argv)
    if args.table:
        return print_dlc_vs_fgd(args.table, args.json)
    root = io.trace_root()
    pols = list(POLICIES) if args.policies == "all" else args.policies.split(",")
    traces = io.available_traces(root) if args.trace == "all" else args.trace.split(",")
    out = {"machine": platform.platform(), "python": sys.version.split()[0], "traces": {}}
    if args.json.exists():  # add to earlier traces of the same file (a sweep run in parts)
        out["traces"] = io.read_json(args.json).get("traces", {})
    for trace in traces:
        res = experiment(root, [trace], pols, parse_seeds(args.seeds), 1.3)[trace]
        print_table(trace, res)
        print(f"{'policy':14s} {'max |ours-published|':>22s} {'at step':>8s} {'s/replay':>9s}")
        for name, runs in res["runs"].items():
            pub = res["published"].get(name)
            secs = np.mean(runs.seconds)
            if pub is None:
                print(f"{label(name):14s} {'-':>22s} {'-':>8s} {secs:9.1f}")
                continue
            diff = np.abs(runs.mean_curve() - pub)
            worst, at = np.nanmax(diff), int(np.nanargmax(diff))
            print(f"{label(name):14s} {worst:22.2f} {at:8d} {secs:9.1f}")
        out["traces"][trace] = to_json(res)
        if args.plot and len(traces) == 1:
            curves = {label(n): r.mean_curve() for n, r in res["runs"].items()}
            pub = {label(n): c for n, c in res["published"].items() if n in res["runs"]}
            seeds = runs.seeds
            what = f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of {len(seeds)} seeds"
            plot_curves(curves, args.plot, f"openb {trace}, {what}", pub)
        io.write_json(args.json, out)  # after every trace, so a long sweep leaves partial results
        print(f"wrote {args.json} ({trace})", flush=True)
    return 0


def _pick(entry: dict) -> tuple[float, float, int]:
    ci = entry["alloc_130"]
    return ci["mean"], ci["ci95"], len(entry["seeds"])


def dlc_vs_fgd(paths: list[Path]) -> list[dict]:
    """One row per trace found in ``paths`` (later files win) with both FGD and DLC runs."""
    traces: dict[str, dict] = {}
    for path in paths:
        for trace, res in io.read_json(path)["traces"].items():
            traces.setdefault(trace, {}).update(res["policies"])
    rows = []
    for trace, pols in sorted(traces.items()):
        if "fgd" not in pols or "dlc" not in pols:
            continue
        fgd, dlc = pols["fgd"], pols["dlc"]
        pub = fgd.get("published_mean_curve")
        (fm, fci, fn), (dm, dci, dn) = _pick(fgd), _pick(dlc)
        rows.append(
            {
                "trace": trace,
                "fgd": fm,
                "fgd_ci95": fci,
                "fgd_seeds": fn,
                "fgd_published": None if pub is None else pub[130],
                "dlc": dm,
                "dlc_ci95": dci,
                "dlc_seeds": dn,
                "dlc_minus_fgd": dm - fm,
                "dlc_seconds_per_replay": dlc["seconds_per_replay"],
                "fgd_seconds_per_replay": fgd["seconds_per_replay"],
            }
        )
    return rows


def print_dlc_vs_fgd(paths: list[Path], out: Path) -> int:
    """Markdown table of DLC against FGD at 130% per trace; the rows also go to ``out``."""

    def ci(m, h):
        return f"{m:.2f}" if h is None or h != h else f"{m:.2f} ± {h:.2f}"

    rows = dlc_vs_fgd(paths)
    print("| trace | seeds | FGD (ours) | FGD published | DLC | DLC - FGD | DLC - published FGD |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        pub = "-" if r["fgd_published"] is None else f"{r['fgd_published']:.2f}"
        diff = r["dlc_minus_fgd"]
        verdict = "" if diff > 0 else " (loses)"
        seeds = str(r["dlc_seeds"]) if r["dlc_seeds"] == r["fgd_seeds"] else "?"
        vs_pub = "-" if r["fgd_published"] is None else f"{r['dlc'] - r['fgd_published']:+.2f}"
        print(
            f"| {r['trace']} | {seeds} | {ci(r['fgd'], r['fgd_ci95'])} | {pub} "
            f"| {ci(r['dlc'], r['dlc_ci95'])} | {diff:+.2f}{verdict} | {vs_pub} |"
        )
    io.write_json(out, {"machine": platform.platform(), "rows": rows})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
