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
from dataclasses import replace
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
        assert "agent nvidia GPUs 0,1,2,3,4,5,6,7, simulated from" in text
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


def test_a_start_that_fails_on_the_port_does_not_lock_the_admin_out(tmp_path):
    """The first start registers no token nobody has: the next start's token works."""
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    config = LocalConfig(simulate=str(DGX1), work_dir=str(tmp_path), executor_command=STAND_IN)
    try:
        with pytest.raises(DlcError, match="cannot listen"):
            LocalCluster(replace(config, api_port=blocker.getsockname()[1])).start()
    finally:
        blocker.close()
    cluster = LocalCluster(replace(config, api_port=0)).start()
    try:
        token = cluster.admin_token
        assert token and (tmp_path / "admin.token").read_text().strip() == token
        assert ApiClient(cluster.service.api_url, token).jobs() == []
        assert cluster.service.core.user_for_token(token) == ("admin", True)
    finally:
        cluster.stop()


def test_logs_of_every_attempt_and_node_stay_readable(tmp_path):
    """A retried job's first attempt and a gang's node 1 are read with --attempt/--rank."""
    from click.testing import CliRunner

    from dlc.cli.main import cli

    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path / "s"), api_port=0, executor_command=STAND_IN,
        agents=2,
    )  # fmt: skip
    cluster = LocalCluster(config).start()
    try:
        client = ApiClient(cluster.service.api_url, cluster.admin_token)
        marker = tmp_path / "ran-once"
        script = (f"if [ -e {marker} ]; then echo second run; "
                  f"else touch {marker}; echo first run, failing; exit 3; fi")  # fmt: skip
        retried = client.submit(
            {"image": "none", "gpus": 1, "retries": 1, "command": ["sh", "-c", script]}
        )
        gang = client.submit(
            {"image": "none", "gpus": 1, "nodes": 2, "command": ["sh", "-c", "echo node $RANK"]}
        )
        assert wait_done(client, retried["id"])["attempt"] == 1
        assert wait_done(client, gang["id"])["state"] == "finished"
        env = {"DLC_API": cluster.service.api_url, "DLC_TOKEN": cluster.admin_token}

        def logs(*args):
            result = CliRunner().invoke(cli, ["logs", *args], env=env)
            assert result.exit_code == 0, result.output
            return result.stdout

        assert logs(retried["id"]).endswith("second run\n")
        assert logs(retried["id"], "--attempt", "0").endswith("first run, failing\n")
        assert logs(retried["id"], "--attempt", "1").endswith("second run\n")
        assert logs(gang["id"]).endswith("node 0\n")
        assert logs(gang["id"], "--rank", "1").endswith("node 1\n")
        # node 0 alone, with no word of the others, was all `dlc logs` showed of a gang
        said = CliRunner().invoke(cli, ["logs", gang["id"]], env=env).stderr
        assert said == f"(node 0 of 2; the others: dlc logs --rank 1 {gang['id']})\n"
        assert CliRunner().invoke(cli, ["logs", gang["id"], "--rank", "0"], env=env).stderr == ""
        assert CliRunner().invoke(cli, ["logs", retried["id"]], env=env).stderr == ""
        bad = CliRunner().invoke(cli, ["logs", gang["id"], "--rank", "2"], env=env)
        assert bad.exit_code == 1 and bad.output == (
            f"Error: job {gang['id']} has 2 node(s): pass --rank 0 to 1\n"
        )
        bad = CliRunner().invoke(cli, ["logs", retried["id"], "--attempt", "5"], env=env)
        assert f"job {retried['id']} has attempts 0 to 1" in bad.output
    finally:
        cluster.stop()


def test_a_lost_admin_token_file_gets_a_hint_to_make_a_new_one(tmp_path):
    work = tmp_path / "state"
    first = LocalCluster(LocalConfig(simulate=str(DGX1), work_dir=str(work), api_port=0)).start()
    first.stop()
    (work / "admin.token").unlink()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "local", "--simulate", str(DGX1), "--api-port", "0",
         "--work-dir", str(work), "--executor-command", STAND_IN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        lines: list[str] = []
        while not any(line.startswith("Press Ctrl-C") for line in lines):
            line = proc.stdout.readline()
            assert line, "dlc local exited early:\n" + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        assert "DLC_TOKEN=" not in text
        assert (
            f"({work / 'admin.token'} is gone; make a new admin token with "
            f"`dlc tokens create admin --admin --work-dir {work}`)"
        ) in text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    made = subprocess.run(
        [sys.executable, "-m", "dlc", "tokens", "create", "admin", "--admin", "--work-dir",
         str(work)], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    )  # fmt: skip
    cluster = LocalCluster(
        LocalConfig(simulate=str(DGX1), work_dir=str(work), api_port=0, executor_command=STAND_IN)
    ).start()
    try:
        assert ApiClient(cluster.service.api_url, made.stdout.strip()).jobs() == []
    finally:
        cluster.stop()
