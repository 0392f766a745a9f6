"""The openb cluster (1,213 GPU agents, 6,212 GPUs) as simulated Mesos agents, driven
through DLC's scheduler core: time per offer round and per placement decision, and the wall
time of a full 130% replay (docs/simulator.md, "Mesos-driven simulator")::

    .venv/bin/python bench/sim_scale.py --trace default --seed 42 --batch 1

Pods arrive in batches of ``--batch`` percent of the cluster's GPUs; after each batch one
offer round offers every agent's free resources; a pod the round could not place is
withdrawn (the replay's "fails"). Writes ``bench/results/sim_scale.json``.
``--agents N``: only the first N openb nodes (a quick run; the demand scales with them).
Exits 1 (``--no-fail``: 0) when the replay is unsound: the simulated master reports a
problem (a GPU used twice, a task on resources it was not offered) or refused a task.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dlc.scheduler.core import CoreConfig  # noqa: E402
from dlc.scheduler.placement import PlacementConfig  # noqa: E402
from dlc.scheduler.round_cap import CAP_PREFIX  # noqa: E402
from dlc.scheduler.share_hold import ShareHoldSettings  # noqa: E402
from dlc.sim import io  # noqa: E402
from dlc.sim.cluster_sim.engine import Engine  # noqa: E402
from dlc.sim.cluster_sim.openb import DEFAULT_GPU_MIB, GPU_MIB, agent_of, item_of  # noqa: E402
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
    """One replay through the core; timings and the allocation ratio reached.

    ``hold_reserve``: the scheduler's ``--share-hold-reserve`` (0: off); a share it holds
    is withdrawn at the end of its round, like any pod its round could not place.
    ``agents_limit``: only the first that many openb nodes (a short run; the demand scales
    with them). Identical arguments give identical results: the simulator numbers jobs in
    submit order, so a batch's order does not depend on random job ids.
    """
    nodes = io.load_nodes(root)[:agents_limit]
    agents = [agent_of(n) for n in nodes]
    total_milli = sum(n.gpus for n in nodes) * 1000
    pods = arrival_sequence(
        io.load_pods(root, trace), total_milli, tune, np.random.default_rng(seed)
    )
    timer = _Timer()
    hold = ShareHoldSettings(reserve=hold_reserve)
    placement = PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0,
                                share_hold=hold)  # fmt: skip
    config = CoreConfig(placement=placement)
    started = time.perf_counter()
    engine = Engine(agents, config, metrics=timer)
    setup_s = time.perf_counter() - started
    step, arrived, rounds, skipped = batch_pct / 100 * total_milli, 0, [], 0
    next_round, queue = step, []
    for n, pod in enumerate(pods):
        item = item_of(pod, n, 0.0)
        if item is None:
            skipped += 1
            continue
        queue.append(item)
        arrived += pod.total_gpu_milli
        if arrived >= next_round or n == len(pods) - 1:
            rounds.append(_round(engine, queue))
            queue, next_round = [], next_round + step
    wall = time.perf_counter() - started
    held = sum(sum(t.gpu_mib.values()) for t in engine.master.tasks.values())
    capacity = sum(n.gpus * GPU_MIB.get(n.model, DEFAULT_GPU_MIB) for n in nodes)
    placed = sum(r["placed"] for r in rounds)
    offer_s = [r["offers_s"] for r in rounds]
    core_s = [r["core_s"] for r in rounds]
    place_s = [t[0] for t in timer.rounds]
    considered = [r["queued"] for r in rounds]
    return {
        "trace": trace, "seed": seed, "batch_pct": batch_pct, "tune": tune,
        "share_hold_reserve": hold_reserve,
        "agents": len(agents), "gpus": total_milli // 1000, "pods": len(pods),
        "cpu_only_pods_skipped": skipped, "placed": placed,
        "withdrawn": sum(r["withdrawn"] for r in rounds),
        "rounds": len(rounds), "setup_s": setup_s, "wall_s": wall,
        "offers_build_ms_mean": 1000 * float(np.mean(offer_s)),
        "core_round_ms_mean": 1000 * float(np.mean(core_s)),
        "core_round_ms_p95": 1000 * float(np.percentile(core_s, 95)),
        "placement_ms_per_job": 1000 * sum(place_s) / max(1, sum(considered)),
        "gpu_memory_allocated_ratio": held / capacity,
        "problems": engine.master.check(),
        "refused": engine.master.refused,
    }  # fmt: skip


def _round(engine: Engine, items: list) -> dict:
    """One batch: its pods submitted, then offer rounds until every pod had its turn (the
    core considers ``max_jobs_per_round`` jobs a round, docs/scheduler.md); a pod its turn
    could not place is withdrawn, as one round withdrew every pod it did not place before
    that cap. Times are summed over the batch's rounds."""
    for item in items:
        engine._on_submit(item)
    offers_s = core_s = 0.0
    placed = withdrawn = 0
    waiting = list(items)
    while waiting:
        engine._round_due = False
        engine._events.clear()  # no virtual time passes: pods never end
        t0 = time.perf_counter()
        offers = engine.master.offers()
        t1 = time.perf_counter()
        actions = engine.core.on_offers(offers)
        t2 = time.perf_counter()
        offers_s, core_s = offers_s + t1 - t0, core_s + t2 - t1
        engine._apply(actions)
        engine._events.clear()
        placed += sum(len(infos) for _, infos in actions.accepts)
        later = []
        for item in waiting:
            record = engine.records[item.key]
            if record.first_start is not None or record.job_id is None:
                continue
            if CAP_PREFIX in (engine.core.queue_reason(record.job_id) or ""):
                later.append(item)  # not considered yet: its turn comes next round
                continue
            engine.core.kill(record.job_id, "openb", admin=True)
            withdrawn += 1
        waiting = later
    return {"offers_s": offers_s, "core_s": core_s, "placed": placed, "withdrawn": withdrawn,
            "queued": len(items)}  # fmt: skip


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
    logging.disable(logging.WARNING)  # one "no dlc_topo" line per agent is not news here
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
