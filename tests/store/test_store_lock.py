"""One scheduler per job database: a second process exits at once naming the holder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dlc.app.service import SchedulerService, ServiceConfig
from dlc.errors import StoreError
from dlc.store.lock import DbLock

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"

#: holds the lock the way `dlc scheduler` does (the service opens the store), until stdin closes
HOLDER = """
import sys
from dlc.app.service import SchedulerService, ServiceConfig
service = SchedulerService(ServiceConfig(master="127.0.0.1:1", db=sys.argv[1], api_port=0))
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
    db = tmp_path / "state" / "scheduler.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    yield db, proc
    proc.stdin.close()
    proc.wait(timeout=30)


def run_dlc(*args):
    return subprocess.run(
        [sys.executable, "-m", "dlc", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_a_second_dlc_scheduler_on_the_same_db_exits_naming_the_holder(holder):
    db, proc = holder
    second = run_dlc("scheduler", "--master", "127.0.0.1:1", "--db", str(db), "--api-port", "0")
    assert second.returncode == 1
    assert second.stderr.strip().splitlines() == [
        f"Error: {db} is in use by another DLC scheduler (pid {proc.pid}); "
        "stop that one first, or pass another --db"
    ]


def test_a_second_dlc_local_on_the_same_work_dir_exits_naming_the_holder(holder):
    db, proc = holder
    second = run_dlc("local", "--simulate", str(DGX1), "--work-dir", str(db.parent),
                     "--api-port", "0")  # fmt: skip
    assert second.returncode == 1
    assert f"in use by another DLC scheduler (pid {proc.pid})" in second.stderr
    assert "Traceback" not in second.stderr


def test_the_lock_is_released_when_the_holder_ends(holder, tmp_path):
    db, proc = holder
    proc.stdin.close()
    proc.wait(timeout=30)
    service = SchedulerService(ServiceConfig(master="127.0.0.1:1", db=str(db), api_port=0))
    service.stop()  # the API never started; stop releases the lock
    DbLock(db).acquire().release()


def test_in_one_process_a_second_service_is_refused_too(tmp_path):
    db = tmp_path / "scheduler.db"
    first = SchedulerService(ServiceConfig(master="127.0.0.1:1", db=str(db), api_port=0))
    try:
        with pytest.raises(StoreError, match="in use by another DLC scheduler") as err:
            SchedulerService(ServiceConfig(master="127.0.0.1:1", db=str(db), api_port=0))
        assert err.value.kind == "in_use"
    finally:
        first.stop()
