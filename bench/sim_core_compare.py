"""Through-core against direct replay and published FGD, point by point (issue 26)::

    .venv/bin/python bench/sim_core_compare.py bench/results/sim_core \\
        --plot docs/images/sim-default-core.svg

Reads what ``dlc simulate openb --out`` wrote in the folder: ``direct/results.json`` (the
direct replay, ``--policy dlc``) and ``core-<seed>/results.json`` (``--mode core``, one seed
each; any seed present is used). Prints the table at the report steps and the steps where
through-core is more than 0.25 points below the published FGD mean (the issue's margin);
writes ``compare.json`` there and, with ``--plot``, the curves and the differences.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.metrics import mean_ci  # noqa: E402

STEPS = (25, 50, 75, 90, 94, 100, 110, 120, 130)
MARGIN = 0.25


def _curves(path: Path) -> dict[int, np.ndarray]:
    entry = io.read_json(path)["default"]["policies"]["dlc"]
    return {int(s): np.array([np.nan if v is None else v for v in c], dtype=float)
            for s, c in entry["curves"].items()}  # fmt: skip


def load(folder: Path, trace_dir: str | None, direct: Path | None = None) -> dict:
    """Seed curves of the three: ``{"core", "direct", "fgd"}`` -> seed -> 131 values
    (``direct``: the direct replay's results.json, default ``folder/direct/results.json``)."""
    core: dict[int, np.ndarray] = {}
    for path in sorted(folder.glob("core-*/results.json")):
        core.update(_curves(path))
    expected = io.load_expected(io.trace_root(trace_dir), "default")["fgd"]
    fgd = {s: np.array(c, dtype=float) for s, c in expected.items()}
    direct = direct or folder / "direct/results.json"
    return {"core": core, "direct": _curves(direct), "fgd": fgd}


def _mean(curves: dict[int, np.ndarray], seeds) -> np.ndarray:
    return np.nanmean(np.vstack([curves[s] for s in seeds]), axis=0)


def compare(data: dict) -> dict:
    """Means per step: through-core (its seeds), direct DLC (same seeds, and all), FGD
    published (all 10 seeds, as the README's "FGD published"), and where core trails FGD."""
    seeds = sorted(data["core"])
    core, fgd = _mean(data["core"], seeds), _mean(data["fgd"], sorted(data["fgd"]))
    direct_same = _mean(data["direct"], seeds)
    direct_all = _mean(data["direct"], sorted(data["direct"]))
    ci = np.array([mean_ci([data["core"][s][k] for s in seeds]).half_width for k in range(131)])
    gap = core - fgd
    behind = [k for k in range(131) if gap[k] < -MARGIN]
    worst = int(np.nanargmin(gap))
    per_seed_130 = {s: float(data["core"][s][130]) for s in seeds}
    return {
        "seeds": seeds, "direct_seeds": sorted(data["direct"]),
        "steps": {k: {"fgd_published": fgd[k], "direct_dlc": direct_same[k],
                      "direct_dlc_all_seeds": direct_all[k],
                      "core_dlc": core[k], "core_ci95": ci[k],
                      "core_minus_fgd": gap[k], "core_minus_direct": core[k] - direct_same[k]}
                  for k in STEPS},
        "worst_step": worst, "worst_core_minus_fgd": float(gap[worst]),
        "worst_core_ci95": float(ci[worst]),
        "steps_behind_fgd_by_more_than_margin": behind,
        "core_130_per_seed": per_seed_130,
        "curves": {"core": core.tolist(), "direct_same_seeds": direct_same.tolist(),
                   "fgd_published": fgd.tolist()},
    }  # fmt: skip


def plot(result: dict, path: Path) -> None:
    """Allocation curves 0-130% above, differences to published FGD below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "dlc"})
    curves = {k: np.array(v, dtype=float) for k, v in result["curves"].items()}
    xs = np.arange(131)
    fig, (top, low) = plt.subplots(2, 1, figsize=(6.4, 5.6), dpi=90, sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})  # fmt: skip
    n = len(result["seeds"])
    top.plot(xs, curves["fgd_published"], color="C0", ls="--", lw=1.2, label="FGD published")
    top.plot(xs, curves["direct_same_seeds"], color="C1", lw=1.2, label="DLC, direct replay")
    top.plot(xs, curves["core"], color="C2", lw=1.6, label="DLC, through the core")
    top.plot(xs, np.minimum(xs, 100), color="grey", lw=0.8, ls=":", label="demand")
    top.set_ylabel("GPU allocation ratio (%)")
    top.set_ylim(0, 100)
    top.set_title(f"openb default, mean of seeds {_seed_text(result['seeds'])} ({n})",
                  fontsize=10)  # fmt: skip
    top.legend(fontsize=8, loc="lower right")
    low.axhline(0, color="C0", ls="--", lw=1.0)
    low.axhspan(-MARGIN, 0, color="C0", alpha=0.12, label=f"within {MARGIN} of FGD")
    low.plot(xs, curves["direct_same_seeds"] - curves["fgd_published"], color="C1", lw=1.2,
             label="direct - FGD")  # fmt: skip
    low.plot(xs, curves["core"] - curves["fgd_published"], color="C2", lw=1.6,
             label="core - FGD")  # fmt: skip
    low.set_xlabel("arrived GPU demand (% of cluster GPUs)")
    low.set_ylabel("points vs FGD published")
    low.legend(fontsize=8, loc="lower left")
    for ax in (top, low):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _seed_text(seeds: list[int]) -> str:
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ",".join(map(str, seeds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--trace-dir", default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument(
        "--direct",
        type=Path,
        default=None,
        help="the direct replay's results.json [FOLDER/direct/results.json]",
    )
    args = parser.parse_args()
    result = compare(load(args.folder, args.trace_dir, args.direct))
    print(f"seeds through the core: {result['seeds']}")
    print("| demand | FGD published | DLC direct | DLC through core | core - FGD | core - direct |")
    print("|---|---|---|---|---|---|")
    for k, row in result["steps"].items():
        print(f"| {k}% | {row['fgd_published']:.2f} | {row['direct_dlc']:.2f} | "
              f"{row['core_dlc']:.2f} ± {row['core_ci95']:.2f} | {row['core_minus_fgd']:+.2f} | "
              f"{row['core_minus_direct']:+.2f} |")  # fmt: skip
    behind = result["steps_behind_fgd_by_more_than_margin"]
    print(f"worst: {result['worst_core_minus_fgd']:+.2f} (core's 95% CI over its seeds "
          f"± {result['worst_core_ci95']:.2f}) at {result['worst_step']}%; "
          f"steps more than {MARGIN} below FGD: {_ranges(behind) or 'none'}")  # fmt: skip
    print(f"core at 130% per seed: {result['core_130_per_seed']}")
    (args.folder / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    if args.plot is not None:
        plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _ranges(steps: list[int]) -> str:
    """``[47, 48, 49, 60]`` -> ``47-49, 60``."""
    out: list[str] = []
    for k in steps:
        if out and int(out[-1].split("-")[-1]) == k - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{k}"
        else:
            out.append(str(k))
    return ", ".join(out)


if __name__ == "__main__":
    sys.exit(main())
