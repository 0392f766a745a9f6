"""Kill the leading *real* ``dlc scheduler`` again and again (docs/ha.md, "Real schedulers").

``python -m tests.ha.real_run --seed 1 --kills 10`` starts ZooKeeper, PostgreSQL, the real
Mesos master (found through ZooKeeper, :mod:`tests.ha.announce`) and three ``dlc scheduler
--zk`` instances, submits Docker jobs through the leader and SIGKILLs the leader at seeded
random points, starting a fresh standby each time. It reports the time until another
instance answers ``leading`` on ``/v1/health`` (p50/p99) and counts jobs lost (not
``finished``) and launched twice (``attempt`` > 0: a new leader that did not adopt a running
task would relaunch it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from tests.fault.clusters import TOKEN
from tests.fault.runner import IMAGE
from tests.ha.cluster import HaCluster, http
from tests.services import Postgres, ZooKeeper


def _submit(port: int, name: str, sleep_s: float) -> str:
    body = {"image": IMAGE, "gpus": 1, "cpus": 0.1, "mem_mib": 64, "name": name,
            "command": ["sh", "-c", f"sleep {sleep_s:.1f}"]}  # fmt: skip
    status, _, job = http("POST", f"http://127.0.0.1:{port}/v1/jobs", TOKEN, body)
    assert status in (200, 201), (status, job)
    return job["id"]


def run(seed: int, kills: int, base: Path) -> dict:
    rng = random.Random(seed)
    zk = ZooKeeper(base / "zk")
    pg = Postgres()
    cluster = HaCluster(base, uuid.uuid4().hex[:12], zk.hosts, pg.new_db())
    jobs, takeovers = [], []
    try:
        cluster.start_master()
        for _ in range(3):
            cluster.start_scheduler()
        leader = cluster.leader(timeout_s=90)
        for k in range(kills):
            for i in range(rng.randint(1, 3)):
                jobs.append(_submit(leader, f"k{k}-{i}", rng.uniform(1, 6)))
            time.sleep(rng.uniform(0.5, 4.0))  # a seeded random point of the run
            t0 = time.monotonic()
            cluster.schedulers.pop(leader).kill()
            leader = cluster.leader(timeout_s=60)
            takeovers.append(time.monotonic() - t0)
            cluster.start_scheduler()
        deadline = time.monotonic() + 180
        while True:
            _, _, listed = http("GET", f"http://127.0.0.1:{leader}/v1/jobs", TOKEN)
            states = {j["id"]: j for j in listed.get("jobs", [])}
            if all(states.get(j, {}).get("state") in ("finished", "failed", "killed", "lost")
                   for j in jobs) or time.monotonic() > deadline:  # fmt: skip
                break
            time.sleep(1)
        lost = [j for j in jobs if states.get(j, {}).get("state") != "finished"]
        twice = [j for j in jobs if states.get(j, {}).get("attempt", 0) > 0]
        takeovers.sort()
        return {
            "seed": seed, "kills": kills, "jobs": len(jobs),
            "takeover_p50_s": round(statistics.median(takeovers), 2),
            "takeover_p99_s": round(takeovers[min(len(takeovers) - 1, int(0.99 * len(takeovers)))], 2),  # noqa: E501
            "jobs_lost": len(lost), "launched_twice": len(twice), "lost_ids": lost,
        }  # fmt: skip
    finally:
        cluster.stop()
        zk.stop()
        pg.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.seed, args.kills, Path(tempfile.mkdtemp(prefix="dlc-ha-real-")))
    for key, value in result.items():
        print(f"{key:>16}: {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
