"""One unreadable job row is quarantined; listing, pages, /metrics and offer rounds go on."""

from __future__ import annotations

import json
import sqlite3
import sys
import urllib.request
from pathlib import Path

import pytest

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from dlc.errors import JobNotFound
from dlc.scheduler.jobs.job import JobState
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import job

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
STAND_IN = f"{sys.executable} {ROOT / 'tests' / 'scheduler' / 'stand_in_executor.py'}"
SPEC = {"image": "none", "gpus": 1, "command": ["true"]}

#: job id -> (column overrides, the reason's words); each row breaks one rule
BAD_ROWS = {
    "jnewfield": ({"spec": json.dumps({**SPEC, "gpu_share": 0.5})}, "gpu_share"),
    "jstate": ({"state": "paused"}, "unknown state 'paused'"),
    "jjson": ({"spec": '{"image": "none", '}, "spec is not valid JSON"),
    "jtype": ({"attempt": "two"}, "attempt is 'two', not a count"),
    "jtasks": ({"tasks": '[{"task_id": 5}]'}, "task"),
    "jrange": ({"spec": json.dumps({**SPEC, "gpus": 999})}, "spec: gpus"),
}


def insert_raw(path, job_id, **columns):
    row = {
        "job_id": job_id,
        "user": "alice",
        "spec": json.dumps(SPEC),
        "state": "queued",
        "submitted_at": 5.0,
        "attempt": 0,
        "tasks": "[]",
        "message": "",
        "kill_requested": 0,
        "failures": 0,
        "updated_at": 5.0,
        **columns,
    }
    db = sqlite3.connect(path)
    db.execute(
        f"INSERT INTO jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        tuple(row.values()),
    )
    db.commit()
    db.close()


def poisoned(path):
    store = JobStore(path)
    store.add_job(job("jgood"))
    store.close()
    for job_id, (columns, _) in BAD_ROWS.items():
        insert_raw(path, job_id, **columns)
    # a finished job a newer DLC wrote: history only, its unknown field is dropped
    old = {**SPEC, "gpu_share": 0.5}
    insert_raw(path, "jdone", state="finished", spec=json.dumps(old))


def test_each_bad_row_is_quarantined_once_with_its_reason(tmp_path, caplog):
    path = tmp_path / "scheduler.db"
    poisoned(path)
    store = JobStore(path)
    assert {j.job_id for j in store.list_jobs()} == {"jgood", "jdone"}
    assert [j.job_id for j in store.list_jobs(states={JobState.QUEUED})] == ["jgood"]
    assert store.list_jobs()  # again: nothing new logged
    found = {q.job_id: q for q in store.quarantined()}
    assert set(found) == set(BAD_ROWS)
    for job_id, (_, words) in BAD_ROWS.items():
        assert words in found[job_id].reason, found[job_id].reason
        assert found[job_id].row["job_id"] == job_id  # the raw row is kept to inspect
    warnings = [r.getMessage() for r in caplog.records if "quarantine" in r.getMessage()]
    assert len(warnings) == len(BAD_ROWS)
    assert "gpu_share" in next(r.getMessage() for r in caplog.records if "jdone" in r.getMessage())
    with pytest.raises(JobNotFound, match="cannot be read and is quarantined"):
        store.get_job("jstate")
    assert store.new_job_id() not in found
    store.close()
    assert len(JobStore(path).quarantined()) == len(BAD_ROWS)  # kept across restarts


def test_a_row_that_cannot_be_moved_is_still_skipped(tmp_path):
    path = tmp_path / "scheduler.db"
    poisoned(path)
    store = JobStore(path)
    store._db.execute("PRAGMA query_only = 1")  # the move cannot be written
    assert {j.job_id for j in store.list_jobs(limit=10)} == {"jgood", "jdone"}
    assert all(q.in_memory_only for q in store.quarantined())
    assert [j.job_id for j in store.list_jobs(newest_first=True, limit=1)] in (
        ["jgood"],
        ["jdone"],
    )


def test_dlc_local_serves_lists_pages_metrics_and_runs_jobs_past_bad_rows(tmp_path):
    work = tmp_path / "state"
    work.mkdir()
    poisoned(work / "scheduler.db")
    cluster = LocalCluster(
        LocalConfig(
            simulate=str(DGX1),
            work_dir=str(work),
            api_port=0,
            executor_command=STAND_IN,
            admin_token="adm-token",
        )
    ).start()
    try:
        url = cluster.service.api_url
        client = ApiClient(url, "adm-token")
        listed = {j["id"] for j in client.jobs()}
        assert {"jgood", "jdone"} <= listed and not listed & set(BAD_ROWS)
        for page in ("/", "/metrics"):
            with urllib.request.urlopen(url + page, timeout=10) as resp:
                assert resp.status == 200
        submitted = client.submit({"image": "none", "gpus": 2, "command": ["echo", "ok"]})
        from tests.app.test_local import wait_done

        assert wait_done(client, submitted["id"])["state"] == "finished"
        assert wait_done(client, "jgood")["state"] == "finished"
        assert {q.job_id for q in cluster.service.store.quarantined()} == set(BAD_ROWS)
    finally:
        cluster.stop()
