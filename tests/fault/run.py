"""``python -m tests.fault.run --seed N --kills K --target T --json out.json``.

Spreads K kill points over the target's (backend, target) pairs, runs them in runs of at most
``--kills-per-run`` faults each (a fresh cluster per run), prints one row of counts per run and
the totals, writes everything to the JSON file, and exits 1 when any count that must be zero
is not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.fault.runner import FaultRun, RunResult

PAIRS = {
    "scheduler": [("real", "scheduler")],
    "agent": [("real", "agent")],
    "master": [("real", "master")],
    "local": [("local", "local")],
    "executor": [("real", "executor"), ("local", "executor")],
}
PAIRS["all"] = [p for t in ("scheduler", "agent", "master", "local", "executor") for p in PAIRS[t]]
COLUMNS = (
    "jobs_lost",
    "launched_twice",
    "gpu_conflicts",
    "gpus_unknown",
    "no_container",
    "orphan_containers",
    "executors_left",
    "wrong_state",
)
#: printed and totalled too (see docs/fault-tolerance.md): ``ended_by_fault`` jobs are also in
#: ``jobs_lost``; ``ended_while_running`` is allowed (``gpu_conflicts`` counts actual reuse)
INFO = ("ended_by_fault", "ended_while_running")
WIDTH = {c: max(len(c) + 1, 6) for c in COLUMNS + INFO}


def plan_runs(target: str, kills: int, per_run: int) -> list[tuple[str, str, int]]:
    """``(backend, target, kills)`` per run: K kills round-robin over the pairs, chunked."""
    pairs = PAIRS[target]
    share = {
        p: kills // len(pairs) + (1 if i < kills % len(pairs) else 0) for i, p in enumerate(pairs)
    }
    runs = []
    for (backend, tgt), n in share.items():
        while n > 0:
            runs.append((backend, tgt, min(n, per_run)))
            n -= per_run
    return runs


def run_all(
    seed: int, kills: int, target: str, per_run: int, base: Path, log=print
) -> list[RunResult]:
    """Carry out the runs one after another (the machine is small)."""
    results = []
    for i, (backend, tgt, n) in enumerate(plan_runs(target, kills, per_run)):
        log(f"run {i + 1}: {backend} cluster, {n} x {tgt} (seed {seed * 100 + i}) ...")
        result = FaultRun(backend, tgt, seed * 100 + i, n, base).run()
        log(format_row(result) + "".join(f"\n    ! {e}" for e in result.errors))
        results.append(result)
    return results


def format_row(r: RunResult) -> str:
    counts = {**r.report.zero_counts(), **{c: getattr(r.report, c) for c in INFO}}
    cells = "".join(f"{counts[c]:>{WIDTH[c]}}" for c in COLUMNS + INFO)
    return (
        f"{r.backend:<6}{r.target:<12}{len(r.kills):>6}{r.report.jobs:>5}{cells}"
        f"{'yes' if r.report.states_right else 'NO':>7}{r.duration_s:>6.0f}"
    )


def totals(results: list[RunResult]) -> dict[str, int]:
    out = {c: 0 for c in COLUMNS + INFO}
    for r in results:
        for c, v in r.report.zero_counts().items():
            out[c] += v
        for c in INFO:
            out[c] += getattr(r.report, c)
    out["kill_points"] = sum(len(r.kills) for r in results)
    out["jobs"] = sum(r.report.jobs for r in results)
    out["run_errors"] = sum(len(r.errors) for r in results)
    return out


def print_table(results: list[RunResult]) -> None:
    head = "".join(f"{c:>{WIDTH[c]}}" for c in COLUMNS + INFO)
    print(f"\n{'where':<6}{'target':<12}{'kills':>6}{'jobs':>5}{head}{'states':>7}{'secs':>6}")
    for r in results:
        print(format_row(r))
    t = totals(results)
    cells = "".join(f"{t[c]:>{WIDTH[c]}}" for c in COLUMNS + INFO)
    print(f"{'total':<18}{t['kill_points']:>6}{t['jobs']:>5}{cells}")
    for r in results:
        for line in r.report.details + [
            f"kill at t={k.at - r.t0:.1f}s: {k.detail}" for k in r.kills
        ]:
            print(f"  [{r.backend}/{r.target}] {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fault.run", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=6, help="kill points in all")
    parser.add_argument("--target", choices=sorted(PAIRS), default="all")
    parser.add_argument("--kills-per-run", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--dir", help="keep run directories (logs, DBs) here")
    args = parser.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix="dlc-fault-"))
    base.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = run_all(args.seed, args.kills, args.target, args.kills_per_run, base)
    print_table(results)
    body = {
        "seed": args.seed,
        "kills": args.kills,
        "target": args.target,
        "duration_s": round(time.monotonic() - started, 1),
        "totals": totals(results),
        "runs": [r.to_dict() for r in results],
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(body, indent=1, default=str))
    bad = any(v for k, v in body["totals"].items() if k in COLUMNS or k == "run_errors")
    verdict = "FAIL" if bad else "OK"
    print(f"\n{verdict}: {body['totals']} in {body['duration_s']:.0f}s; runs in {base}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
