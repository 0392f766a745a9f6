"""The openb variant table: DLC through the production engine against FGD, seed by seed.

Regenerates the README's variant table, its JSON and the difference plot from the result
folders alone (see ``bench/results/sim_variants11/commit.txt`` for the runs)::

    .venv/bin/python bench/sim_variants_table.py \\
        bench/results/sim_variants11/dlc/* bench/results/sim_variants10/fgd/* \\
        --cpu-only bench/results/sim_variants10/cpu_only/* \\
        --json bench/results/sim_variants11/table.json \\
        --plot docs/images/sim-variants-diff.svg

Each folder holds a ``results.json`` that ``dlc simulate openb --out`` (or
``bench/sim_engine_knobs.py``) wrote; later folders win for the same trace, policy and seed.
The ``dlc`` curves are compared, seed by seed, with the published FGD curve of the same seed;
where a trace has no published FGD curve, with our FGD re-implementation (``fgd`` in the
folders) on the same seeds. "win" or "LOSS" only where the 95% interval of the per-seed
differences at 130% excludes 0, "level" otherwise.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from svg_compact import compact_svg  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.metrics import mean_ci  # noqa: E402

MARGIN = 0.25  # the margin: no step more than this below FGD
END = 130

# Our FGD re-implementation at 130%, 10 seeds 42-51 (mean, 95% half-width): the old variant
# table (README at ee6e4cd). dlc/sim's FGD code (policies/fgd.py, base.py, frag.py, cluster.py,
# replay.py, workload.py, trace.py) has not changed since that table was made (65973b2).
OLD_FGD: dict[str, tuple[float, float]] = {
    "cpu0": (95.01, 0.09), "cpu037": (95.27, 0.07), "cpu050": (94.97, 0.11),
    "cpu072": (95.29, 0.07), "cpu100": (95.19, 0.09), "cpu200": (94.12, 0.19),
    "cpu235": (92.33, 0.21), "cpu250": (91.64, 0.19), "cpu300": (85.57, 0.27),
    "default": (95.28, 0.09), "gpushare100": (86.68, 0.11), "gpushare20": (96.45, 0.11),
    "gpushare40": (94.02, 0.11), "gpushare60": (91.27, 0.11), "gpushare80": (89.07, 0.08),
    "gpuspec05": (95.16, 0.08), "gpuspec10": (94.72, 0.09), "gpuspec20": (94.68, 0.14),
    "gpuspec25": (94.55, 0.08), "gpuspec33": (94.61, 0.09), "multigpu20": (95.60, 0.13),
    "multigpu30": (96.39, 0.08), "multigpu40": (96.98, 0.05), "multigpu50": (97.17, 0.06),
}  # fmt: skip

Curves = dict[str, dict[str, dict[int, np.ndarray]]]  # trace -> policy -> seed -> 131 values


def _array(values: list) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def read(folders: list[Path]) -> tuple[Curves, dict[str, dict[int, float]]]:
    """Curves per trace, policy and seed, and DLC's failed pods per trace and seed."""
    curves: Curves = {}
    failed: dict[str, dict[int, float]] = {}
    for folder in folders:
        path = folder / "results.json" if folder.is_dir() else folder
        if not path.is_file():  # a run still going, or an unmatched glob
            print(f"skipped {folder}: no results.json", file=sys.stderr)
            continue
        for trace, entry in io.read_json(path).items():
            for name, policy in entry["policies"].items():
                for seed, curve in policy["curves"].items():
                    curves.setdefault(trace, {}).setdefault(name, {})[int(seed)] = _array(curve)
                if name == "dlc" and len(policy["curves"]) == 1:
                    seed = int(next(iter(policy["curves"])))
                    failed.setdefault(trace, {})[seed] = policy["failed_pods_mean"]
    return curves, failed


def seed_text(seeds: list[int]) -> str:
    """``42-46`` for a run of seeds, ``42,44`` otherwise."""
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def reference(curves: dict[str, dict[int, np.ndarray]], published: dict) -> tuple[dict, str]:
    """The FGD curves to compare with, by seed: the published ones, else ours."""
    if published:
        return {int(s): np.array(c, dtype=float) for s, c in published.items()}, "published"
    return curves.get("fgd", {}), "ours"


