"""DLC on a shared cluster: GPUs statically reserved for DLC's role, on both masters.

An operator reserves the GPU agent for the deep-learning role (``gpus(dlc):4;gpu_ids(dlc):{...}``)
and starts ``dlc scheduler --role dlc``. The offers then hold the GPUs as
``reservations: [{STATIC, dlc}]`` with ``allocation_info: {role: dlc}``; the TaskInfo must echo
both exactly or the master refuses the task ("more than available").

The executor is tests/scheduler/stand_in_executor.py (no Docker).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dlc.app.service import SchedulerService, ServiceConfig
from dlc.mesos.framework import FrameworkConfig
from dlc.scheduler.core.facade import Actions
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.tasks.launch import ExecutorConfig
from tests.contract.conftest import Harness
from tests.real_mesos import real_mesos_master

GPU_NAMES = {"gpus", "gpu_ids", "gpu_mem", "gpu_core"}

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = ROOT / "tests" / "scheduler" / "stand_in_executor.py"

#: a GPU pool reserved for role dlc: GPUs, their ids and share ranges reserved, CPUs and
#: memory half reserved half not (DLC takes the reserved part first)
RESERVED_AGENT = (
    "cpus(dlc):1;cpus:2;mem(dlc):1024;mem:2048;cpus(spark):1;mem(spark):512;"
    "disk:4096;ports:[31000-31010];"
    "gpus(dlc):4;gpu_ids(dlc):{0,1,2,3};"
    "gpu_mem(dlc):[0-16383,1048576-1064959,2097152-2113535,3145728-3162111];"
    "gpu_core(dlc):[0-999,1048576-1049575,2097152-2098151,3145728-3146727]"
)


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def reserved_master(request, tmp_path):
    """``(address, kind)`` of a master whose one agent's GPUs are reserved for role dlc."""
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        agent = AgentSpec(resources=RESERVED_AGENT)
        with MesosEmulator(agents=[agent], work_dir=tmp_path / "emulator") as emulator:
            yield emulator.address, "emulator"
        return
    with real_mesos_master(tmp_path / "mesos", MESOS_RESOURCES=RESERVED_AGENT) as mesos:
        yield mesos.address, "real"


def _service(master: str, db: Path, roles: tuple[str, ...], **framework) -> SchedulerService:
    config = ServiceConfig(
        master=master,
        db=str(db),
        api_port=0,
        executor=ExecutorConfig(command=f"{sys.executable} {STAND_IN}"),
        framework=FrameworkConfig(master=master, roles=roles, refuse_seconds=1.0, **framework),
    )
    service = SchedulerService(config)
    service.start()
    assert service.framework.registered.wait(30), "framework did not register with the master"
    return service


