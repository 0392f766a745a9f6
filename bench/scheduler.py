"""Scheduler benchmark: offers handled per second with 1,000 simulated 8-GPU agents.

Drives the pure placement core (:func:`dlc.scheduler.placement.placer.place`) with Mesos
offers as JSON data, exactly what the framework adapter hands it, without pymesos,
HTTP or SQLite. Each round every agent offers its free resources (one offer per
agent, as the Mesos allocator does); queued jobs (1, 2, 4 or 8 GPUs, some
multi-node) are placed; running jobs finish after a few rounds and free their GPUs.

    python bench/scheduler.py                      # table
    python bench/scheduler.py --json out.json      # also write the figures as JSON
    python bench/scheduler.py --mode rounds        # offer-round time of the whole core

``--mode rounds`` drives :class:`~dlc.scheduler.core.facade.SchedulerCore` (with its SQLite
store) instead: the time of one offer round with 5,000 queued jobs, and with 20,000
finished ones, so that history and queue length show up if a round reads them. It
only uses APIs older versions have too: run it on another checkout's code for a
"before" figure, then pass that JSON as ``--before`` so one file holds both::

    git archive 0a8079c^ dlc | tar -x -C /tmp/before      # the code before the in-memory queue
    PYTHONPATH=/tmp/before python bench/scheduler.py --mode rounds --json /tmp/before.json
    python bench/scheduler.py --mode rounds --before /tmp/before.json \\
        --before-how "..." --json bench/results/scheduler-rounds.json

Agents carry the DGX-1 topology from examples/topologies in ``dlc_topo``, so the
``tree`` policy works on real link data (decoding is cached per attribute value,
as in the scheduler).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:  # the installed dlc (possibly another checkout's, for "before" figures)
    import dlc  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))

from dlc.scheduler.jobs.job import Job, JobSpec, JobState  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.scheduler.placement.placer import place  # noqa: E402

#: what every simulated agent offers besides its GPUs
AGENT_CPUS, AGENT_MEM_MIB = 64.0, 512 * 1024.0


def agent_attributes(topology_file: Path) -> dict[str, str]:
    """The DLC attributes node-config would give an agent of this machine."""
    from dlc.topology.discovery.discover import discover
    from dlc.topology.node_config import node_config

    return node_config(discover(from_file=topology_file)).attributes


def offer_json(agent_id: str, free: set[int], n: int, attributes: dict[str, str]) -> dict:
    """A v1 Offer dict for what the (simulated) agent has free: the Mesos side's data,
    which the scheduler's inventory learns from like any other offer."""
    ids = sorted(free)
    return {
        "id": {"value": f"o{n}"},
        "agent_id": {"value": agent_id},
        "hostname": agent_id,
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": AGENT_CPUS}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": AGENT_MEM_MIB}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": float(len(ids))}},
            {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in ids]}},
            # Mesos agents offer ports [31000-32000] by default; gangs take one per node
            {
                "name": "ports",
                "type": "RANGES",
                "ranges": {"range": [{"begin": 31000, "end": 32000}]},
            },  # fmt: skip
        ],
        "attributes": [
            {"name": k, "type": "TEXT", "text": {"value": v}} for k, v in attributes.items()
        ],
    }


def new_job(rng: random.Random, n: int, now: float) -> Job:
    gpus = rng.choice([1, 1, 1, 2, 2, 4, 8])
    nodes = 2 if gpus == 8 and rng.random() < 0.2 else 1
    spec = JobSpec(image="bench", gpus=gpus, nodes=nodes, cpus=4, mem_mib=16384)
    return Job(f"b{n}", "bench", spec, submitted_at=now)


def run(agents: int, rounds: int, arrivals: int, policy: str, seed: int) -> dict:
    """Simulate ``rounds`` offer rounds; returns the figures."""
    rng = random.Random(seed)
    attributes = agent_attributes(ROOT / "examples" / "topologies" / "dgx1-v100.txt")
    # The Mesos side: what each agent has free (agent id -> GPU indices)
    free = {f"agent-{i:04d}": set(range(8)) for i in range(agents)}
    names = list(free)
    queue: list[Job] = []
    running: list[tuple[int, str, tuple[int, ...]]] = []  # (ends at round, agent, ids)
    from dlc.scheduler.jobs.queue import Reservations, queue_order

    try:
        from dlc.mesos.offers import offer_view
    except ImportError:  # a checkout from before the offer parse left the core
        from dlc.scheduler.placement.model import OfferView

        offer_view = OfferView.from_mesos

    head = Reservations(reserve_after=20)
    config = PlacementConfig(policy=policy)
    offers_total = launched = gpus_busy_sum = 0
    place_seconds = 0.0
    job_no = offer_no = 0
    for rnd in range(rounds):
        for _ in range(arrivals):
            queue.append(new_job(rng, job_no, float(job_no)))
            job_no += 1
        offers = []
        for agent_id, ids in free.items():
            if ids:
                offers.append(offer_json(agent_id, ids, offer_no, attributes))
                offer_no += 1
        started = time.perf_counter()
        views = [offer_view(o) for o in offers]
        result = place(views, queue_order(queue), config, reserved=head.held())
        place_seconds += time.perf_counter() - started
        head.record_round(result.placed_jobs, result.waiting)
        for job in queue_order(queue):  # the core's rule: the first due job reserves
            if job.job_id in result.waiting and head.may_reserve(job.job_id, rnd):
                head.reserve(job.job_id, [names[rnd % agents]], rnd)
                break
        offers_total += len(offers)
        placed = set(result.placed_jobs)
        launched += len(placed)
        queue = [j for j in queue if j.job_id not in placed]
        for launch in result.launches:
            free[launch.agent_id] -= set(launch.gpu_ids)
            running.append((rnd + rng.randint(2, 12), launch.agent_id, launch.gpu_ids))
        for item in [r for r in running if r[0] <= rnd]:
            free[item[1]] |= set(item[2])
        running = [r for r in running if r[0] > rnd]
        gpus_busy_sum += sum(8 - len(ids) for ids in free.values())
    return {
        "agents": agents,
        "gpus_per_agent": 8,
        "rounds": rounds,
        "policy": policy,
        "offers": offers_total,
        "jobs_launched": launched,
        "jobs_queued_at_end": len(queue),
        "place_seconds": round(place_seconds, 4),
        "offers_per_second": round(offers_total / place_seconds, 1) if place_seconds else None,
        "mean_gpu_utilisation": round(gpus_busy_sum / (rounds * agents * 8), 3),
    }


