"""The job store: restart semantics, history, framework id, tokens.

Tests taking ``make_store`` run on both engines (SQLite and PostgreSQL, tests/store/conftest.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from dlc.errors import DlcError, JobNotFound
from dlc.scheduler.jobs.job import JobState, TaskPlacement
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import job
from tests.store.conftest import reopen


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 1
        return self.now


def test_everything_survives_a_restart(make_store):
    store = make_store(clock=Clock())
    queued = store.add_job(job("j1", gpus=2, command=["python", "x.py"]))
    running = store.add_job(job("j2"))
    task = TaskPlacement("j2.0.0", "agent-1", "h1", (0, 3), "o1", 0, "TASK_RUNNING")
    store.save_job(replace(running, state=JobState.RUNNING, tasks=(task,), message="ok"))
    store.framework_id = "fw-42"
    token = store.add_token("alice")
    store.close()

    again = reopen(store)
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


def test_history_has_increasing_timestamps_and_messages(make_store):
    store = make_store(clock=Clock())
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


def test_list_filters_by_user_and_state(make_store):
    store = make_store()
    store.add_job(job("j1"))
    store.add_job(replace(job("j2"), user="bob"))
    store.add_job(replace(job("j3"), state=JobState.RUNNING))
    assert [j.job_id for j in store.list_jobs(user="alice")] == ["j1", "j3"]
    assert [j.job_id for j in store.list_jobs(states={JobState.QUEUED})] == ["j1", "j2"]


def test_missing_job_and_bad_token(make_store):
    store = make_store()
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


def mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_the_db_and_its_wal_and_shm_are_private(tmp_path):
    store = JobStore(tmp_path / "new" / "scheduler.db")
    store.add_job(job("j1"))
    for name in ("scheduler.db", "scheduler.db-wal", "scheduler.db-shm"):
        assert mode(tmp_path / "new" / name) == 0o600, name
    assert mode(tmp_path / "new") == 0o700
    store.close()


def test_a_readable_existing_db_is_made_private_with_a_warning(tmp_path, caplog):
    path = tmp_path / "scheduler.db"
    JobStore(path).close()
    path.chmod(0o644)
    JobStore(path).close()
    assert mode(path) == 0o600
    assert "was readable by other users" in caplog.text


def test_token_files_and_the_local_work_dir_are_private(tmp_path, caplog):
    from dlc.app.service import private_dir, write_token_file

    token_file = tmp_path / "admin.token"
    token_file.write_text("old\n")
    token_file.chmod(0o644)
    write_token_file(token_file, "secret")
    assert mode(token_file) == 0o600 and token_file.read_text() == "secret\n"
    assert "was readable by other users" in caplog.text
    fresh = tmp_path / "fresh.token"
    write_token_file(fresh, "t")
    assert mode(fresh) == 0o600
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    work.chmod(0o755)
    assert mode(private_dir(work)) == 0o700


def test_tokens_carry_a_priority_ceiling_expiry_and_revocation(make_store):
    clock = Clock()
    store = make_store(clock=clock)
    plain = store.add_token("alice")
    granted = store.add_token("bob", max_priority=50)
    admin = store.add_token("root", admin=True, max_priority=3)
    short = store.add_token("carol", expires_at=clock.now + 10)
    assert store.authenticate(plain) == ("alice", False, 0)
    assert store.authenticate(granted) == ("bob", False, 50)
    assert store.authenticate(admin) == ("root", True, None)  # admins: no ceiling
    assert store.authenticate(short) == ("carol", False, 0)
    clock.now += 20
    assert store.authenticate(short) is None and store.user_for_token(short) is None
    listed = {t.user: t for t in store.list_tokens()}
    assert listed["bob"].max_priority == 50 and listed["root"].max_priority is None
    assert all(plain not in repr(t) for t in listed.values())
    revoked = store.revoke_token(listed["bob"].token_id)
    assert revoked.revoked and store.authenticate(granted) is None
    store.revoke_token(plain)  # by the token itself
    assert store.user_for_token(plain) is None
    assert store.authenticate(admin) == ("root", True, None)
    with pytest.raises(DlcError, match="no token match"):
        store.revoke_token("ffffffffffff")


def test_create_token_cli_grants_a_max_priority(tmp_path):
    from click.testing import CliRunner

    from dlc.cli.main import cli

    db = tmp_path / "scheduler.db"
    result = CliRunner().invoke(
        cli, ["scheduler", "--db", str(db), "--create-token", "dave", "--max-priority", "20"]
    )
    assert result.exit_code == 0, result.output
    assert JobStore(db).authenticate(result.output.strip()) == ("dave", False, 20)


@pytest.mark.parametrize(
    ("user", "states", "newest_first"),
    [
        (None, {JobState.QUEUED}, False),  # every offer round
        (None, {JobState.STAGING, JobState.RUNNING}, False),  # reconciliation
        ("alice", None, True),  # dlc jobs, newest first
        ("alice", {JobState.RUNNING}, True),
        (None, None, True),  # an admin's listing
    ],
)
def test_listings_use_an_index_not_a_scan_of_every_job(tmp_path, user, states, newest_first):
    store = JobStore(tmp_path / "scheduler.db")
    sql, args = store.list_sql(user, states, limit=50, newest_first=newest_first)
    plan = [r[3] for r in store._db.execute("EXPLAIN QUERY PLAN " + sql, args)]
    [reads] = [step for step in plan if " jobs " in step]
    # filtered: a search of the index; unfiltered: the index in order, stopping at the limit
    expected = "SEARCH jobs USING INDEX" if user or states else "SCAN jobs USING INDEX"
    assert reads.startswith(expected), plan


def test_the_queue_read_per_offer_round_touches_only_queued_rows(tmp_path):
    store = JobStore(tmp_path / "scheduler.db")
    for i in range(300):
        store.add_job(replace(job(f"f{i:04d}"), state=JobState.FINISHED))
    store.add_job(job("q1"))
    steps = []
    store._db.set_progress_handler(lambda: steps.append(1), 100)
    assert [j.job_id for j in store.list_jobs(states={JobState.QUEUED})] == ["q1"]
    store._db.set_progress_handler(None, 0)
    assert len(steps) < 20  # a scan of 300 finished rows takes far more VM steps


def test_newest_first_with_a_limit(make_store):
    store = make_store(clock=Clock())
    for i in range(5):
        store.add_job(replace(job(f"j{i}"), submitted_at=float(i + 1)))
    got = store.list_jobs(user="alice", newest_first=True, limit=2)
    assert [j.job_id for j in got] == ["j4", "j3"]
