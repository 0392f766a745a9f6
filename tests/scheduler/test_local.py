"""`dlc local`: emulator + simulated DGX-1 agent + scheduler + API, driven like a user would."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlc.errors import DlcError
from dlc.scheduler.allocator import allocate
from dlc.scheduler.client import ApiClient
from dlc.scheduler.local import LocalCluster, LocalConfig
from dlc.topology.discover import discover

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