def against(dlc: dict[int, np.ndarray], ref: dict[int, np.ndarray]) -> dict | None:
    """DLC minus the reference, seed by seed: at 130% (mean, 95% interval, verdict), the worst
    step of the mean difference curve, and the seeds with a step below the margin."""
    seeds = sorted(s for s in dlc if s in ref)
    if not seeds:
        return None
    diffs = np.vstack([dlc[s] - ref[s] for s in seeds])
    mean_diff = np.nanmean(diffs, axis=0)
    worst = int(np.nanargmin(mean_diff))
    end, gap = mean_ci(dlc[s][END] for s in seeds), mean_ci(diffs[:, END])
    lo, hi = gap.mean - gap.half_width, gap.mean + gap.half_width
    verdict = (
        "level" if math.isnan(gap.half_width) or lo <= 0 <= hi else "win" if lo > 0 else "LOSS"
    )
    return {
        "seeds": seeds,
        "dlc_130": end.mean,
        "dlc_130_ci95": end.half_width,
        "fgd_130_same_seeds": float(np.mean([ref[s][END] for s in seeds])),
        "diff_130": gap.mean,
        "diff_130_ci95": gap.half_width,
        "verdict": verdict,
        "worst_step": worst,
        "worst_value": float(mean_diff[worst]),
        "seed_worst": {s: float(np.nanmin(d)) for s, d in zip(seeds, diffs, strict=True)},
        "seeds_below_margin": int(sum(np.nanmin(d) < -MARGIN for d in diffs)),
        "mean_diff_curve": [round(float(v), 3) for v in mean_diff],
    }


def row(trace: str, curves: dict[str, dict[int, np.ndarray]], published: dict) -> dict | None:
    """One trace: DLC at 130%, the reference FGD on the same seeds, the per-seed differences."""
    ref, ref_name = reference(curves, published)
    found = against(curves.get("dlc", {}), ref)
    if found is None:
        return None
    old, ours = OLD_FGD.get(trace), curves.get("fgd", {})
    ours_end = mean_ci(ours[s][END] for s in sorted(ours))
    return {
        "trace": trace,
        "reference": ref_name,
        **found,
        "fgd_ours": {"seeds": sorted(ours), "mean": ours_end.mean, "ci95": ours_end.half_width},
        "fgd_ours_old_10": None if old is None else {"mean": old[0], "ci95": old[1]},
    }


def table(curves: Curves, trace_dir: Path, cpu_only: Curves | None = None) -> list[dict]:
    """The rows; with ``cpu_only`` (DLC's replay with the CPU-only pods placed by another rule,
    ``bench/sim_cpu_only.py --rule fgd``), each row's ``cpu_only`` compares that with the same
    FGD."""
    rows = []
    for trace in sorted(curves):
        published = io.load_expected(trace_dir, trace).get("fgd", {})
        r = row(trace, curves[trace], published)
        if r is None:
            continue
        other = (cpu_only or {}).get(trace, {}).get("dlc", {})
        r["cpu_only"] = against(other, reference(curves[trace], published)[0])
        rows.append(r)
    return rows


def _pm(mean: float, half: float) -> str:
    return f"{mean:.2f}" if math.isnan(half) else f"{mean:.2f} ± {half:.2f}"


def _ours(r: dict) -> str:
    """Our FGD at 130%: measured on the seeds in the folders, else the old table's."""
    ours, old = r["fgd_ours"], r["fgd_ours_old_10"]
    if ours["seeds"]:
        return f"{_pm(ours['mean'], ours['ci95'])} ({seed_text(ours['seeds'])})"
    return "-" if old is None else f"{_pm(old['mean'], old['ci95'])} (42-51, old table)"


def _cpu_only(r: dict) -> str:
    c = r.get("cpu_only")
    if not c:
        return "-"
    return (
        f"{c['diff_130']:+.2f}, {c['worst_value']:+.2f} ({c['worst_step']}%) "
        f"({seed_text(c['seeds'])})"
    )


