"""The DLC scheduler against the real Mesos 1.11.0 master (scripts/mesos-local.sh) and the emulator.

A job submitted with `dlc submit` gets the allocator's GPUs (as the master records them and as
the executor sees them), runs and finishes; `dlc jobs` and `dlc logs` show it. Killing the
scheduler mid-run and starting it again with the same DB keeps the framework id, reconciles the
running task and launches nothing twice.

The executor is tests/scheduler/stand_in_executor.py (no Docker); the Docker path of
`dlc executor` has its own end-to-end test.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.app.service import SchedulerService, ServiceConfig
from dlc.cli.main import cli
from dlc.mesos.framework import FrameworkConfig
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.tasks.launch import ExecutorConfig
from tests.real_mesos import RealMesos, real_mesos_master, venv_env

pytestmark = pytest.mark.mesos

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = ROOT / "tests" / "scheduler" / "stand_in_executor.py"


AGENT_RESOURCES = "cpus:4;mem:4096;disk:10240;gpus:4;gpu_ids:{0,1,2,3}"


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def master(request, tmp_path):
    """``(address, kind)`` of DLC's emulator or the real master with one 4-GPU agent.

    The real one FAILS (never skips) when it cannot start.
    """
    yield from _one_agent_master(request.param, tmp_path, AGENT_RESOURCES)


def _one_agent_master(kind: str, tmp_path: Path, resources: str) -> Iterator[tuple[str, str]]:
    """``(address, kind)`` of the emulator or the real master (``kind``) with one agent of
    ``resources``, stopped after."""
    if kind == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        agent = AgentSpec(resources=resources)
        with MesosEmulator(agents=[agent], work_dir=tmp_path / "emulator") as emulator:
            yield emulator.address, "emulator"
        return
    with real_mesos_master(tmp_path / "mesos", MESOS_RESOURCES=resources) as mesos:
        yield mesos.address, "real"


def _service(master, db, sandbox_roots=()):
    config = ServiceConfig(
        master=master,
        db=str(db),
        api_port=0,
        executor=ExecutorConfig(command=f"{sys.executable} {STAND_IN}"),
        sandbox_roots=sandbox_roots,
        admin_token="e2e-admin-token",
    )
    service = SchedulerService(config)
    service.start()
    assert service.framework.registered.wait(30), "framework did not register with the master"
    return service


def _master_state(master):
    with urllib.request.urlopen(f"http://{master}/master/state", timeout=10) as resp:
        return json.loads(resp.read())


def _framework_tasks(master, framework_id):
    state = _master_state(master)
    for group in ("frameworks", "completed_frameworks"):
        for fw in state.get(group, ()):
            if fw["id"] == framework_id:
                return fw.get("tasks", []) + fw.get("completed_tasks", [])
    return []


def _wait_state(service, job_id, states, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = service.store.get_job(job_id)
        if job.state.value in states:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} stuck in {service.store.get_job(job_id).state}")


def _cli(service, *args):
    env = {"DLC_API": service.api_url, "DLC_TOKEN": "e2e-admin-token"}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_submitted_job_gets_allocator_gpus_runs_and_shows(master, tmp_path):
    master, kind = master
    # the emulator serves no /files/read: its sandboxes are read from its work dir
    roots = (str(tmp_path / "emulator"),) if kind == "emulator" else ()
    service = _service(master, tmp_path / "db", roots)
    try:
        out = _cli(service, "submit", "--image", "none", "--gpus", "2", "--", "sh", "-c",
                   "echo hello from the job")  # fmt: skip
        job_id = out.split()[0]
        job = _wait_state(service, job_id, {"finished", "failed", "lost"})
        assert job.state.value == "finished", job.message
        chosen = job.tasks[0].gpu_ids
        assert len(chosen) == 2
        [task] = _framework_tasks(master, service.core.framework_id)
        resources = task["resources"]
        assert resources["gpus"] == 2
        # the master renders a SET as "{0, 1}"
        assert {int(i) for i in resources["gpu_ids"].strip("{}").split(",")} == set(chosen)
        assert task["name"] == f"dlc {job_id} none gpus {','.join(map(str, chosen))}"
        jobs_out = _cli(service, "jobs")
        assert job_id in jobs_out and "finished" in jobs_out
        logs_out = _cli(service, "logs", job_id)
        assert logs_out == f"gpu_ids={','.join(map(str, chosen))}\nhello from the job\n"
        if kind == "emulator":
            return
        # The agent's /files/read path (what a real cluster uses) serves the same bytes.
        remote = LogReader(lambda: service.core.framework_id, lambda: service.framework.master_url)
        no_local_path = replace(job, tasks=(replace(job.tasks[0], sandbox=""),))
        got = remote.read(no_local_path)
        assert got["data"] == logs_out
        assert got["source"] == (
            f"{master}/frameworks/{service.core.framework_id}/executors/"
            f"dlc-executor.{job_id}.0.0/runs/latest/stdout"
        )
    finally:
        service.stop()


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def cpu_master(request, tmp_path):
    """``(address, kind)`` of the emulator or the real master with one agent that has no GPU
    at all (no ``gpus`` or ``gpu_ids`` resource: a CPU node beside a GPU cluster)."""
    yield from _one_agent_master(request.param, tmp_path, CPU_AGENT_RESOURCES)


CPU_AGENT_RESOURCES = "cpus:4;mem:4096;disk:10240"


def test_a_cpu_only_job_runs_on_an_agent_without_gpus(cpu_master, tmp_path):
    """The CPU-only twin of the test above: `dlc submit --gpus 0` runs on the GPU-less agent,
    the master records a task with no GPU resource, and `dlc jobs` says CPU only."""
    master, kind = cpu_master
    roots = (str(tmp_path / "emulator"),) if kind == "emulator" else ()
    service = _service(master, tmp_path / "db", roots)
    try:
        out = _cli(service, "submit", "--image", "none", "--gpus", "0", "--cpus", "2", "--",
                   "sh", "-c", "echo prepared the data")  # fmt: skip
        job_id = out.split()[0]
        job = _wait_state(service, job_id, {"finished", "failed", "lost"})
        assert job.state.value == "finished", job.message
        assert job.tasks[0].gpu_ids == ()
        [task] = _framework_tasks(master, service.core.framework_id)
        assert not task["resources"].get("gpus") and "gpu_ids" not in task["resources"]
        assert task["resources"]["cpus"] == 2
        assert task["name"] == f"dlc {job_id} none cpu only"
        row = next(line for line in _cli(service, "jobs").splitlines() if job_id in line)
        assert "CPU only" in row and "finished" in row
        assert _cli(service, "logs", job_id) == "gpu_ids=\nprepared the data\n"
    finally:
        service.stop()


def test_scheduler_restart_mid_run_loses_and_duplicates_nothing(master, tmp_path):
    master, kind = master
    db = tmp_path / "db"
    roots = (str(tmp_path / "emulator"),) if kind == "emulator" else ()
    first = _service(master, db, roots)
    framework_id = first.core.framework_id
    out = _cli(first, "submit", "--image", "none", "--gpus", "1", "--", "sh", "-c",
               "echo start; sleep 6; echo end")  # fmt: skip
    job_id = out.split()[0]
    queued = _cli(first, "submit", "--image", "none", "--gpus", "4", "--", "true").split()[0]
    _wait_state(first, job_id, {"running"})
    first.stop()  # the scheduler dies mid-run (failover stop: no teardown)

    second = _service(master, db, roots)
    try:
        assert second.core.framework_id == framework_id
        job = _wait_state(second, job_id, {"finished", "failed", "lost", "killed"})
        assert job.state.value == "finished" and job.attempt == 0, job.message
        waited = _wait_state(second, queued, {"finished", "failed", "lost"})
        assert waited.state.value == "finished"
        tasks = _framework_tasks(master, framework_id)
        ids = sorted(t["id"] for t in tasks)
        assert ids == sorted([f"{job_id}.0.0", f"{queued}.0.0"])  # one launch each, no repeats
        history = [state for _, state, _ in second.store.history(job_id)]
        assert history == ["queued", "staging", "running", "finished"]
        assert _cli(second, "logs", job_id).endswith("start\nend\n")
    finally:
        second.stop()


@contextmanager
def _executor_cluster(tmp_path: Path, gpu_style: str) -> Iterator[SchedulerService]:
    """A real master and agent and a registered scheduler whose tasks run through `dlc
    executor` with ``DLC_GPU_STYLE=gpu_style``; both stopped after."""
    mesos = RealMesos(tmp_path / "mesos", venv_env(MESOS_RESOURCES=AGENT_RESOURCES))
    address = mesos.start()
    config = ServiceConfig(
        master=address,
        db=str(tmp_path / "db"),
        api_port=0,
        executor=ExecutorConfig(env=(("DLC_GPU_STYLE", gpu_style),)),
        sandbox_roots=(str(mesos.run_dir),),
        admin_token="e2e-admin-token",
    )
    service = SchedulerService(config)
    service.start()
    try:
        assert service.framework.registered.wait(30)
        yield service
    finally:
        service.stop()
        mesos.stop()


def _run_to_end(service: SchedulerService, gpus: int, script: str) -> tuple[Job, str]:
    """`dlc submit --gpus GPUS -- sh -c SCRIPT` in the test image, waited for (90 s) and
    asserted finished; the job and its `dlc logs`."""
    image = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
    out = _cli(service, "submit", "--image", image, "--gpus", str(gpus), "--", "sh", "-c", script)
    job_id = out.split()[0]
    job = _wait_state(service, job_id, {"finished", "failed", "lost", "killed"}, timeout=90)
    assert job.state.value == "finished", job.message
    return job, _cli(service, "logs", job_id)


@pytest.mark.docker
@pytest.mark.mesos
def test_dlc_executor_runs_the_container_on_the_real_master(tmp_path):
    """The whole path: `dlc submit` -> real master -> `dlc executor` -> Docker -> `dlc logs`.

    No GPU here, so the executor runs with DLC_GPU_STYLE=none; the GPU ids still come from the
    allocator and reach the container's environment renumbered from 0.
    """
    with _executor_cluster(tmp_path, "none") as service:
        job, logs = _run_to_end(service, 2, "echo in the container")
        assert len(job.tasks[0].gpu_ids) == 2
        assert "finished" in _cli(service, "jobs")
        assert "in the container" in logs


@pytest.mark.docker
@pytest.mark.mesos
def test_dlc_executor_runs_a_cpu_only_container_on_the_real_master(tmp_path):
    """The CPU-only twin of the test above: `dlc submit --gpus 0` -> real master -> `dlc
    executor` set up for GPUs (legacy style, as on a GPU host with nvidia-docker v1) -> Docker.
    The task asks no GPU, so the executor needs no driver volume; its container sees no GPU
    device and says so in its environment."""
    with _executor_cluster(tmp_path, "legacy") as service:
        job, logs = _run_to_end(service, 0, "env; ls /dev")
        assert job.tasks[0].gpu_ids == ()
        lines = logs.splitlines()
        assert "NVIDIA_VISIBLE_DEVICES=void" in lines and "CUDA_VISIBLE_DEVICES=" in lines
        assert not [line for line in lines if line.startswith("nvidia")], lines


@pytest.mark.mesos
def test_master_going_away_loses_nothing(tmp_path):
    """Master down: submits still queue; master back on the same address: same framework id,
    the framework reconnects by itself and the queued job runs."""
    mesos = RealMesos(tmp_path / "mesos", venv_env(MESOS_RESOURCES=AGENT_RESOURCES))
    address = mesos.start()
    service = _service(address, tmp_path / "db")
    try:
        framework_id = service.core.framework_id
        mesos.stop(check=True)
        job_id = _cli(service, "submit", "--image", "none", "--gpus", "1", "--", "echo", "back")
        job_id = job_id.split()[0]
        assert service.store.get_job(job_id).state.value == "queued"
        mesos.start(address.rsplit(":", 1)[1])
        job = _wait_state(service, job_id, {"finished", "failed", "lost"}, timeout=90)
        assert job.state.value == "finished", job.message
        assert service.core.framework_id == framework_id
        assert _cli(service, "logs", job_id).endswith("back\n")
    finally:
        service.stop()
        mesos.stop()


@pytest.mark.mesos
def test_principal_and_secret_authenticate_and_a_wrong_secret_does_not_kill_us(tmp_path):
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"credentials": [{"principal": "dlc", "secret": "s3cret"}]}))
    mesos_vars = {
        "MESOS_RESOURCES": AGENT_RESOURCES,
        "MESOS_AUTHENTICATE_HTTP_FRAMEWORKS": "true",
        "MESOS_HTTP_FRAMEWORK_AUTHENTICATORS": "basic",
        "MESOS_CREDENTIALS": str(creds),
    }
    with real_mesos_master(tmp_path / "mesos", **mesos_vars) as mesos:
        address = mesos.address
        for secret, registers in [("wrong", False), ("s3cret", True)]:
            framework = FrameworkConfig(master=address, principal="dlc", secret=secret)
            config = ServiceConfig(
                master=address, db=str(tmp_path / f"{secret}.db"), api_port=0, framework=framework
            )
            service = SchedulerService(config)
            service.start()
            try:
                assert service.framework.registered.wait(8 if registers else 4) is registers
            finally:
                service.stop()


_SCHEDULER_PROCESS = """
import sys, time
from dlc.app.service import SchedulerService, ServiceConfig
from dlc.scheduler.tasks.launch import ExecutorConfig
master, db, stand_in = sys.argv[1:4]
config = ServiceConfig(master=master, db=db, api_port=0, admin_token="e2e-admin-token",
                       executor=ExecutorConfig(command=f"{sys.executable} {stand_in}"))
