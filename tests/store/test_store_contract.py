"""One set of job-store tests run against every implementation of the JobStore port:
SQLite (a file) and memory. What the scheduler relies on must answer alike in both."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.errors import DlcError, JobNotFound
from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.jobs.job import JobState, TaskPlacement
from dlc.store.memory import MemoryJobStore
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import job


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 1
        return self.now


@pytest.fixture(params=["sqlite", "memory"])
def make_store(request, tmp_path):
    def make(clock=None):
        kwargs = {"clock": clock} if clock else {}
        if request.param == "memory":
            return MemoryJobStore(**kwargs)
        return JobStore(tmp_path / "dlc.db", **kwargs)

    return make


def test_jobs_round_trip_with_tasks_and_history(make_store):
    store = make_store(Clock())
    queued = store.add_job(job("j1", gpus=2, command=["python", "x.py"]))
    running = store.add_job(job("j2"))
    task = TaskPlacement("j2.0.0", "agent-1", "h1", (0, 3), "o1", 0, "TASK_RUNNING")
    store.save_job(replace(running, state=JobState.RUNNING, tasks=(task,), message="ok"))
    store.save_job(store.get_job("j2"), event="explicit event")
    store.save_job(replace(store.get_job("j2"), message="same state: no entry"))
    assert store.get_job("j1") == queued
    got = store.get_job("j2")
    assert got.state is JobState.RUNNING and got.tasks == (task,)
    assert [(s, m) for _, s, m in store.history("j2")] == [
        ("queued", "submitted"),
        ("running", "ok"),
        ("running", "explicit event"),
    ]
    times = [t for t, _, _ in store.history("j2")]
    assert times == sorted(times)
    assert [(j, s) for j, _, s in store.state_events()] == [
        ("j1", "queued"), ("j2", "queued"), ("j2", "running"), ("j2", "running"),
    ]  # fmt: skip


def test_listing_filters_orders_and_pages(make_store):
    store = make_store(Clock())
    for i in range(5):
        user = "bob" if i == 2 else "alice"
        store.add_job(replace(job(f"j{i}"), user=user, submitted_at=10.0 + i))
    store.save_job(store.get_job("j3").with_state(JobState.RUNNING, "up"))
    ids = lambda jobs: [j.job_id for j in jobs]  # noqa: E731
    assert ids(store.list_jobs()) == ["j0", "j1", "j2", "j3", "j4"]
    assert ids(store.list_jobs(user="alice")) == ["j0", "j1", "j3", "j4"]
    assert ids(store.list_jobs(states={JobState.RUNNING})) == ["j3"]
    assert ids(store.list_jobs(states=set())) == []
    assert ids(store.list_jobs(limit=2, newest_first=True)) == ["j4", "j3"]
    assert ids(store.list_jobs_page(None, 2)) == ["j4", "j3"]
    assert ids(store.list_jobs_page(None, 2, before="j3")) == ["j2", "j1"]
    assert ids(store.list_jobs_page("alice", 10, before="j3")) == ["j1", "j0"]
    assert ids(store.list_jobs_page(None, 2, before="missing")) == []


def test_missing_jobs_and_ids(make_store):
    store = make_store()
    with pytest.raises(JobNotFound, match="no job nope"):
        store.get_job("nope")
    with pytest.raises(JobNotFound):
        store.save_job(job("ghost"))
    fresh = {store.new_job_id() for _ in range(20)}
    assert len(fresh) == 20 and all(j.startswith("j") and len(j) == 9 for j in fresh)
    assert store.quarantined() == []


def test_meta_and_framework_id(make_store):
    store = make_store()
    assert store.framework_id is None and store.get_meta("x") is None
    store.framework_id = "fw-1"
    store.set_meta("x", "1")
    assert store.framework_id == "fw-1" and store.get_meta("x") == "1"
    store.set_meta("x", None)
    store.framework_id = None
    assert store.framework_id is None and store.get_meta("x") is None


def test_tokens_ceiling_expiry_and_revocation(make_store):
    clock = Clock()
    store = make_store(clock)
    plain = store.add_token("alice")
    granted = store.add_token("bob", max_priority=50)
    admin = store.add_token("root", admin=True, max_priority=3)
    short = store.add_token("carol", expires_at=clock.now + 10)
    given = store.add_token("dave", token="chosen-token")
    assert given == "chosen-token" and store.user_for_token(given) == ("dave", False)
    assert store.authenticate(plain) == ("alice", False, 0)
    assert store.authenticate(granted) == ("bob", False, 50)
    assert store.authenticate(admin) == ("root", True, None)
    clock.now += 20
    assert store.authenticate(short) is None and store.user_for_token("wrong") is None
    listed = {t.user: t for t in store.list_tokens()}
    assert [t.user for t in store.list_tokens()] == ["alice", "bob", "root", "carol", "dave"]
    assert listed["bob"].max_priority == 50 and listed["root"].max_priority is None
    assert store.revoke_token(listed["bob"].token_id).revoked
    assert store.authenticate(granted) is None
    store.revoke_token(plain)
    assert store.user_for_token(plain) is None
    with pytest.raises(DlcError, match="no token match"):
        store.revoke_token("ffffffffffff")


def test_the_core_runs_on_either_store(make_store):
    store = make_store(Clock())
    core = SchedulerCore(store, clock=lambda: 50.0, resolver=lambda s: ("img:1", None))
    submitted = core.submit("alice", job("x").spec)
    assert store.get_job(submitted.job_id).state is JobState.QUEUED
    assert [j.job_id for j in core.queued_jobs()] == [submitted.job_id]
    again = SchedulerCore(store, resolver=lambda s: ("img:1", None))  # a restart reads it back
    assert [j.job_id for j in again.queued_jobs()] == [submitted.job_id]
