"""The HA fault run: kill the leading instance again and again; nothing is lost or doubled.

``python -m tests.ha.run --seed 1 --kills 40 --json bench/results/ha.json`` starts a
ZooKeeper and a PostgreSQL with the project's scripts, three instances
(:mod:`tests.ha.instance`), submits jobs throughout, and at seeded random moments kills
the leader: SIGKILL, or SIGSTOP until its ZooKeeper session expires (then SIGCONT: the
old leader wakes up believing it leads, and must be fenced). It reports the time to a
new leader (p50/p99) and counts jobs lost, launched twice and GPUs used twice.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dlc.scheduler.jobs.job import JobState
from dlc.store.postgres import JobStore
from tests.scheduler.helpers import job
from tests.services import Postgres, ZooKeeper

GPUS = 4


def _spawn(zk: str, db: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ha.instance", zk, db, str(GPUS)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def _epoch(store) -> int:
    return int(store.get_meta("leader_epoch") or 0)


def _leader(store, procs, timeout=30.0) -> tuple[subprocess.Popen, int]:
    """The instance that leads at the current epoch (it printed `elected`)."""
    deadline = time.monotonic() + timeout
    epoch = _epoch(store)
    while time.monotonic() < deadline:
        for p in procs:
            if getattr(p, "epoch", None) == epoch and p.poll() is None:
                return p, epoch
        for p in procs:
            if p.poll() is None and not hasattr(p, "epoch"):
                os.set_blocking(p.stdout.fileno(), False)
                line = p.stdout.readline()
                if line.startswith("elected epoch="):
                    p.epoch = int(line.split("=")[1])
        time.sleep(0.02)
        epoch = _epoch(store)
    raise AssertionError("no leader within 30 s")


def _check_gpus(store, doubled: set) -> None:
    held: dict[int, str] = {}
    for j in store.list_jobs(states={JobState.STAGING, JobState.RUNNING}):
        for t in j.tasks:
            for g in t.gpu_ids:
                if g in held:
                    doubled.add((g, held[g], j.job_id))
                held[g] = j.job_id


def _limit_idle_transactions(db: str) -> None:
    """A leader frozen inside a transaction holds the epoch row lock: end such sessions
    after 3 s, as docs/ha.md tells production to (else the next claim waits forever)."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        name = db.rsplit("/", 1)[1]
        conn.execute(f'ALTER DATABASE "{name}" SET idle_in_transaction_session_timeout = 3000')


def run(seed: int, kills: int) -> dict:
    rng = random.Random(seed)
    zk_server = ZooKeeper(Path(f"/tmp/dlc-ha-zk-{os.getpid()}"))
    pg = Postgres()
    procs: list[subprocess.Popen] = []
    try:
        db = pg.new_db()
        _limit_idle_transactions(db)
        store = JobStore(db)
        zk = f"zk://{zk_server.hosts}/dlc-ha-{seed}"
        procs = [_spawn(zk, db) for _ in range(3)]
        submitted, takeovers, doubled, kinds = [], [], set(), []
        for _ in range(kills):
            leader, epoch = _leader(store, procs)
            for _ in range(rng.randint(1, 4)):
                submitted.append(store.add_job(job(store.new_job_id())).job_id)
            time.sleep(rng.uniform(0.1, 1.0))  # a seeded random point of the run
            _check_gpus(store, doubled)
            kind = rng.choice(["sigkill", "expire"])
            kinds.append(kind)
            t0 = time.monotonic()
            leader.send_signal(signal.SIGKILL if kind == "sigkill" else signal.SIGSTOP)
            waited = time.monotonic() + 60
            while _epoch(store) == epoch:
                assert time.monotonic() < waited, f"no new leader 60 s after the {kind}"
                time.sleep(0.02)
            takeovers.append(time.monotonic() - t0)
            if kind == "expire":
                leader.send_signal(signal.SIGCONT)  # wakes up believing it leads
                leader.wait(timeout=30)
                assert leader.returncode == 3, f"old leader exited {leader.returncode}"
            else:
                leader.wait(timeout=10)
            procs.remove(leader)
            procs.append(_spawn(zk, db))
            _check_gpus(store, doubled)
        deadline = time.monotonic() + 60
        while store.list_jobs(states={JobState.QUEUED, JobState.STAGING, JobState.RUNNING}):
            assert time.monotonic() < deadline, "jobs did not finish"
            _check_gpus(store, doubled)
            time.sleep(0.1)
        stored = {j.job_id: j for j in store.list_jobs()}
        lost = [j for j in submitted if j not in stored or stored[j].state != JobState.FINISHED]
        twice = [j for j in submitted if [s for _, s, _ in store.history(j)].count("staging") > 1]
        takeovers.sort()
        return {
            "seed": seed, "kills": kills, "sigkill": kinds.count("sigkill"),
            "session_expiry": kinds.count("expire"), "jobs": len(submitted),
            "takeover_p50_s": round(statistics.median(takeovers), 2),
            "takeover_p99_s": round(takeovers[min(len(takeovers) - 1, int(0.99 * len(takeovers)))], 2),  # noqa: E501
            "takeover_max_s": round(takeovers[-1], 2),
            "jobs_lost": len(lost), "launched_twice": len(twice), "gpus_used_twice": len(doubled),
        }  # fmt: skip
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
        zk_server.stop()
        pg.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.seed, args.kills)
    for key, value in result.items():
        print(f"{key:>18}: {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
