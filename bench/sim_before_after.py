"""Per openb trace: DLC before and after a change, each minus the same FGD, from result folders.

Folders are ``T-S`` (trace, seed) holding a one-seed ``results.json`` of ``dlc`` (as
``dlc simulate openb --policy dlc --seeds S --out .../T-S`` and ``bench/sim_engine_knobs.py``
write them). Each seed is compared with the published FGD curve of that seed, our FGD
(``--fgd``, folders ``T-42-51``) where none is published (marked \\*), as
``bench/sim_variants_table.py`` does. Prints a markdown row per trace: DLC - FGD at 130% before
and after (mean ± 95% interval over the seeds both have), the change per seed, and the worst
step of the mean difference curve before and after. ``--seeds`` adds a row per seed (DLC - FGD
at 130% and its worst step, before and after); ``--json PATH`` writes every row (``table.json``)::

    .venv/bin/python bench/sim_before_after.py --before bench/results/sim_variants11/dlc \\
        --after bench/results/sim_engine12/heavy --fgd bench/results/sim_variants10/fgd
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_variants_table as table  # noqa: E402

from dlc.sim import io  # noqa: E402


def _dlc(folder: Path) -> dict[str, dict[int, np.ndarray]]:
    """trace -> seed -> DLC's curve, from the ``T-S`` folders under ``folder``."""
    out: dict[str, dict[int, np.ndarray]] = {}
    for sub in sorted(folder.iterdir()):
        found = re.fullmatch(r"(.+)-(\d+)", sub.name)
        if not found or not (sub / "results.json").is_file():
            continue
        curves, _ = table.read([sub])
        for trace, policies in curves.items():
            out.setdefault(trace, {}).update(policies.get("dlc", {}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--fgd", type=Path, required=True, help="our FGD's T-42-51 folders")
    parser.add_argument("--seeds", action="store_true", help="a row per seed too")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    before, after = _dlc(args.before), _dlc(args.after)
    print(
        "| trace | seeds | before: DLC - FGD at 130% | after | change at 130%, per seed | "
        "mean change | worst step of the mean, before | after |"
    )
    print("|---|---|---|---|---|---|---|---|")
    changes, rows, seed_rows = [], [], []
    for trace in sorted(after):
        seeds = sorted(set(after[trace]) & set(before.get(trace, {})))
        if not seeds:
            continue
        ours, _ = table.read([args.fgd / f"{trace}-42-51"])
        ref, name = table.reference(
            ours.get(trace, {}), io.load_expected(root, trace).get("fgd", {})
        )
        old = table.against({s: before[trace][s] for s in seeds}, ref)
        new = table.against({s: after[trace][s] for s in seeds}, ref)
        if old is None or new is None:
            continue
        per = [after[trace][s][table.END] - before[trace][s][table.END] for s in seeds]
        changes += per
        rows.append({"trace": trace, "reference": name, "seeds": seeds, "before": old,
                     "after": new, "change_130": per})  # fmt: skip
        seed_rows += [_seed_row(trace, s, before[trace][s], after[trace][s], ref[s]) for s in seeds]
        star = "" if name == "published" else "\\*"
        print(
            f"| {trace}{star} | {table.seed_text(seeds)} | {old['diff_130']:+.2f} ± "
            f"{old['diff_130_ci95']:.2f} | {new['diff_130']:+.2f} ± {new['diff_130_ci95']:.2f} | "
            + " / ".join(f"{c:+.2f}" for c in per)
            + f" | {np.mean(per):+.2f} | {old['worst_value']:+.2f} ({old['worst_step']}%) | "
            f"{new['worst_value']:+.2f} ({new['worst_step']}%) |"
        )
    if changes:
        print(f"\nmean change at 130% over {len(changes)} trace-seeds: {np.mean(changes):+.3f}")
    if args.seeds:
        print(
            "\n| trace | seed | before: 130% | before: worst step | after: 130% "
            "| after: worst step |\n|---|---|---|---|---|---|"
        )
        for r in seed_rows:
            print(
                f"| {r['trace']} | {r['seed']} | {r['before_130']:+.2f} | {r['before_worst']:+.2f} "
                f"at {r['before_worst_step']}% | {r['after_130']:+.2f} | {r['after_worst']:+.2f} "
                f"at {r['after_worst_step']}% |"
            )
    if args.json:
        args.json.write_text(json.dumps({"traces": rows, "seeds": seed_rows}, indent=1) + "\n")


def _seed_row(trace: str, seed: int, old: np.ndarray, new: np.ndarray, ref: np.ndarray) -> dict:
    """One seed: DLC - FGD at 130% and the worst step (lowest difference), before and after."""
    row: dict = {"trace": trace, "seed": seed}
    for name, curve in (("before", old), ("after", new)):
        diff = curve - ref
        worst = int(np.nanargmin(diff))
        row[f"{name}_130"] = float(diff[table.END])
        row[f"{name}_worst"] = float(diff[worst])
        row[f"{name}_worst_step"] = worst
        row[f"{name}_steps_below_margin"] = int(np.sum(diff < -table.MARGIN))
    return row


if __name__ == "__main__":
    main()