def markdown(rows: list[dict]) -> str:
    lines = [
        "| trace | seeds | DLC at 130% | FGD published (same seeds) | DLC - FGD at 130% "
        "| worst step of mean DLC - FGD (demand) | seeds with a step < -0.25 "
        "| FGD ours (seeds) | CPU-only pods by FGD's rule: DLC - FGD at 130%, worst step "
        "(seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = r["reference"] == "ours"
        pub = "-" if ours else f"{r['fgd_130_same_seeds']:.2f}"
        gap = f"{r['diff_130']:+.2f} ± {r['diff_130_ci95']:.2f} {r['verdict']}"
        star = "*" if ours else ""
        lines.append(
            f"| {r['trace']} | {seed_text(r['seeds'])} | {_pm(r['dlc_130'], r['dlc_130_ci95'])} "
            f"| {pub} | {gap}{star} | {r['worst_value']:+.2f} ({r['worst_step']}%){star} "
            f"| {r['seeds_below_margin']} of {len(r['seeds'])}{star} "
            f"| {_ours(r)} | {_cpu_only(r)}{star if r['cpu_only'] else ''} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], curves: Curves, trace_dir: Path, out: Path) -> None:
    """Small multiples: per trace with a published FGD curve, DLC minus it against demand
    (the band: lowest to highest seed; the line: the mean), with 0 and the -0.25 margin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "dlc"})
    shown = [r for r in rows if r["reference"] == "published"]
    cols = 4
    nrows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(13, 2.3 * nrows), sharex=True, squeeze=False)
    x = np.arange(END + 1)
    for ax, r in zip(axes.flat, shown, strict=False):
        published = io.load_expected(trace_dir, r["trace"])["fgd"]
        seeds = np.vstack([curves[r["trace"]]["dlc"][s] - published[s] for s in r["seeds"]])
        ax.fill_between(x, seeds.min(axis=0), seeds.max(axis=0), color="tab:blue", alpha=0.3, lw=0)
        ax.plot(x, r["mean_diff_curve"], color="black", lw=1.2)
        if r.get("cpu_only"):
            ax.plot(x, r["cpu_only"]["mean_diff_curve"], color="tab:orange", lw=1.0, ls="--")
        ax.axhline(0, color="grey", lw=0.6)
        ax.axhline(-MARGIN, color="red", lw=0.6, ls="--")
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, -0.6), max(high, 0.6))
        ax.set_title(
            f"{r['trace']} ({seed_text(r['seeds'])}): 130% {r['diff_130']:+.2f}, "
            f"worst {r['worst_value']:+.2f} at {r['worst_step']}%",
            fontsize=8,
        )
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("arrived GPU demand (%)", fontsize=8)
    fig.suptitle(
        "openb variants: DLC (production engine, direct replay) minus the published FGD of the "
        "same seed, points of GPU allocation ratio\nblack: mean of the seeds; band: lowest to "
        "highest seed; orange dashed: the CPU-only pods by FGD's rule (bench/sim_cpu_only.py); "
        "red dashed: -0.25",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)
    if out.suffix == ".svg":  # the same picture in under a third of the bytes (svg_compact)
        out.write_text(compact_svg(out.read_text()))
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--trace-dir", help="the traces' folder (default: $DLC_TRACES or shared)")
    parser.add_argument(
        "--cpu-only", nargs="*", type=Path, default=[], help="sim_cpu_only.py --rule fgd's folders"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    root = io.trace_root(args.trace_dir)
    curves, failed = read(args.folders)
    rows = table(curves, root, read(args.cpu_only)[0])
    for r in rows:
        r["dlc_failed_pods"] = {s: failed.get(r["trace"], {}).get(s) for s in r["seeds"]}
    print(markdown(rows))
    same = [
        r for r in rows if r["fgd_ours"]["seeds"] == list(range(42, 52)) and r["fgd_ours_old_10"]
    ]
    if same:  # our FGD re-run on the old table's seeds against that table (2-decimal figures)
        gap = max(abs(r["fgd_ours"]["mean"] - r["fgd_ours_old_10"]["mean"]) for r in same)
        print(f"our FGD, seeds 42-51, on {len(same)} traces: at most {gap:.3f} from the old table")
    if args.json:
        io.write_json(args.json, {"machine": platform.platform(), "margin": MARGIN, "rows": rows})
        print(f"wrote {args.json}")
    if args.plot:
        plot(rows, curves, root, args.plot)


if __name__ == "__main__":
    main()
