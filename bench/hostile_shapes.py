"""Hostile-queue benchmark: one user's 1,000 distinct job shapes vs 1,000 identical jobs.

Red-team finding 3 (docs/security.md): the failed-shape cache keyed on exact numbers, so a
queue of ``--cpus 5.999, 5.998, ...`` made every job go through placement on every agent,
under the core lock that submit and kill also take. This drives
:class:`~dlc.scheduler.core.facade.SchedulerCore` exactly as :func:`bench.scheduler.offer_round`
does (SQLite store, agent totals from the master, Mesos offers as JSON from
:func:`bench.scheduler.offer_json`), with ``--agents`` 8-GPU agents that each offer all
their GPUs but only 4 cpus, and ``--jobs`` one-GPU jobs that want more than 4 cpus:

- ``identical``: every job asks for 5 cpus;
- ``distinct``: job i asks for ``5 + (jobs - i) / 1000`` cpus, so each job needs *less*
  than the one before and no earlier failure covers it (the worst order for the cache).

It prints a table, writes it with the ratios as JSON, and exits 1 when the median round of
``distinct`` takes more than ``--target`` times the CPU of ``identical`` (CPU time of the
deciding thread: what the core lock is held for, not other processes on shared cores; the
wall-clock ratio is written too)::

    .venv/bin/python bench/hostile_shapes.py        # bench/results/hostile_shapes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import dlc  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))

from scheduler import _slave, offer_json  # noqa: E402

from dlc.scheduler.jobs.job import Job, JobSpec, JobState  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402

#: cpus each agent offers: fewer than any benchmark job wants, so every job waits
OFFERED_CPUS = 4.0


def _offer(agent: int, n: int) -> dict:
    offer = offer_json(f"agent-{agent}", set(range(8)), n, {})
    for resource in offer["resources"]:
        if resource["name"] == "cpus":
            resource["scalar"]["value"] = OFFERED_CPUS
    return offer


def _cpus(kind: str, i: int, jobs: int) -> float:
    return 5.0 if kind == "identical" else round(5.0 + (jobs - i) / 1000, 3)


def _core(kind: str, jobs: int, agents: int, folder: str):
    from dlc.mesos.codec import MesosCodec
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.store.sqlite import JobStore

    store = JobStore(Path(folder) / f"{kind}.db")
    for i in range(jobs):
        spec = JobSpec(image="bench", gpus=1, cpus=_cpus(kind, i, jobs), mem_mib=4096)
        store.add_job(Job(f"q{i:06d}", "mallory", spec, JobState.QUEUED, 1e6 + i))
    core = SchedulerCore(
        store, CoreConfig(placement=PlacementConfig("first-fit")), codec=MesosCodec()
    )
    core.update_agents([_slave(f"agent-{a}") for a in range(agents)])
    return core, store


def measure(jobs: int, agents: int, rounds: int) -> list[dict]:
    """Per queue kind, the median and max seconds of ``on_offers`` (wall and this thread's
    CPU) over ``rounds`` rounds. The two cores take turns round by round, so load from
    other processes on a shared machine hits both alike; the first round of each (which
    saves every job's first reason) is not counted."""
    kinds = ("identical", "distinct")
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        cores = {k: _core(k, jobs, agents, tmp) for k in kinds}
        for rnd in range(rounds + 1):
            offers = [_offer(a, rnd * agents + a) for a in range(agents)]
            for kind in kinds:
                started, cpu_started = time.perf_counter(), time.thread_time()
                cores[kind][0].on_offers(offers)
                if rnd:
                    wall[kind].append(time.perf_counter() - started)
                    cpu[kind].append(time.thread_time() - cpu_started)
        deferred = {k: _deferred(cores[k][0]) for k in kinds}
        for _, store in cores.values():
            store.close()
    return [
        {
            "queue": kind,
            "jobs": jobs,
            "agents": agents,
            "rounds": rounds,
            "median_round_ms": _ms(statistics.median(wall[kind])),
            "max_round_ms": _ms(max(wall[kind])),
            "median_round_cpu_ms": _ms(statistics.median(cpu[kind])),
            "deferred_last_round": deferred[kind],
        }  # fmt: skip
        for kind in kinds
    ]


def _deferred(core) -> int:
    return sum(1 for j in core.queued_jobs() if "not tried this offer round" in j.message)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--target", type=float, default=2.0, help="largest ratio that passes")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "hostile_shapes.json"))
    args = parser.parse_args(argv)
    results = measure(args.jobs, args.agents, args.rounds)
    ratio = results[1]["median_round_cpu_ms"] / max(results[0]["median_round_cpu_ms"], 1e-9)
    wall_ratio = results[1]["median_round_ms"] / max(results[0]["median_round_ms"], 1e-9)
    cols = ["queue", "jobs", "agents", "rounds", "median_round_ms", "max_round_ms",
            "median_round_cpu_ms", "deferred_last_round"]  # fmt: skip
    print(" | ".join(f"{c:>19}" for c in cols))
    for res in results:
        print(" | ".join(f"{res[c]!s:>19}" for c in cols))
    passed = ratio <= args.target
    print(f"distinct/identical median round CPU: {ratio:.2f}x (wall {wall_ratio:.2f}x; "
          f"target <= {args.target:g}x): {'met' if passed else 'MISSED'}")  # fmt: skip
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"results": results, "cpu_ratio": round(ratio, 2), "wall_ratio": round(wall_ratio, 2),
            "target": args.target, "met": passed}  # fmt: skip
    out.write_text(json.dumps(body, indent=2) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