def offer_round(queued: int, finished: int, rounds: int = 20, agents: int = 10) -> dict:
    """Median seconds of ``SchedulerCore.on_offers`` with ``queued`` waiting jobs (8 GPUs
    each; every agent offers one free GPU, so they all stay queued) and ``finished`` done
    jobs in the store."""
    import statistics
    import tempfile

    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore

    with suppress(ImportError):  # a checkout from before the Mesos TaskInfo left the core
        import dlc.mesos.codec  # noqa: F401  (the core's default engine codec)

    try:
        from dlc.store.sqlite import JobStore
    except ImportError:  # a checkout from before the re-layer ("before" figures)
        from dlc.scheduler.store import JobStore

    spec = JobSpec(image="bench", gpus=8, cpus=4, mem_mib=16384)
    with tempfile.TemporaryDirectory() as tmp:
        store = JobStore(Path(tmp) / "db")
        for i in range(finished):
            store.add_job(Job(f"f{i:06d}", "bench", spec, JobState.FINISHED, float(i)))
        for i in range(queued):
            store.add_job(Job(f"q{i:06d}", "bench", spec, JobState.QUEUED, 1e6 + i))
        core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")))
        if hasattr(core, "update_agents"):  # totals: the queued jobs are possible, just not now
            core.update_agents([_slave(f"agent-{a}") for a in range(agents)])
        times = []
        for rnd in range(rounds):
            offers = [
                offer_json(f"agent-{a}", {rnd % 8}, rnd * agents + a, {}) for a in range(agents)
            ]
            started = time.perf_counter()
            core.on_offers(offers)
            times.append(time.perf_counter() - started)
        store.close()
    return {
        "queued": queued,
        "finished": finished,
        "rounds": rounds,
        "median_round_ms": round(statistics.median(times) * 1000, 2),
        "max_round_ms": round(max(times) * 1000, 2),
    }


def _slave(agent_id: str) -> dict:
    return {
        "id": agent_id,
        "hostname": agent_id,
        "active": True,
        "resources": {"cpus": 64.0, "mem": 524288.0, "gpus": 8.0,
                      "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"},
    }  # fmt: skip


def main_rounds(args) -> int:
    cases = [(args.queued, 0), (10, args.finished)]
    results = [offer_round(q, f, args.rounds) for q, f in cases]
    cols = ["queued", "finished", "rounds", "median_round_ms", "max_round_ms"]
    print(" | ".join(f"{c:>16}" for c in cols))
    for res in results:
        print(" | ".join(f"{res[c]!s:>16}" for c in cols))
    if args.json:
        body: object = results
        if args.before:  # one file with both figures: this code ("after") and the old one
            before = json.loads(Path(args.before).read_text())
            body = {
                "after": results,
                "before": before.get("after", before) if isinstance(before, dict) else before,
                "before_how": args.before_how,
            }
        Path(args.json).write_text(json.dumps(body, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["place", "rounds"], default="place")
    parser.add_argument("--queued", type=int, default=5000, help="rounds mode: queued jobs")
    parser.add_argument("--finished", type=int, default=20000, help="rounds mode: done jobs")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--arrivals", type=int, default=400, help="new jobs per round")
    parser.add_argument("--policy", action="append", help="allocator policies (repeatable)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--before", help="rounds mode: a JSON this script wrote with an older checkout's code"
    )
    parser.add_argument("--before-how", default="", help="rounds mode: how --before was measured")
    args = parser.parse_args(argv)
    if args.mode == "rounds":
        return main_rounds(args)
    policies = args.policy or ["tree", "first-fit"]
    results = [run(args.agents, args.rounds, args.arrivals, p, args.seed) for p in policies]
    cols = ["policy", "agents", "offers", "jobs_launched", "place_seconds", "offers_per_second",
            "mean_gpu_utilisation"]  # fmt: skip
    print(" | ".join(f"{c:>20}" for c in cols))
    for res in results:
        print(" | ".join(f"{res[c]!s:>20}" for c in cols))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
