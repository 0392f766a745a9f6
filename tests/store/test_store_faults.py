"""Storage faults are clean one-line errors: damaged files, a full disk, a lock, a lost write."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dlc.errors import StoreError
from dlc.mesos.framework import FrameworkConfig, MesosFramework
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState, TaskPlacement
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.mesos.test_framework import Clock, FakeDriver, wait_for
from tests.scheduler.helpers import job

ROOT = Path(__file__).resolve().parents[2]


def filled(path, count=400):
    """A real job DB of ``count`` jobs (many pages), closed."""
    store = JobStore(path)
    for i in range(count):
        store.add_job(replace(job(f"j{i:04d}"), message="x" * 200))
    store.close()
    return path


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_random_page_damage_is_refused_at_open_naming_the_file_and_the_fix(tmp_path):
    path = filled(tmp_path / "scheduler.db")
    data = bytearray(path.read_bytes())
    rng = random.Random(10)
    for page in (3, 7, 12):  # scribble over whole b-tree pages, as a bad disk would
        start = page * 4096
        data[start : start + 4096] = rng.randbytes(4096)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as err:
        JobStore(path)
    text = one_line(err)
    assert err.value.kind == "damaged"
    assert str(path) in text and f"sqlite3 {path} 'PRAGMA integrity_check'" in text
    assert "restore" in text and "backup" in text


def test_a_file_that_is_not_a_database_is_a_clean_error(tmp_path):
    path = tmp_path / "scheduler.db"
    path.write_bytes(b"this is not SQLite at all\n" * 200)
    with pytest.raises(StoreError) as err:
        JobStore(path)
    assert err.value.kind == "damaged" and "integrity_check" in one_line(err)


def test_damage_is_a_one_line_cli_error_not_a_bug_report(tmp_path):
    path = tmp_path / "scheduler.db"
    path.write_bytes(b"\x00garbage" * 1000)
    path.chmod(0o600)
    proc = subprocess.run(
        [sys.executable, "-m", "dlc", "scheduler", "--master", "127.0.0.1:1", "--db", str(path),
         "--api-port", "0"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: job database "), proc.stderr
    assert "internal" not in proc.stderr.lower() and "Traceback" not in proc.stderr


def test_a_full_database_refuses_the_write_cleanly_and_saves_nothing(tmp_path):
    store = JobStore(tmp_path / "scheduler.db")
    store.add_job(job("j1"))
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
    with pytest.raises(StoreError) as err:
        for i in range(200):
            store.add_job(replace(job(f"n{i}"), message="y" * 2000))
    assert err.value.kind == "full" and err.value.transient
    assert "full" in one_line(err) and "free space" in str(err.value)
    ids = {j.job_id for j in store.list_jobs()}
    events = {e[0] for e in store.state_events()}
    assert ids == events  # no job without its history entry, nor the other way round


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 512 KiB filesystem (tmpfs), so the disk really runs out."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, f"this test needs to mount a tmpfs (root): {proc.stderr}"
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_really_full_disk_is_a_clean_error_and_reads_keep_working(tiny_fs):
    store = JobStore(tiny_fs / "scheduler.db")
    added = []
    with pytest.raises(StoreError) as err:
        for i in range(10_000):
            added.append(store.add_job(replace(job(f"n{i:05d}"), message="z" * 1000)).job_id)
    text = one_line(err)
    assert err.value.kind == "full", text
    assert str(tiny_fs / "scheduler.db") in text
    assert [j.job_id for j in store.list_jobs()] == added  # everything acknowledged is there
    store.close()


def test_a_locked_database_is_a_clean_error(tmp_path):
    path = tmp_path / "scheduler.db"
    store = JobStore(path)
    store._db.execute("PRAGMA busy_timeout = 50")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as err:
            store.add_job(job("j1"))
    finally:
        other.execute("ROLLBACK")
    assert err.value.kind == "locked" and "another --db" in one_line(err)
    store.add_job(job("j1"))  # and works once the other writer is done


def test_a_status_update_that_cannot_be_saved_is_not_acknowledged(tmp_path, caplog):
    FakeDriver.instances = []
    store = JobStore(tmp_path / "scheduler.db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")))
    task = TaskPlacement("j1.0.0", "a1", "h1", (0,), "o1", 0, "TASK_STAGING")
    store.add_job(replace(job("j1"), state=JobState.STAGING, tasks=(task,)))
    fw = MesosFramework(core, FrameworkConfig("127.0.0.1:5050"), FakeDriver, clock=Clock())
    fw.start()
    try:
        driver = FakeDriver.instances[0]
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")  # no room for what comes
        status = {
            "task_id": {"value": "j1.0.0"},
            "agent_id": {"value": "a1"},
            "state": "TASK_RUNNING",
            "message": "started " + "m" * 50_000,
            "uuid": "dXVpZA==",
        }
        driver.callbacks.statusUpdate(driver, status)
        wait_for(lambda: "handling status failed" in caplog.text)
        assert driver.named("acknowledgeStatusUpdate") == []  # Mesos re-sends it
        assert store.get_job("j1").state is JobState.STAGING
        [record] = [r for r in caplog.records if "handling status failed" in r.getMessage()]
        assert record.exc_info is None and "full" in record.getMessage()
        store._db.execute("PRAGMA max_page_count = 1000000")  # the operator freed space
        driver.callbacks.statusUpdate(driver, status)  # the agent's retry
        wait_for(lambda: driver.named("acknowledgeStatusUpdate"))
        assert store.get_job("j1").state is JobState.RUNNING
    finally:
        fw.stop()
        store.close()


def test_storage_errors_surface_from_reads_too(tmp_path):
    path = filled(tmp_path / "scheduler.db", 50)
    store = JobStore(path)
    os.truncate(path, 4096 * 2)  # the file shrinks under a running scheduler
    with pytest.raises(StoreError) as err:
        store.list_jobs()
        store.get_job("j0049")
    assert err.value.kind in ("damaged", "io") and str(path) in one_line(err)


def test_spec_json_is_checked_like_a_submit(tmp_path):
    # sanity of the fixture jobs used above: they are valid specs
    assert JobSpec.from_dict(job("j1").spec.to_dict()) == job("j1").spec
