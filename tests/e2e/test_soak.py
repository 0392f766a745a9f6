"""Soak: many short jobs through a small agent; executors must end and give everything back.

Before executors ended by themselves, each finished job left its executor alive holding 0.1 CPU
and 64 MiB: on a 2-CPU agent the queue stopped after about 20 jobs. Here ``DLC_SOAK_JOBS``
(default 100, about 3 minutes here; ``make soak`` runs 300) jobs go through the REAL Mesos
master + an agent with 2 CPUs, and ``DLC_SOAK_EMULATOR_JOBS`` (default 30) through the emulator
(`dlc local`'s path).
Afterwards: every job finished, no executor process of the framework remains, and the agent's
used resources are back to zero. The fault suite's launch checks run on the Docker events of
the whole soak (tests/fault/checks.py): no job launched twice, no GPU held by two containers at
once, every container's GPUs known and the scheduler's, every finished job had a container
that exited 0, and no container of the soak is left. The run's figures are printed (``-s``
shows them).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dlc.api.client import ApiClient
from tests.fault.checks import PlannedJob, judge
from tests.fault.docker_watch import DockerWatch
from tests.real_mesos import RealMesos, ensure_built, venv_env

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = "cpus:2;mem:4096;disk:10240;ports:[31000-31100];gpus:8;gpu_ids:{0,1,2,3,4,5,6,7}"
TOKEN = "soak-token"
JOB = {"image": IMAGE, "gpus": 1, "cpus": 0.5, "mem_mib": 64, "command": ["true"]}


def _count(variable: str, default: int) -> int:
    return int(os.environ.get(variable, default))


@pytest.fixture(scope="module")
def docker_ready():
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    assert runtime.image_env(IMAGE) is not None, f"{IMAGE} missing: scripts/docker.sh start"
    return runtime


def _service(address: str, sandbox_roots, db: Path):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig

    command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
    config = ServiceConfig(
        master=address,
        sandbox_roots=sandbox_roots,
        db=str(db),
        api_port=0,
        executor=ExecutorConfig(command=command),
        admin_token=TOKEN,
    )
    svc = SchedulerService(config)
    svc.start()
    assert svc.framework.registered.wait(30), "framework did not register"
    return svc


def executor_pids(framework_id: str) -> list[int]:
    """Live ``dlc executor`` processes of a framework (from /proc environ)."""
    pids = []
    needle = f"MESOS_FRAMEWORK_ID={framework_id}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if argv[1:4] == [b"-m", b"dlc", b"executor"] and needle in environ and state != "Z":
            pids.append(int(proc.name))
    return pids


def agent_used(address: str) -> dict:
    with urllib.request.urlopen(f"http://{address}/master/state", timeout=10) as response:
        (agent,) = json.load(response)["slaves"]
    return agent["used_resources"]


def _until(predicate, timeout_s: float, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval_s)
        value = predicate()
    return value


def check_launches(watch: DockerWatch, client: ApiClient, ids: list[str], t0: float) -> int:
    """The fault suite's launch checks on the soak's containers; returns how many ran."""
    planned = []
    for i in ids:
        job = PlannedJob(i, "ok", JOB["gpus"], 0, 0.0, i, t0)
        job.final = client.show(i)
        planned.append(job)
    until = time.time()
    containers = watch.containers(until)
    report = judge(planned, containers, [], until, t0)
    counts = report.zero_counts()
    launches = {k: counts[k] for k in ("launched_twice", "gpu_conflicts", "gpus_unknown")}
    launches["no_container"] = counts["no_container"]
    assert launches == dict.fromkeys(launches, 0), report.details[:10]
    assert not watch.stream_errors, watch.stream_errors
    left = _until(lambda: not watch.leftovers(), timeout_s=60) or watch.leftovers()
    assert left is True, f"containers left: {[c['Names'] for c in left]}"
    return report.containers


def soak(svc, address: str, jobs: int, label: str) -> None:
    """Submit ``jobs`` jobs, wait for all, check nothing is left; prints the figures."""
    client = ApiClient(svc.api_url, TOKEN, timeout_s=30)
    ids: list[str] = []
    watch = DockerWatch(f"soak-{label}", lambda: set(ids)).start()
    try:
        _soak(svc, client, address, ids, jobs, label, watch)
    finally:
        watch.stop()


def _soak(svc, client, address, ids, jobs, label, watch) -> None:
    t0 = time.time()
    started = time.monotonic()
    ids += [client.submit(dict(JOB, name=f"soak-{i}"))["id"] for i in range(jobs)]
    submitted = time.monotonic()

    def all_done():
        states = [svc.store.get_job(i).state.value for i in ids]
        return all(s in ("finished", "failed", "killed", "lost") for s in states) and states

    states = _until(all_done, timeout_s=60 + 3 * jobs, interval_s=1.0)
    ended = time.monotonic()
    assert states, "jobs still queued or running: " + str(
        sorted({svc.store.get_job(i).state.value for i in ids})
    )
    not_finished = [
        (i, s, svc.store.get_job(i).message)
        for i, s in zip(ids, states, strict=True)
        if s != "finished"
    ]
    assert not_finished == [], not_finished[:5]
    framework_id = svc.core.framework_id
    left = _until(lambda: not executor_pids(framework_id), timeout_s=60) or executor_pids(
        framework_id
    )
    assert left is True, f"executor processes left: {left}"
    used = _until(lambda: all(v == 0 for v in agent_used(address).values()), 30)
    assert used, f"agent still uses {agent_used(address)}"
    containers = check_launches(watch, client, ids, t0)
    run_s = ended - started
    print(
        f"\nsoak[{label}]: {jobs} jobs, submit {submitted - started:.1f} s, "
        f"all finished after {run_s:.1f} s ({jobs / run_s:.2f} jobs/s); "
        f"{containers} containers, none twice, no GPU shared, none left; "
        "0 executors left; agent used resources 0"
    )


@pytest.mark.mesos
def test_soak_on_the_real_master(docker_ready, tmp_path):
    env = venv_env(MESOS_RESOURCES=RESOURCES)
    ensure_built(env)
    mesos = RealMesos(tmp_path / "mesos", env)
    address = mesos.start()
    try:
        svc = _service(address, (), tmp_path / "db")
        try:
            soak(svc, address, _count("DLC_SOAK_JOBS", 100), "real master")
        finally:
            svc.stop()
    finally:
        mesos.stop()


def test_soak_on_the_emulator(docker_ready, tmp_path):
    from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

    work = tmp_path / "emulator"
    with MesosEmulator(agents=[AgentSpec(resources=RESOURCES)], work_dir=work) as emulator:
        svc = _service(emulator.address, (str(work),), tmp_path / "db")
        try:
            soak(svc, emulator.address, _count("DLC_SOAK_EMULATOR_JOBS", 30), "emulator")
        finally:
            svc.stop()
