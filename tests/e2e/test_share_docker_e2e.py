"""A share end to end on the emulator with the real executor and Docker engine (issue 12).

Two `--gpu-memory 4G` jobs run at the same time on one GPU of an agent that advertises
gpu_mem/gpu_core ranges and `dlc_sharing:none` (time-slicing; `--gpu-style none`: no GPU
device is needed); each container sees its share in DLC_GPU_MEMORY_MIB, and `dlc jobs`
shows `4 GiB of GPU 0`.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_FRAMEWORK, LABEL_JOB

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
RESOURCES = (
    "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:2;gpu_ids:{0,1};"
    "gpu_mem:[0-32767,1048576-1081343];gpu_core:[0-999,1048576-1049575]"
)
ADMIN = "share-admin-token"


@pytest.fixture
def service(tmp_path):
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime
    from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator
    from dlc.scheduler.tasks.launch import ExecutorConfig

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    agent = AgentSpec(resources=RESOURCES, attributes="dlc_sharing:none")
    emulator = MesosEmulator(agents=[agent], work_dir=tmp_path / "em")
    emulator.__enter__()
    command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
    svc = SchedulerService(
        ServiceConfig(master=emulator.address, sandbox_roots=(str(tmp_path / "em"),),
                      db=str(tmp_path / "db"), api_port=0,
                      executor=ExecutorConfig(command=command), admin_token=ADMIN)
    )  # fmt: skip
    svc.start()
    try:
        assert svc.framework.registered.wait(30), "framework did not register"
        yield svc
    finally:
        framework_id = svc.core.framework_id
        svc.stop()
        runtime.remove_all(runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)
        emulator.__exit__(None, None, None)


def _cli(svc, *args):
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": ADMIN}
    return CliRunner().invoke(cli, list(args), env=env)


#: the job holds its share until the test sends SIGUSR1 (then it exits 0): "both run at once" is
#: then a state the test waits for, not a race against a fixed sleep on a loaded machine
HOLD = "echo share=$DLC_GPU_MEMORY_MIB; trap 'exit 0' USR1; while :; do sleep 1 & wait $!; done"


def _wait(predicate, what, timeout_s=120.0):
    """Polls ``predicate`` until true; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _release(job_id):
    """SIGUSR1 to the job's running container: its command exits 0."""
    import docker

    client = docker.from_env()
    try:
        found = client.api.containers(filters={"label": f"{LABEL_JOB}={job_id}"})
        assert found, f"no running container of {job_id}"
        for c in found:
            client.api.kill(c["Id"], signal="SIGUSR1")
    finally:
        client.close()


def test_two_memory_shares_run_together_on_one_gpu(service):
    ids = []
    for _ in range(2):
        out = _cli(service, "submit", "--image", IMAGE, "--gpu-memory", "4G", "--cpus", "0.5",
                   "--mem", "128M", "--", "sh", "-c", HOLD)  # fmt: skip
        assert out.exit_code == 0, out.output
        ids.append(out.output.split()[0])

    def both_running():
        jobs = [service.store.get_job(i) for i in ids]
        assert not any(j.state.terminal for j in jobs), [j.message for j in jobs]
        return all(j.state.value == "running" for j in jobs)

    _wait(both_running, "both shares running")
    jobs = [service.store.get_job(i) for i in ids]
    assert {j.tasks[0].share_gpu for j in jobs} == {0}
    table = _cli(service, "jobs").output
    assert table.count("4 GiB of GPU 0") == 2, table
    for job_id in ids:
        _release(job_id)
    _wait(lambda: all(service.store.get_job(i).state.terminal for i in ids), "both jobs ended")
    for job_id in ids:
        job = service.store.get_job(job_id)
        assert job.state.value == "finished", job.message
        assert "share=4096" in _cli(service, "logs", job_id).output
