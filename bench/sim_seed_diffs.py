"""Per seed: a replay's curve minus the published FGD curve of the same seed (issue 26)::

    .venv/bin/python bench/sim_seed_diffs.py bench/results/sim_host_keep/host_keep/multigpu40-*

Each argument is a folder ``dlc simulate openb --out`` (or ``bench/sim_engine_knobs.py``)
wrote; every trace, policy and seed in its ``results.json`` gets one line: the difference at a
few steps, the worst step (the most negative difference from 0 to 130% of demand) and 130%.
The last line per trace and policy: the means over the seeds read, and how many seeds have a
step more than 0.25 below FGD (the issue's margin).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dlc.sim import io  # noqa: E402

STEPS = (52, 70, 82, 94, 96, 100, 130)
MARGIN = 0.25


def diffs(folders: list[Path], trace_dir: Path) -> dict[str, list[tuple[int, np.ndarray]]]:
    """``trace policy`` -> [(seed, curve minus the published FGD of that seed)]."""
    out: dict[str, list[tuple[int, np.ndarray]]] = {}
    published: dict[str, dict] = {}
    for folder in folders:
        for trace, entry in io.read_json(folder / "results.json").items():
            if trace not in published:
                published[trace] = io.load_expected(trace_dir, trace).get("fgd", {})
            for name, policy in entry["policies"].items():
                for seed, curve in policy["curves"].items():
                    fgd = published[trace].get(int(seed))
                    if fgd is None:
                        continue
                    mine = np.array([np.nan if v is None else v for v in curve], dtype=float)
                    key = f"{trace} {name}"
                    out.setdefault(key, []).append((int(seed), mine - np.array(fgd)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--trace-dir", default=os.environ.get("DLC_TRACES", "traces"))
    args = parser.parse_args()
    for trace, rows in diffs(args.folders, Path(args.trace_dir)).items():
        rows.sort(key=lambda r: r[0])
        for seed, d in rows:
            worst = int(np.nanargmin(d))
            steps = " ".join(f"{s}%:{d[s]:+.2f}" for s in STEPS)
            print(f"{trace} {seed} {steps} worst {d[worst]:+.2f} at {worst}%")
        at_end = statistics.mean(float(d[130]) for _, d in rows)
        worst_mean = statistics.mean(float(np.nanmin(d)) for _, d in rows)
        below = sum(1 for _, d in rows if np.nanmin(d) < -MARGIN)
        print(
            f"{trace}: {len(rows)} seeds, 130% mean {at_end:+.3f}, worst step mean "
            f"{worst_mean:+.2f} (lowest {min(float(np.nanmin(d)) for _, d in rows):+.2f}), "
            f"{below} seed(s) with a step more than {MARGIN} below FGD"
        )


if __name__ == "__main__":
    main()
