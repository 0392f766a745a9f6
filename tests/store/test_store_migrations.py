"""Schema versions: files of the DLC before versioning migrate; newer files are refused."""

from __future__ import annotations

import json
import sqlite3

import pytest

from dlc.errors import StoreError
from dlc.scheduler.jobs.job import JobState
from dlc.store import schema as store_schema
from dlc.store.schema import SCHEMA_VERSION
from dlc.store.sqlite import JobStore

#: the DDL of the store before schema versioning, verbatim (main at 9a9fe6e)
LEGACY_DDL = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    tasks TEXT NOT NULL DEFAULT '[]',
    message TEXT NOT NULL DEFAULT '',
    kill_requested INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    state TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS job_events_job ON job_events(job_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
"""

#: an older layout: failures added later by ALTER TABLE, so it comes after updated_at
REORDERED_DDL = LEGACY_DDL.replace(
    "    failures INTEGER NOT NULL DEFAULT 0,\n    updated_at REAL NOT NULL\n",
    "    updated_at REAL NOT NULL,\n    failures INTEGER NOT NULL DEFAULT 0\n",
)

SPEC = json.dumps({"image": "busybox", "gpus": 2, "command": ["true"]})


def legacy_db(path, ddl=LEGACY_DDL):
    """A file as the DLC before versioning left it: one queued job, a token, a framework id."""
    db = sqlite3.connect(path)
    db.executescript(ddl)
    db.execute(
        "INSERT INTO jobs (job_id, user, spec, state, submitted_at, attempt, tasks, message,"
        " kill_requested, failures, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        ("j1", "alice", SPEC, "queued", 10.0, 2, "[]", "waiting", 0, 1, 99.5),
    )
    db.execute("INSERT INTO job_events (job_id, at, state) VALUES ('j1', 10.0, 'queued')")
    db.execute("INSERT INTO meta VALUES ('framework_id', 'fw-7')")
    db.commit()
    db.close()


@pytest.mark.parametrize("ddl", [LEGACY_DDL, REORDERED_DDL], ids=["legacy", "reordered"])
def test_a_file_from_before_versioning_migrates_and_reads_every_column_right(tmp_path, ddl):
    path = tmp_path / "scheduler.db"
    legacy_db(path, ddl)
    store = JobStore(path)
    job = store.get_job("j1")
    assert (job.attempt, job.failures, job.message) == (2, 1, "waiting")  # not updated_at
    assert job.spec.gpus == 2 and job.state is JobState.QUEUED
    assert store.framework_id == "fw-7"
    assert store.schema_version == SCHEMA_VERSION
    saved = store.save_job(job.with_state(JobState.STAGING, "launching"))
    token = store.add_token("bob", max_priority=5)
    store.close()
    again = JobStore(path)
    assert again.get_job("j1") == saved
    assert again.authenticate(token) == ("bob", False, 5)
    raw = sqlite3.connect(path).execute("SELECT failures, updated_at FROM jobs").fetchone()
    assert raw[0] == 1 and raw[1] > 1000  # named columns: failures stayed in failures


def test_a_file_missing_a_later_column_gets_it_with_its_default(tmp_path):
    path = tmp_path / "scheduler.db"
    legacy_db(path, LEGACY_DDL)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE jobs DROP COLUMN kill_requested")
    db.commit()
    db.close()
    assert JobStore(path).get_job("j1").kill_requested is False


def test_a_newer_file_is_refused_at_open_with_one_line(tmp_path):
    path = tmp_path / "scheduler.db"
    JobStore(path).close()
    db = sqlite3.connect(path)
    newer = SCHEMA_VERSION + 1
    db.execute(f"PRAGMA user_version = {newer}")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as err:
        JobStore(path)
    assert str(err.value) == (
        f"{path} is schema {newer}, this DLC knows up to {SCHEMA_VERSION}; "
        "upgrade DLC or use another --db"
    )
    assert err.value.kind == "schema"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == newer


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "scheduler.db"
    legacy_db(path)

    def broken(db):
        db.execute("CREATE TABLE half_done (x)")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_schema, "MIGRATIONS", [*store_schema.MIGRATIONS[:2], broken])
    with pytest.raises(StoreError, match="opening it failed"):
        JobStore(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "quarantine" not in tables and "half_done" not in tables
    monkeypatch.undo()
    assert JobStore(path).get_job("j1").attempt == 2  # and it migrates fine later


def test_another_programs_database_is_not_taken_over(tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (name)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"is not a DLC job database .*customers.*another --db"):
        JobStore(path)


def test_migrations_are_ordered_and_counted():
    assert SCHEMA_VERSION == len(store_schema.MIGRATIONS) == 8
