"""Kill the leading *real* ``dlc scheduler`` again and again (docs/ha.md, "Real schedulers").

``python -m tests.ha.real_run --seed 1 --kills 10`` starts ZooKeeper, PostgreSQL, the real
Mesos master (found through ZooKeeper, :mod:`tests.ha.announce`) and three ``dlc scheduler
--zk`` instances, submits Docker jobs through the leader and SIGKILLs the leader at seeded
random points, starting a fresh standby each time; every ``--master-every`` kills it also
restarts the master on another port (found again through ZooKeeper). It reports the time
until another instance answers ``leading`` on ``/v1/health`` (p50/p99) and counts jobs lost (not
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


def _states(port: int) -> dict[str, dict]:
    _, _, listed = http("GET", f"http://127.0.0.1:{port}/v1/jobs", TOKEN)
    return {j["id"]: j for j in listed.get("jobs", [])}


def _wait_done(port: int, jobs: list[str], timeout_s: float) -> dict[str, dict]:
    """Job id -> job once every job of ``jobs`` has ended (or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = _states(port)
        if all(states.get(j, {}).get("state") in ENDED for j in jobs):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(1)


ENDED = ("finished", "failed", "killed", "lost")


def run(seed: int, kills: int, base: Path, master_every: int = 10) -> dict:
    rng = random.Random(seed)
    zk = ZooKeeper(base / "zk")
    pg = Postgres()
    cluster = HaCluster(base, uuid.uuid4().hex[:12], zk.hosts, pg.new_db())
    jobs, takeovers, master_restarts = [], [], 0
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
            if master_every and (k + 1) % master_every == 0 and k + 1 < kills:
                # Restart the master (on another port: only ZooKeeper knows it) once the
                # jobs so far ended: its agent dies with it here, which would fail their tasks.
                _wait_done(leader, jobs, 120)
                cluster.kill_master()
                cluster.start_master(new_port=True)
                master_restarts += 1
        states = _wait_done(leader, jobs, 180)
        lost = [j for j in jobs if states.get(j, {}).get("state") != "finished"]
        twice = [j for j in jobs if states.get(j, {}).get("attempt", 0) > 0]
        takeovers.sort()
        return {
            "seed": seed, "kills": kills, "master_restarts": master_restarts, "jobs": len(jobs),
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
    parser.add_argument("--master-every", type=int, default=10,
                        help="restart the master after every N kills (0: never)")  # fmt: skip
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dlc-ha-real-"))
    result = run(args.seed, args.kills, base, args.master_every)
    for key, value in result.items():
        print(f"{key:>16}: {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
