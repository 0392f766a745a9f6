"""One scheduler instance of the HA fault run: the real election and the real store.

``python -m tests.ha.instance ZK_URL DB_URL GPUS`` stands by until elected
(:class:`dlc.app.leader.LeaderElection`), claims the leader epoch
(:meth:`JobStore.claim_epoch`) and then does what the scheduler does to the store on each
offer round: puts queued jobs on free GPUs (STAGING -> RUNNING, recording the GPU) and
finishes running ones. It does not talk to Mesos (docs/ha.md says what that leaves out).
On a lost session it fences its store and exits 3, like ``dlc scheduler --zk``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import replace

from dlc.app.leader import LeaderElection
from dlc.errors import StoreError
from dlc.scheduler.jobs.job import JobState, TaskPlacement
from dlc.store.select import open_store


def _round(store, gpus: int) -> None:
    running = store.list_jobs(states={JobState.STAGING, JobState.RUNNING})
    used = {g for j in running for t in j.tasks for g in t.gpu_ids}
    now = time.time()
    for j in running:
        if j.state is JobState.STAGING:
            store.save_job(replace(j, state=JobState.RUNNING, message="running"))
        elif now - j.submitted_at > 0.3:
            store.save_job(replace(j, state=JobState.FINISHED, message="done"))
    for j in store.list_jobs(states={JobState.QUEUED}):
        free = sorted(set(range(gpus)) - used)
        if not free:
            return
        task = TaskPlacement(f"{j.job_id}.0", "agent-1", "h1", (free[0],), "o", 0, "TASK_STAGING")
        store.save_job(replace(j, state=JobState.STAGING, tasks=(task,), message="launch"))
        used.add(free[0])


def main(zk: str, db: str, gpus: int) -> int:
    store = open_store(db)
    elected = threading.Event()
    lost = threading.Event()

    def on_lost(why: str) -> None:
        store.fence()
        lost.set()

    election = LeaderElection(zk, f"http://pid-{os.getpid()}", elected.set, on_lost,
                              session_timeout_s=2.0)  # fmt: skip
    election.start()
    elected.wait()
    print(f"elected epoch={store.claim_epoch()}", flush=True)
    while not lost.is_set():
        try:
            _round(store, gpus)
        except StoreError as exc:
            if exc.kind == "fenced":
                print("fenced", flush=True)
                os._exit(3)
        time.sleep(0.05)
    os._exit(3)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
