"""A scheduler service on several one-GPU agents of the emulator or the REAL Mesos master,
shared by the gang end-to-end tests (``test_gang_real_mesos.py``, ``test_elastic_gang_e2e.py``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlc.app.service import SchedulerService, ServiceConfig
from dlc.executor.container_spec import LABEL_FRAMEWORK
from dlc.scheduler.tasks.launch import ExecutorConfig
from tests.real_mesos import real_mesos_master

#: each agent: one GPU (simulated: --gpu-style none) and the default-like ports range
RESOURCES = "cpus:2;mem:2048;disk:1024;ports:[31200-31210];gpus:1;gpu_ids:{0}"


@contextlib.contextmanager
def agents(kind: str, work: Path, count: int) -> Iterator[tuple[str, tuple[str, ...]]]:
    """The master's address (and local sandbox roots), with ``count`` agents registered."""
    if kind == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        specs = [AgentSpec(resources=RESOURCES) for _ in range(count)]
        with MesosEmulator(agents=specs, work_dir=work / "em") as emulator:
            yield emulator.address, (str(work / "em"),)
        return
    mesos_vars = {"MESOS_RESOURCES": RESOURCES, "MESOS_NUM_SLAVES": str(count)}
    with real_mesos_master(work / "mesos", **mesos_vars) as mesos:
        wait_agents(mesos.address, count)  # admission reads the agents once at registration
        yield mesos.address, ()


def wait_agents(master: str, count: int, timeout: float = 30) -> None:
    """Wait until the master lists ``count`` agents (bounded)."""
    deadline = time.monotonic() + timeout
    found: list = []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://{master}/master/slaves", timeout=10) as resp:
            found = json.loads(resp.read())["slaves"]
        if len(found) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"only {len(found)} of {count} agents registered")


@contextlib.contextmanager
def gang_service(kind: str, work: Path, count: int, token: str, image: str):
    """``(service, docker runtime, master address)``: a started scheduler service whose
    executors run containers without GPUs; its containers are removed at the end."""
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime

    try:
        runtime = DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start`", pytrace=False)
    assert runtime.image_env(image) is not None, f"{image} missing: scripts/docker.sh start"
    with agents(kind, work, count) as (address, roots):
        command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
        config = ServiceConfig(
            master=address,
            sandbox_roots=roots,
            db=str(work / "db"),
            api_port=0,
            executor=ExecutorConfig(command=command),
            admin_token=token,
        )
        svc = SchedulerService(config)
        svc.start()
        try:
            assert svc.framework.registered.wait(30), "framework did not register"
            yield svc, runtime, address
        finally:
            framework_id = svc.core.framework_id
            svc.stop()
            runtime.remove_all(runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)
