"""The SQLite job store: restart semantics, history, framework id, tokens."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from dlc.errors import DlcError, JobNotFound
from dlc.scheduler.jobs import JobState, TaskPlacement
from dlc.scheduler.store import JobStore

from .helpers import job


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 1
        return self.now


def test_everything_survives_a_restart(tmp_path):
    path = tmp_path / "dlc.db"
    store = JobStore(path, clock=Clock())
    queued = store.add_job(job("j1", gpus=2, command=["python", "x.py"]))
    running = store.add_job(job("j2"))
    task = TaskPlacement("j2.0.0", "agent-1", "h1", (0, 3), "o1", 0, "TASK_RUNNING")
    store.save_job(replace(running, state=JobState.RUNNING, tasks=(task,), message="ok"))
    store.framework_id = "fw-42"
    token = store.add_token("alice")
    store.close()

    again = JobStore(path)
    assert again.get_job("j1") == queued
    got = again.get_job("j2")
    assert got.state is JobState.RUNNING and got.tasks == (task,) and got.message == "ok"
    assert again.framework_id == "fw-42"
    assert again.user_for_token(token) == ("alice", False)
    assert [s for _, s, _ in again.history("j2")] == ["queued", "running"]


def test_wal_mode(tmp_path):
    JobStore(tmp_path / "w.db").close()
    mode = sqlite3.connect(tmp_path / "w.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_history_has_increasing_timestamps_and_messages():
    store = JobStore(":memory:", clock=Clock())
    j = store.add_job(job("j1"))
    store.save_job(j.with_state(JobState.STAGING, "launching"))
    store.save_job(j.with_state(JobState.STAGING, "same state, no entry"))
    store.save_job(j.with_state(JobState.FINISHED, "done"))
    hist = store.history("j1")
    assert [(s, m) for _, s, m in hist] == [
        ("queued", "submitted"),
        ("staging", "launching"),
        ("finished", "done"),
    ]
    times = [t for t, _, _ in hist]
    assert times == sorted(times) and len(set(times)) == 3


def test_list_filters_by_user_and_state():
    store = JobStore(":memory:")
    store.add_job(job("j1"))
    store.add_job(replace(job("j2"), user="bob"))
    store.add_job(replace(job("j3"), state=JobState.RUNNING))
    assert [j.job_id for j in store.list_jobs(user="alice")] == ["j1", "j3"]
    assert [j.job_id for j in store.list_jobs(states={JobState.QUEUED})] == ["j1", "j2"]


def test_missing_job_and_bad_token():
    store = JobStore(":memory:")
    with pytest.raises(JobNotFound, match="no job nope"):
        store.get_job("nope")
    with pytest.raises(JobNotFound):
        store.save_job(job("ghost"))
    assert store.user_for_token("wrong") is None


def test_tokens_are_stored_hashed(tmp_path):
    store = JobStore(tmp_path / "t.db")
    token = store.add_token("root", admin=True)
    assert store.user_for_token(token) == ("root", True)
    raw = (tmp_path / "t.db").read_bytes() + (tmp_path / "t.db-wal").read_bytes()
    assert token.encode() not in raw


def test_unopenable_path_is_a_dlc_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(DlcError, match="cannot open the job database"):
        JobStore(tmp_path / "file" / "db.sqlite")
