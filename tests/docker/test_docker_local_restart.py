"""SIGKILL of `dlc local`, then a restart: the old container is gone before the retried job's
new container starts on the same GPUs (``docker events``), the old executor exits, and the job
is relaunched (not left lost): the crash, not its command, ended it, so no retry is used."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from dlc.api.client import ApiClient
from dlc.executor.container_spec import LABEL_JOB
from dlc.executor.gpu_claim import LABEL_EXECUTOR_PID, owner_alive, process_start_time

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"


def start_local(work: Path) -> tuple[subprocess.Popen, ApiClient]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "local", "--simulate", str(DGX1), "--api-port", "0",
         "--work-dir", str(work), "--cpus", "4", "--mem", "4096"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    lines: list[str] = []
    while not any("DLC_TOKEN=" in line for line in lines):
        line = proc.stdout.readline()
        assert line, "dlc local exited early:\n" + "".join(lines)
        lines.append(line)
    text = "".join(lines)
    api = re.search(r"export DLC_API=(\S+)", text).group(1)
    token = re.search(r"export DLC_TOKEN=(\S+)", text).group(1)
    if token.startswith("$("):  # a restart names the saved token instead of printing it
        token = (work / "admin.token").read_text().strip()
    return proc, ApiClient(api, token)


def wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_restart_after_sigkill_never_overlaps_and_retries_the_job(
    docker_runtime, busybox_image, tmp_path
):
    since = int(time.time()) - 1
    proc, client = start_local(tmp_path / "state")
    restarted = None
    try:
        job = client.submit(
            {"image": busybox_image, "gpus": 4, "cpus": 0.5, "mem_mib": 64, "retries": 1,
             "command": ["sleep", "300"]}
        )  # fmt: skip
        job_id = job["id"]

        def containers():
            return docker_runtime.list_containers({LABEL_JOB: job_id})

        (old,) = wait_for(lambda: [c for c in containers() if c.status == "running"])
        old_executor = old.labels[LABEL_EXECUTOR_PID]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        restarted, client = start_local(tmp_path / "state")
        # the old executor exits by itself (its emulator is gone) and its container is gone
        wait_for(lambda: not owner_alive(old_executor, process_start_time), timeout_s=60)
        new = wait_for(
            lambda: [c for c in containers() if c.id != old.id and c.status == "running"],
            timeout_s=90,
        )
        assert docker_runtime.list_containers({LABEL_JOB: job_id}) == new  # old one gone
        shown = client.show(job_id)
        assert shown["state"] in ("running", "staging", "starting"), shown
        events = docker_runtime.client.events(
            since=since,
            until=int(time.time()) + 1,
            filters={"label": f"{LABEL_JOB}={job_id}", "type": "container"},
            decode=True,
        )
        events = [(e["timeNano"], e["Action"], e["id"]) for e in events]
        old_gone = [t for t, action, cid in events if cid == old.id and action == "destroy"]
        new_started = [t for t, action, cid in events if cid != old.id and action == "start"]
        assert old_gone and new_started, events
        assert max(old_gone) < min(new_started), events
        client.kill(job_id)
        wait_for(lambda: not containers() or None)
    finally:
        for one in (proc, restarted):
            if one is not None and one.poll() is None:
                one.send_signal(signal.SIGTERM)
                one.wait(timeout=30)
