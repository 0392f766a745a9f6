"""``dlc scheduler --zk`` end to end: two real instances, one PostgreSQL, one ZooKeeper, the
real Mesos master found through ``--master zk://.../mesos`` (docs/ha.md says what is real).

One run, in order: the standby redirects writes to the leader (307); a job runs; the master
is SIGKILLed and started again on another port (its replicated log recovered, published anew
in ZooKeeper)
and the leader re-detects it and re-registers with the same framework id; a second job
runs; the leader is SIGKILLed, the standby takes over with the saved framework id and a
third job runs; no job is lost or run twice.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.fault.clusters import TOKEN
from tests.fault.runner import IMAGE
from tests.ha.cluster import HaCluster, http
from tests.services import Postgres, ZooKeeper

pytestmark = [pytest.mark.slow, pytest.mark.mesos, pytest.mark.docker]


def _body(name: str) -> dict:
    return {"image": IMAGE, "gpus": 1, "cpus": 0.1, "mem_mib": 64, "name": name,
            "command": ["sh", "-c", "sleep 1"]}  # fmt: skip


def _framework_id(cluster: HaCluster, port: int, timeout_s: float = 60.0) -> str:
    """The framework id of the leader at ``port`` once it is registered."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, _, snap = http("GET", f"http://127.0.0.1:{port}/v1/dashboard", cluster_token())
        info = snap.get("scheduler", {}) if status == 200 else {}
        if info.get("registered") and info.get("framework_id"):
            return info["framework_id"]
        time.sleep(0.3)
    raise AssertionError(f"the leader on :{port} did not register in {timeout_s:g} s")


def cluster_token() -> str:
    return TOKEN


def _run_job(port: int, name: str, timeout_s: float = 60.0) -> str:
    status, _, job = http("POST", f"http://127.0.0.1:{port}/v1/jobs", cluster_token(), _body(name))
    assert status in (200, 201), (status, job)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _, _, shown = http("GET", f"http://127.0.0.1:{port}/v1/jobs/{job['id']}",
                           cluster_token())  # fmt: skip
        if shown.get("state") in ("finished", "failed", "killed", "lost"):
            assert shown["state"] == "finished", shown
            return job["id"]
        time.sleep(0.3)
    raise AssertionError(f"job {name} did not finish in {timeout_s:g} s: {shown}")


def test_two_schedulers_standby_redirects_and_takes_over(tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    pg = Postgres()
    cluster = HaCluster(tmp_path, uuid.uuid4().hex[:12], zk.hosts, pg.new_db())
    try:
        cluster.start_master()
        first = cluster.start_scheduler()
        leader = cluster.leader()
        second = cluster.start_scheduler()
        standby = second if leader == first else first
        fid = _framework_id(cluster, leader)

        # the standby answers health and redirects writes to the leader
        deadline = time.monotonic() + 30
        while not (cluster.health(standby) or {}).get("leader_url"):
            assert time.monotonic() < deadline, "the standby never learnt the leader"
            time.sleep(0.2)
        status, headers, _ = http("POST", f"http://127.0.0.1:{standby}/v1/jobs",
                                  cluster_token(), _body("redirected"))  # fmt: skip
        assert status == 307
        assert headers["location"] == f"http://127.0.0.1:{leader}/v1/jobs"
        jobs = [_run_job(leader, "before-master-restart")]

        # the master restarts; the scheduler re-detects it through ZooKeeper
        old_master = cluster.address
        cluster.kill_master()
        cluster.start_master(new_port=True)  # only ZooKeeper knows where it went
        assert cluster.address != old_master
        jobs.append(_run_job(leader, "after-master-restart", timeout_s=90))
        assert _framework_id(cluster, leader) == fid

        # the leader dies; the standby takes over with the saved framework id
        cluster.schedulers[leader].kill()
        assert cluster.leader(among=[standby]) == standby
        assert _framework_id(cluster, standby) == fid
        jobs.append(_run_job(standby, "after-takeover", timeout_s=90))

        _, _, listed = http("GET", f"http://127.0.0.1:{standby}/v1/jobs", cluster_token())
        states = {j["id"]: j["state"] for j in listed["jobs"]}
        assert all(states[j] == "finished" for j in jobs), states
        for j in jobs:
            _, _, shown = http("GET", f"http://127.0.0.1:{standby}/v1/jobs/{j}", cluster_token())
            assert shown["attempt"] == 0, shown  # never relaunched
    finally:
        cluster.stop()
        zk.stop()
        pg.remove()
