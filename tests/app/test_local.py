"""`dlc local`: emulator + simulated DGX-1 agent + scheduler + API, driven like a user would."""

from __future__ import annotations

import errno
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from dlc.app.service import SchedulerService
from dlc.errors import DlcError
from dlc.scheduler.allocator import allocate
from dlc.topology.discovery.discover import discover

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
STAND_IN = f"{sys.executable} {ROOT / 'tests' / 'scheduler' / 'stand_in_executor.py'}"


def wait_done(client, job_id, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.show(job_id)
        if job["state"] in ("finished", "failed", "killed", "lost"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"{job_id} did not end: {client.show(job_id)}")


def test_dlc_local_command_runs_a_job_on_the_simulated_machine(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "local", "--simulate", str(DGX1), "--api-port", "0",
         "--work-dir", str(tmp_path / "state"), "--executor-command", STAND_IN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        lines = []
        while not any("DLC_TOKEN=" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "dlc local exited early:\n" + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        assert "agent GPUs 0,1,2,3,4,5,6,7, simulated from" in text
        api = re.search(r"export DLC_API=(\S+)", text).group(1)
        token = re.search(r"export DLC_TOKEN=(\S+)", text).group(1)
        assert (tmp_path / "state" / "admin.token").read_text().strip() == token
        client = ApiClient(api, token)
        job = client.submit({"image": "none", "gpus": 4, "command": ["echo", "trained"]})
        done = wait_done(client, job["id"])
        assert done["state"] == "finished", done["message"]
        chosen = done["tasks"][0]["gpu_ids"]
        topo = discover(from_file=DGX1)
        assert tuple(chosen) == tuple(allocate(topo, set(range(8)), 4, policy="tree"))
        out = client.logs(job["id"])["data"]
        assert out == f"gpu_ids={','.join(map(str, chosen))}\ntrained\n"
        # The emulator has no Mesos web UI: the lines say what each URL opens, and the
        # emulator's own page lists the task and links the framework to DLC's dashboard.
        assert "Framework:" not in text
        mesos = re.search(r"Mesos: +(\S+) \(DLC's Mesos emulator, no Mesos web UI;", text)
        assert mesos and job["master_kind"] == "emulator"
        assert job["framework_url"].startswith(mesos.group(1) + "#framework-")
        with urllib.request.urlopen(mesos.group(1), timeout=10) as resp:
            page = resp.read().decode()
        assert f"{job['id']}.0.0" in page and f'<a href="{api}/">' in page
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert proc.returncode == 0


def test_local_restart_keeps_jobs_and_token(tmp_path):
    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path), api_port=0, executor_command=STAND_IN
    )
    first = LocalCluster(config).start()
    token = first.admin_token
    client = ApiClient(first.service.api_url, token)
    job = client.submit({"image": "none", "gpus": 1, "command": ["true"]})
    wait_done(client, job["id"])
    first.stop()
    second = LocalCluster(config).start()
    try:
        assert second.admin_token == token
        again = ApiClient(second.service.api_url, token)
        assert [j["id"] for j in again.jobs()] == [job["id"]]
    finally:
        second.stop()


def test_local_without_gpus_or_file_says_how_to_simulate(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi; no NVML on this machine
    with pytest.raises(DlcError, match="no NVIDIA GPU found.*use --simulate FILE"):
        LocalCluster(LocalConfig(work_dir=str(tmp_path / "s"), api_port=0)).start()


def _live_threads(prefix: str, before: frozenset[threading.Thread] = frozenset()) -> list[str]:
    """Names of live threads called ``prefix*`` that were not in ``before``.

    Other tests' session-scoped emulators may be running, so only new threads count.
    """
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(prefix) and t.is_alive() and t not in before
    ]


@pytest.mark.parametrize(
    "breaks, message",
    [
        pytest.param(
            "work-dir-is-a-file",
            r"^--work-dir .*: cannot use it: .*; pass a writable directory with --work-dir DIR$",
            id="work-dir-not-creatable",
        ),
        pytest.param(
            "api-port-taken", r"^--api-port \d+: cannot listen .*pick another", id="api-port-taken"
        ),
        pytest.param("oserror-after-emulator", r"^--work-dir ", id="late-oserror"),
    ],
)
def test_failed_start_cleans_up_and_names_the_option(tmp_path, monkeypatch, breaks, message):
    work, port = tmp_path / "state", 0
    if breaks == "work-dir-is-a-file":
        work.write_text("in the way")
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    if breaks == "api-port-taken":
        port = blocker.getsockname()[1]
    if breaks == "oserror-after-emulator":

        def no_space(self):
            raise OSError(errno.ENOSPC, "No space left on device", str(work / "scheduler.db"))

        monkeypatch.setattr(SchedulerService, "start", no_space)
    before = frozenset(threading.enumerate())
    cluster = LocalCluster(LocalConfig(simulate=str(DGX1), work_dir=str(work), api_port=port))
    try:
        with pytest.raises(DlcError, match=message) as err:
            cluster.start()
    finally:
        blocker.close()
    assert "\n" not in str(err.value)
    assert cluster.emulator is None and cluster.service is None
    deadline = time.monotonic() + 5
    while _live_threads("mesos-emulator", before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_threads("mesos-emulator", before) == []


def test_failed_start_cleans_up_on_any_exception(tmp_path, monkeypatch):
    def boom(self):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(SchedulerService, "start", boom)
    cluster = LocalCluster(LocalConfig(simulate=str(DGX1), work_dir=str(tmp_path), api_port=0))
    with pytest.raises(RuntimeError):
        cluster.start()
    assert cluster.emulator is None and cluster.service is None
