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
        if args.plot:  # the mean curves of every policy found for --trace, from the files
            plot_from(args.table, args.trace, args.plot)
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
    """One row per trace found in ``paths`` (later files win) with both FGD and DLC runs;
    DLC with the share hold (``dlc-admit``) is added where a file has it."""
    traces: dict[str, dict] = {}
    for path in paths:
        for trace, res in io.read_json(path)["traces"].items():
            traces.setdefault(trace, {}).update(res["policies"])
    rows = []
    for trace, pols in sorted(traces.items()):
        if "fgd" not in pols or "dlc" not in pols:
            continue
        pub = pols["fgd"].get("published_mean_curve")
        row = {"trace": trace, "fgd_published": None if pub is None else pub[130]}
        for name in ("fgd", "dlc", "dlc-admit"):
            if name not in pols:
                continue
            key = name.replace("-", "_")
            mean, ci95, seeds = _pick(pols[name])
            row.update({key: mean, f"{key}_ci95": ci95, f"{key}_seeds": seeds})
            row[f"{key}_failed_pods"] = pols[name].get("failed_pods_mean")
            row[f"{key}_seconds_per_replay"] = pols[name]["seconds_per_replay"]
        row["dlc_minus_fgd"] = row["dlc"] - row["fgd"]
        rows.append(row)
    return rows


def _ci(mean: float, half: float | None) -> str:
    return f"{mean:.2f}" if half is None or half != half else f"{mean:.2f} ± {half:.2f}"


def _versus(row: dict, key: str) -> str:
    """``+0.45`` and a verdict: a win or a loss only where the 95% intervals do not overlap."""
    diff = row[key] - row["fgd"]
    apart = abs(diff) > (row.get(f"{key}_ci95") or 0) + (row.get("fgd_ci95") or 0)
    verdict = "" if not apart or row[f"{key}_seeds"] < 2 else (" win" if diff > 0 else " LOSS")
    if diff <= 0 and not verdict:
        verdict = " (not ahead)"
    return f"{diff:+.2f}{verdict}"


def plot_from(paths: list[Path], trace: str, out: Path) -> None:
    """Plot the mean curves of every policy that ``paths`` hold for ``trace`` (later files win)."""
    pols: dict[str, dict] = {}
    for path in paths:
        pols.update(io.read_json(path)["traces"].get(trace, {}).get("policies", {}))
    order = [name for name in POLICIES if name in pols]
    order += sorted(name for name in pols if name.startswith("dlc-admit:"))
    curves = {label(n): _array(pols[n]["mean_curve"]) for n in order}
    pub = {
        label(n): _array(pols[n]["published_mean_curve"])
        for n in order
        if "published_mean_curve" in pols[n]
    }
    seeds = sorted({len(pols[n]["seeds"]) for n in order})
    plot_curves(curves, out, f"openb {trace}, mean of {'/'.join(map(str, seeds))} seeds", pub)
    print(f"wrote {out}")


def _array(values: list) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def print_dlc_vs_fgd(paths: list[Path], out: Path) -> int:
    """Markdown table of DLC (and DLC with the share hold) against FGD at 130% per trace;
    the rows also go to ``out``."""
    rows = dlc_vs_fgd(paths)
    print(
        "| trace | seeds | FGD (ours) | FGD published | DLC | DLC - FGD "
        "| DLC + hold | hold - FGD | failed pods FGD / DLC / hold |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        pub = "-" if r["fgd_published"] is None else f"{r['fgd_published']:.2f}"
        seeds = {r["fgd_seeds"], r["dlc_seeds"], r.get("dlc_admit_seeds", r["dlc_seeds"])}
        hold, hold_diff, hold_failed = "-", "-", "-"
        if "dlc_admit" in r:
            hold, hold_diff = _ci(r["dlc_admit"], r["dlc_admit_ci95"]), _versus(r, "dlc_admit")
            hold_failed = f"{r['dlc_admit_failed_pods']:.0f}"
        failed = f"{r['fgd_failed_pods']:.0f} / {r['dlc_failed_pods']:.0f} / {hold_failed}"
        seeds_text = "/".join(map(str, sorted(seeds)))
        print(
            f"| {r['trace']} | {seeds_text} | {_ci(r['fgd'], r['fgd_ci95'])} "
            f"| {pub} | {_ci(r['dlc'], r['dlc_ci95'])} | {_versus(r, 'dlc')} | {hold} "
            f"| {hold_diff} | {failed} |"
        )
    io.write_json(out, {"machine": platform.platform(), "rows": rows})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
