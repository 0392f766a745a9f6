"""`dlc submit` -> DLC scheduler -> Mesos master/agent -> `dlc executor` -> a Docker container.

Runs against the REAL Mesos 1.11.0 master + agent (scripts/mesos-local.sh, marker ``mesos``) and
against DLC's emulator, with the real Docker engine (marker ``docker``) and the legacy GPU style
on stand-in ``/dev/nvidia*`` nodes (this machine has no GPU). Checks: the container sees the
allocator's GPUs renumbered from 0 and its output is what `dlc logs` shows; a killed job's
container is gone; a SIGKILLed executor leaves no container behind (its reaper removes them).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK
from tests.real_mesos import RealMesos, ensure_built, venv_env

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3}"
TOKEN = "e2e-docker-token"


@pytest.fixture(scope="module")
def docker_runtime():
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    assert runtime.image_env(IMAGE) is not None, f"{IMAGE} missing: scripts/docker.sh start"
    return runtime


@pytest.fixture(scope="module")
def gpu_host(docker_runtime, tmp_path_factory):
    """Stand-in /dev/nvidia* nodes and a driver volume: what the legacy style needs."""
    dev = tmp_path_factory.mktemp("dev")
    for name, (major, minor) in {"nvidiactl": (195, 255), "nvidia-uvm": (510, 0)}.items():
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.mknod(dev / "nvidia-uvm-tools", 0o666 | stat.S_IFCHR, os.makedev(510, 1))
    for minor in range(4):
        os.mknod(dev / f"nvidia{minor}", 0o666 | stat.S_IFCHR, os.makedev(195, minor))
    version = f"999.{uuid.uuid4().hex[:4]}"
    volume = docker_runtime.client.volumes.create(f"nvidia_driver_{version}")
    yield dev, version
    for container in docker_runtime.client.api.containers(
        all=True, filters={"volume": volume.name}
    ):
        docker_runtime.remove(container["Id"])
    volume.remove(force=True)


@pytest.fixture(scope="module", params=[pytest.param("real", marks=pytest.mark.mesos), "emulator"])
def master(request, tmp_path_factory):
    """(master address, sandbox roots): the real Mesos (marker mesos) or DLC's emulator.

    The emulator serves no /files/read, so `dlc logs` reads its sandboxes from disk.
    """
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        work = tmp_path_factory.mktemp("emulator")
        with MesosEmulator(agents=[AgentSpec(resources=RESOURCES)], work_dir=work) as emulator:
            yield emulator.address, (str(work),)
        return
    env = venv_env(MESOS_RESOURCES=RESOURCES)
    ensure_built(env)
    mesos = RealMesos(tmp_path_factory.mktemp("mesos"), env)
    yield mesos.start(), ()
    mesos.stop()


@pytest.fixture
def service(master, gpu_host, docker_runtime, tmp_path):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig

    dev, version = gpu_host
    address, sandbox_roots = master
    command = (
        f"{sys.executable} -m dlc executor --gpu-style legacy --device-root {dev} "
        f"--driver-version {version} --grace 1"
    )
    config = ServiceConfig(
        master=address,
        sandbox_roots=sandbox_roots,
        db=str(tmp_path / "db"),
        api_port=0,
        executor=ExecutorConfig(command=command),
        admin_token=TOKEN,
    )
    svc = SchedulerService(config)
    svc.start()
    assert svc.framework.registered.wait(30), "framework did not register"
    yield svc
    framework_id = svc.core.framework_id
    svc.stop()
    # whatever a failed test left behind must not leak into the next one
    leftovers = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
    docker_runtime.remove_all(leftovers, 0)


def _cli(svc, *args) -> str:
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": TOKEN}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _wait(svc, job_id, states, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = svc.store.get_job(job_id)
        if job.state.value in states:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} stuck in {svc.store.get_job(job_id).state}")


def _containers(runtime, svc, **labels):
    return runtime.list_containers({LABEL_FRAMEWORK: svc.core.framework_id, **labels})


def _wait_no_containers(runtime, svc, timeout=30):
    deadline = time.monotonic() + timeout
    while _containers(runtime, svc) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _containers(runtime, svc)


def test_job_runs_in_container_with_allocator_gpus_and_logs(service, docker_runtime):
    out = _cli(service, "submit", "--image", IMAGE, "--gpus", "2", "--", "sh", "-c",
               "env | sort; ls /dev | grep nvidia")  # fmt: skip
    job_id = out.split()[0]
    job = _wait(service, job_id, {"finished", "failed", "lost"})
    assert job.state.value == "finished", job.message
    chosen = job.tasks[0].gpu_ids
    logs = _cli(service, "logs", job_id)
    assert f"DLC_GPU_HOST_IDS={','.join(map(str, chosen))}" in logs
    ordinals = [sorted(chosen).index(i) for i in chosen]
    assert f"CUDA_VISIBLE_DEVICES={','.join(map(str, ordinals))}" in logs
    assert f"DLC_JOB_ID={job_id}" in logs
    devices = {line for line in logs.splitlines() if line.startswith("nvidia")}
    assert devices == {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} | {
        f"nvidia{i}" for i in chosen
    }
    assert _wait_no_containers(docker_runtime, service) == []


def _running_sleep_job(service, docker_runtime) -> tuple[str, list]:
    """Submit a 1-GPU ``sleep 300`` job, wait until it runs; its id and DLC containers."""
    out = _cli(service, "submit", "--image", IMAGE, "--gpus", "1", "--", "sleep", "300")
    job_id = out.split()[0]
    _wait(service, job_id, {"running"})
    deadline = time.monotonic() + 30
    while not _containers(docker_runtime, service) and time.monotonic() < deadline:
        time.sleep(0.2)
    return job_id, _containers(docker_runtime, service)


def test_killed_job_container_is_gone(service, docker_runtime):
    job_id, containers = _running_sleep_job(service, docker_runtime)
    assert len(containers) == 1
    _cli(service, "kill", job_id)
    job = _wait(service, job_id, {"killed", "failed", "lost"})
    assert job.state.value == "killed", job.message
    assert _wait_no_containers(docker_runtime, service) == []


def _executor_pid(executor_id: str) -> int:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        argv = cmdline.split(b"\0")
        is_executor = argv[1:4] == [b"-m", b"dlc", b"executor"]  # the python, not its `sh -c`
        if is_executor and f"MESOS_EXECUTOR_ID={executor_id}".encode() in environ:
            return int(proc.name)
    raise AssertionError(f"no process of executor {executor_id}")


def test_killed_executor_leaves_no_container(service, docker_runtime):
    job_id, containers = _running_sleep_job(service, docker_runtime)
    (container,) = containers
    executor_id = container.labels[LABEL_EXECUTOR]
    os.kill(_executor_pid(executor_id), signal.SIGKILL)
    # the executor, not the command, ended: relaunched without using a retry (it has none)
    deadline = time.monotonic() + 60
    while service.store.get_job(job_id).attempt == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    job = service.store.get_job(job_id)
    assert job.attempt == 1 and job.failures == 0, job
    # the orphaned container is gone (its reaper stopped it) before any other may take its GPU
    deadline = time.monotonic() + 30
    while _containers(docker_runtime, service, **{LABEL_EXECUTOR: executor_id}):
        assert time.monotonic() < deadline, "the killed executor's container is still there"
        time.sleep(0.2)
    _cli(service, "kill", job_id)
    assert _wait(service, job_id, {"killed", "failed", "lost", "finished"}).state.value == "killed"
    assert _wait_no_containers(docker_runtime, service) == []