def _wait_state(service, job_id, states, timeout=40.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = service.store.get_job(job_id)
        if job.state.value in states:
            return job
        time.sleep(0.2)
    job = service.store.get_job(job_id)
    raise AssertionError(f"job {job_id} stuck in {job.state}: {job.message}")


def _state(master: str) -> dict:
    with urllib.request.urlopen(f"http://{master}/master/state", timeout=10) as resp:
        return json.loads(resp.read())


def test_job_runs_on_gpus_reserved_for_its_role(reserved_master, tmp_path):
    master, _kind = reserved_master
    service = _service(master, tmp_path / "db", ("dlc",))
    try:
        job = service.core.submit(
            "alice", JobSpec(image="none", gpus=2, command=("sh", "-c", "echo on reserved GPUs"))
        )
        service.framework.dispatch(Actions(revive=True))
        done = _wait_state(service, job.job_id, {"finished", "failed", "lost"})
        assert done.state.value == "finished", done.message
        assert done.attempt == 0  # the master took the first launch
        [framework] = [
            f for f in _state(master)["frameworks"] if f["id"] == service.core.framework_id
        ]
        assert framework.get("roles") == ["dlc"]
        [task] = framework["completed_tasks"]
        assert task["role"] == "dlc"
        assert task["resources"]["gpus"] == 2
    finally:
        service.stop()


class _Other:
    """A non-DLC pymesos framework (role ``spark``, GPU-capable) that declines every offer
    after noting what it held."""

    def __init__(self, master: str):
        self.harness = Harness(master)
        self.harness.driver._framework["role"] = "spark"
        self.seen: list[dict] = []

    def start(self) -> _Other:
        self.harness.start()
        return self

    def drain(self) -> None:
        while not self.harness.recorder.offers.empty():
            offer = self.harness.recorder.offers.get()
            self.seen.append(offer)
            self.harness.driver.declineOffer(offer["id"], {"refuse_seconds": 0.5})

    def stop(self) -> None:
        self.harness.stop()


def test_other_framework_never_sees_dlcs_gpus_and_dlc_never_takes_spark_resources(
    reserved_master, tmp_path
):
    master, _kind = reserved_master
    other = _Other(master).start()
    service = _service(master, tmp_path / "db", ("dlc",))
    try:
        job = service.core.submit(
            "alice",
            JobSpec(image="none", gpus=4, cpus=2.5, command=("sh", "-c", "sleep 1")),
        )
        service.framework.dispatch(Actions(revive=True))
        deadline = time.monotonic() + 40
        while service.store.get_job(job.job_id).state.value not in ("finished", "failed"):
            assert time.monotonic() < deadline, service.store.get_job(job.job_id).message
            other.drain()
            time.sleep(0.2)
        other.drain()
        done = service.store.get_job(job.job_id)
        assert done.state.value == "finished", done.message
        # the other framework got offers, of spark's and unreserved resources, never a GPU
        assert other.seen, "the other framework got no offer"
        names = {r["name"] for o in other.seen for r in o["resources"]}
        assert "cpus" in names and not names & GPU_NAMES
        spark = [r for o in other.seen for r in o["resources"] if r.get("role") == "spark"]
        assert spark, "the spark reservation went to someone else"
        # DLC took its reserved CPU, then 1.5 unreserved ones; none of spark's
        [fw] = [f for f in _state(master)["frameworks"] if f["id"] == service.core.framework_id]
        [task] = fw["completed_tasks"]
        assert task["resources"]["gpus"] == 4 and task["resources"]["cpus"] == 2.5
        slave = _state(master)["slaves"][0]
        assert slave["reserved_resources"]["spark"]["cpus"] == 1
    finally:
        service.stop()
        other.stop()


#: an agent with nothing reserved: DLC's --reserve makes (and releases) the reservations
SHARED_AGENT = (
    "cpus:4;mem:4096;disk:4096;ports:[31000-31010];gpus:4;gpu_ids:{0,1,2,3};"
    "gpu_mem:[0-16383,1048576-1064959,2097152-2113535,3145728-3162111];"
    "gpu_core:[0-999,1048576-1049575,2097152-2098151,3145728-3146727]"
)


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def shared_master(request, tmp_path):
    """``(address, kind)`` of a master whose one agent reserves nothing."""
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        agent = AgentSpec(resources=SHARED_AGENT)
        with MesosEmulator(agents=[agent], work_dir=tmp_path / "emulator") as emulator:
            yield emulator.address, "emulator"
        return
    with real_mesos_master(tmp_path / "mesos", MESOS_RESOURCES=SHARED_AGENT) as mesos:
        yield mesos.address, "real"


def _reserved_gpus(master: str) -> dict:
    slave = _state(master)["slaves"][0]
    return (slave.get("reserved_resources") or {}).get("dlc") or {}


def test_reserve_keeps_used_gpus_for_dlc_then_releases_them_when_idle(shared_master, tmp_path):
    master, _kind = shared_master
    service = _service(master, tmp_path / "db", ("dlc",), reserve=True, unreserve_after_s=3.0)
    other = None
    try:
        job = service.core.submit(
            "alice", JobSpec(image="none", gpus=2, command=("sh", "-c", "sleep 1"))
        )
        service.framework.dispatch(Actions(revive=True))
        done = _wait_state(service, job.job_id, {"finished", "failed", "lost"})
        assert done.state.value == "finished", done.message
        used = set(done.tasks[0].gpu_ids)
        reserved = _reserved_gpus(master)
        assert reserved.get("gpus") == 2, reserved
        assert {int(i) for i in reserved["gpu_ids"].strip("{}").split(",")} == used
        # between jobs another framework is offered only the two unreserved GPUs
        other = _Other(master).start()

        def offered():
            other.drain()
            return {
                int(i) for o in other.seen for r in o["resources"] if r["name"] == "gpu_ids"
                for i in r["set"]["item"]
            }  # fmt: skip

        # wait for an offer that holds GPUs (however slow a loaded master is), then check it
        deadline = time.monotonic() + 30
        while not offered():
            assert time.monotonic() < deadline, f"no GPU offered to the other: {other.seen}"
            time.sleep(0.2)
        assert not offered() & used, (offered(), used)
        # idle for 3 s in DLC's offers: UNRESERVE gives them back
        deadline = time.monotonic() + 20
        while _reserved_gpus(master).get("gpus"):
            assert time.monotonic() < deadline, _reserved_gpus(master)
            other.drain()
            time.sleep(0.3)
    finally:
        service.stop()
        if other is not None:
            other.stop()


#: one agent, GPUs 0-1 reserved for dlc, 2-3 for batch (both DLC's roles)
TWO_ROLE_AGENT = (
    "cpus(dlc):1;mem(dlc):1024;gpus(dlc):2;gpu_ids(dlc):{0,1};"
    "cpus(batch):1;mem(batch):1024;gpus(batch):2;gpu_ids(batch):{2,3};"
    "cpus:1;mem:1024;disk:4096;ports:[31000-31010]"
)


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def two_role_master(request, tmp_path):
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        agent = AgentSpec(resources=TWO_ROLE_AGENT)
        with MesosEmulator(agents=[agent], work_dir=tmp_path / "emulator") as emulator:
            yield emulator.address, "emulator"
        return
    with real_mesos_master(tmp_path / "mesos", MESOS_RESOURCES=TWO_ROLE_AGENT) as mesos:
        yield mesos.address, "real"


def test_multi_role_offers_run_jobs_under_each_role(two_role_master, tmp_path):
    master, _kind = two_role_master
    service = _service(master, tmp_path / "db", ("dlc", "batch"))
    try:
        spec = JobSpec(image="none", gpus=2, cpus=0.5, command=("sh", "-c", "sleep 2"))
        jobs = [service.core.submit("alice", spec) for _ in range(2)]
        service.framework.dispatch(Actions(revive=True))
        done = [_wait_state(service, j.job_id, {"finished", "failed", "lost"}) for j in jobs]
        assert [j.state.value for j in done] == ["finished"] * 2, [j.message for j in done]
        assert all(j.attempt == 0 for j in done)
        [fw] = [f for f in _state(master)["frameworks"] if f["id"] == service.core.framework_id]
        assert sorted(fw["roles"]) == ["batch", "dlc"]
        by_role = {t["role"]: t for t in fw["completed_tasks"]}
        assert set(by_role) == {"batch", "dlc"}  # each job on one role's GPUs
        gpus = {
            role: {int(i) for i in t["resources"]["gpu_ids"].strip("{}").split(",")}
            for role, t in by_role.items()
        }  # fmt: skip
        assert gpus == {"dlc": {0, 1}, "batch": {2, 3}}
    finally:
        service.stop()


def test_gpus_taken_by_another_framework_through_the_scalar_count_as_taken(shared_master, tmp_path):
    master, _kind = shared_master
    other = Harness(master).start()
    offer = other.offer()
    # a framework that knows nothing of gpu_ids takes one whole GPU by the plain scalar
    task = {
        "name": "plain", "task_id": {"value": "plain-gpu"}, "agent_id": offer["agent_id"],
        "command": {"value": "sleep 60"},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}},
        ],
    }  # fmt: skip
    other.driver.launchTasks(offer["id"], [task], {"refuse_seconds": 3600})
    assert other.update("plain-gpu")["state"] == "TASK_RUNNING"
    other.driver.suppressOffers()
    service = _service(master, tmp_path / "db", ("*",))
    try:
        job = service.core.submit(
            "alice", JobSpec(image="none", gpus=3, command=("sh", "-c", "sleep 1"))
        )
        service.framework.dispatch(Actions(revive=True))
        done = _wait_state(service, job.job_id, {"finished", "failed", "lost"})
        assert done.state.value == "finished", done.message
        # gpus:3 but gpu_ids {0,1,2,3}: the lowest id is taken to be the other framework's
        assert done.tasks[0].gpu_ids == (1, 2, 3)
    finally:
        service.stop()
        other.stop()