service = SchedulerService(config)
service.start()
service.framework.registered.wait(30)
print(service.api_url, flush=True)
while True:
    time.sleep(60)
"""


def _scheduler_process(master, db):
    """A `dlc scheduler` in its own process (so that it can be SIGKILLed); returns
    ``(process, api_url)``."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-c", _SCHEDULER_PROCESS, master, str(db), str(STAND_IN)],
        stdout=subprocess.PIPE, text=True, env=venv_env(),
    )  # fmt: skip
    url = proc.stdout.readline().strip()
    assert url.startswith("http"), "the scheduler process did not start"
    return proc, url


def test_kill_accepted_just_before_a_scheduler_crash_is_carried_out(master, tmp_path):
    """SIGKILL right after `dlc kill` answered: the restarted scheduler still ends the job."""
    import signal

    from dlc.api.client import ApiClient

    master, kind = master
    db = tmp_path / "db"
    proc, url = _scheduler_process(master, db)
    try:
        client = ApiClient(url, "e2e-admin-token")
        job_id = client.submit({"image": "none", "gpus": 1, "command": ["sleep", "120"]})["id"]
        deadline = time.monotonic() + 60
        while client.show(job_id)["state"] != "running":
            assert time.monotonic() < deadline, "the job never ran"
            time.sleep(0.2)
        assert client.kill(job_id)["kill_requested"]
        proc.send_signal(signal.SIGKILL)  # at once: the kill may never have reached Mesos
    finally:
        proc.kill()
        proc.wait(10)
    second = _service(master, db)
    try:
        job = _wait_state(second, job_id, {"killed", "finished", "failed", "lost"}, timeout=90)
        assert job.state.value == "killed", job.message
        [task] = [t for t in _framework_tasks(master, second.core.framework_id)
                  if t["id"] == f"{job_id}.0.0"]  # fmt: skip
        assert task["state"] == "TASK_KILLED"
    finally:
        second.stop()
