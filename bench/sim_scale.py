"""The openb cluster (1,213 GPU agents, 6,212 GPUs) as simulated Mesos agents, driven
through DLC's scheduler core: time per offer round and per placement decision, and the wall
time of a full 130% replay (docs/simulator.md, "Mesos-driven simulator")::

    .venv/bin/python bench/sim_scale.py --trace default --seed 42 --batch 1

A thin wrapper of :mod:`dlc.sim.cluster_sim.openb_core` (``dlc simulate openb --mode core``
runs the same replay and reports whole curves): pods arrive in batches of ``--batch`` percent
of the cluster's GPUs; after each batch offer rounds offer every agent's free resources; a
pod its turn could not place is withdrawn (the replay's "fails"). Writes
``bench/results/sim_scale.json``.
``--agents N``: only the first N openb nodes (a quick run; the demand scales with them).
Exits 1 (``--no-fail``: 0) when the replay is unsound: the simulated master reports a
problem (a GPU used twice, a task on resources it was not offered) or refused a task.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.cluster_sim.openb_core import replay_core  # noqa: E402
from dlc.sim.metrics import allocation_curve  # noqa: E402
from dlc.sim.workload import arrival_sequence  # noqa: E402


class _Timer:
    """The core's round sink: placement seconds and jobs per round."""

    def __init__(self) -> None:
        self.rounds: list[tuple[float, int, int]] = []

    def record_round(self, views, received, declined, latency_s, placed) -> None:
        self.rounds.append((latency_s, received, len(placed)))


def replay(
    root: Path,
    trace: str,
    seed: int,
    batch_pct: float,
    tune: float,
    hold_reserve: float = 0.0,
    agents_limit: int | None = None,
) -> dict:
    """One replay through the core (:func:`dlc.sim.cluster_sim.openb_core.replay_core`, what
    ``dlc simulate openb --mode core`` runs); timings and the allocation reached.

    ``hold_reserve``: the scheduler's ``--share-hold-reserve`` (0: off); a share it holds
    is withdrawn at the end of its round, like any pod its round could not place.
    ``agents_limit``: only the first that many openb nodes (a short run; the demand scales
    with them). Identical arguments give identical results.
    """
    nodes = io.load_nodes(root)[:agents_limit]
    total_milli = sum(n.gpus for n in nodes) * 1000
    pods = arrival_sequence(
        io.load_pods(root, trace), total_milli, tune, np.random.default_rng(seed)
    )
    timer = _Timer()
    started = time.perf_counter()
    result, stats = replay_core(nodes, pods, batch_pct, hold_reserve, metrics=timer)
    wall = time.perf_counter() - started
    offer_s = [b[0] for b in stats.batches]
    core_s = [b[1] for b in stats.batches]
    place_s = [t[0] for t in timer.rounds]
    curve = allocation_curve(result)
    return {
        "trace": trace, "seed": seed, "batch_pct": batch_pct, "tune": tune,
        "share_hold_reserve": hold_reserve,
        "agents": len(nodes), "gpus": total_milli // 1000, "pods": len(pods),
        "cpu_only_pods": stats.cpu_only, "cpu_only_placed": stats.cpu_only_placed,
        "placed": result.placed,
        "withdrawn": stats.withdrawn, "rejected": stats.rejected,
        "rounds": stats.rounds, "wall_s": wall,
        "offers_build_ms_mean": 1000 * float(np.mean(offer_s)),
        "core_round_ms_mean": 1000 * float(np.mean(core_s)),
        "core_round_ms_p95": 1000 * float(np.percentile(core_s, 95)),
        "placement_ms_per_job": 1000 * sum(place_s) / max(1, sum(b[2] for b in stats.batches)),
        "gpu_allocation_ratio": float(result.used_gpu_milli[-1]) / total_milli,
        "gpu_allocation_curve_last": float(curve[np.isfinite(curve)][-1]),
        "gpu_memory_allocated_ratio": stats.gpu_mib_held / stats.gpu_mib_total,
        "problems": stats.problems,
        "refused": stats.refused,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="default")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batch", type=float, default=1.0, help="percent of GPUs per round")
    parser.add_argument("--tune", type=float, default=1.3)
    parser.add_argument("--trace-dir", default=None)
    parser.add_argument(
        "--share-hold-reserve",
        type=float,
        default=0.0,
        help="the scheduler's --share-hold-reserve (0: off)",
    )
    parser.add_argument("--agents", type=int, default=None, help="only the first N openb nodes")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when unsound")
    parser.add_argument("--out", default=str(ROOT / "bench/results/sim_scale.json"))
    args = parser.parse_args()
    result = replay(
        io.trace_root(args.trace_dir),
        args.trace,
        args.seed,
        args.batch,
        args.tune,
        args.share_hold_reserve,
        args.agents,
    )
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"openb {args.trace} through the core, seed {args.seed}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    Console().print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    unsound = [*result["problems"], *(["the master refused tasks"] if result["refused"] else [])]
    for line in unsound:
        print(f"unsound replay: {line}", file=sys.stderr)
    return 1 if unsound and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
