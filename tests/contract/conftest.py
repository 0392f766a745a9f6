"""Fixtures for the Mesos contract tests: the same scenarios against the emulator and real Mesos.

``mesos_master`` is parametrised: ``emulator`` (DLC's in-process emulator) and ``real`` (the real
Apache Mesos 1.11.0 master + agent from ../shared/mesos-local, marked ``mesos``). Both are
session-scoped and configured alike: one agent offering ``gpus:4``, ``gpu_ids:{0,1,2,3}`` and
the GPU-share RANGES ``gpu_mem``/``gpu_core`` (one block per GPU), with TEXT attributes. The
real one FAILS the test run (never skips) when it cannot be built or started.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dlc.mesos import import_pymesos
from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator
from tests.real_mesos import RealMesos, ensure_built, venv_env

#: GPU i's 16 GiB and 1000 compute thousandths as RANGES blocks at stride 2^20 (DESIGN.md)
GPU_MEM_MIB = 16384
SHARE_RANGES = (
    "gpu_mem:[" + ",".join(f"{i << 20}-{(i << 20) + GPU_MEM_MIB - 1}" for i in range(4)) + "];"
    "gpu_core:[" + ",".join(f"{i << 20}-{(i << 20) + 999}" for i in range(4)) + "]"
)
AGENT_RESOURCES = (
    "cpus:4;mem:4096;disk:10240;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3};" + SHARE_RANGES
)
AGENT_ATTRIBUTES = "gpu_model:Tesla_V100;dlc_topo:t1.n4"
EVENT_TIMEOUT = 15.0

pymesos = import_pymesos()


@pytest.fixture(scope="session")
def real_mesos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Mesos 1.11.0 master + one GPU agent on 127.0.0.1 and a free port.

    Yields:
        The master address ``"127.0.0.1:PORT"``.
    """
    env = venv_env(MESOS_RESOURCES=AGENT_RESOURCES, MESOS_ATTRIBUTES=AGENT_ATTRIBUTES)
    ensure_built(env)
    mesos = RealMesos(tmp_path_factory.mktemp("mesos-run"), env)
    mesos.start()
    try:
        yield mesos.address
    finally:
        mesos.stop()


@pytest.fixture(scope="session")
def emulator_mesos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The in-process emulator with the same agent as :func:`real_mesos`."""
    agent = AgentSpec(resources=AGENT_RESOURCES, attributes=AGENT_ATTRIBUTES)
    with MesosEmulator(agents=[agent], work_dir=tmp_path_factory.mktemp("emulator")) as emulator:
        yield emulator.address


@pytest.fixture(
    scope="session",
    params=["emulator", pytest.param("real", marks=pytest.mark.mesos)],
)
def mesos_master(request: pytest.FixtureRequest) -> str:
    """The master address of the emulator or of the real Mesos (both tests run)."""
    name = "emulator_mesos" if request.param == "emulator" else "real_mesos"
    return request.getfixturevalue(name)


class Recorder(pymesos.Scheduler):
    """A pymesos scheduler that queues every callback for the test to inspect."""

    def __init__(self) -> None:
        self.offers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.updates: queue.Queue[dict[str, Any]] = queue.Queue()
        self.other: queue.Queue[tuple[str, Any]] = queue.Queue()

    def registered(self, driver, framework_id, master_info):  # noqa: N802 - pymesos name
        self.other.put(("registered", framework_id["value"]))

    def reregistered(self, driver, master_info):
        self.other.put(("reregistered", master_info))

    def resourceOffers(self, driver, offers):  # noqa: N802 - pymesos name
        for offer in offers:
            self.offers.put(offer)

    def offerRescinded(self, driver, offer_id):  # noqa: N802 - pymesos name
        self.other.put(("rescinded", offer_id["value"]))

    def statusUpdate(self, driver, status):  # noqa: N802 - pymesos name
        self.updates.put(status)

    def executorLost(self, driver, executor_id, agent_id, status):  # noqa: N802
        self.other.put(("executor_lost", (executor_id["value"], status)))

    def processHeartBeat(self, driver):  # noqa: N802 - pymesos name
        self.other.put(("heartbeat", None))

    def error(self, driver, message):
        self.other.put(("error", message))


class NoGpuCapabilityDriver(pymesos.MesosSchedulerDriver):
    """pymesos adds GPU_RESOURCES by itself on Mesos >= 1.0; this driver never sends it."""

    @property
    def framework(self) -> dict[str, Any]:
        framework = super().framework
        capabilities = [
            c for c in framework.get("capabilities", []) if c["type"] != "GPU_RESOURCES"
        ]
        framework["capabilities"] = capabilities
        if not capabilities:
            framework.pop("capabilities")
        return framework


class Harness:
    """One test framework: a pymesos driver plus helpers to wait for its events."""

    def __init__(self, master: str, gpu: bool = True, framework_id: str | None = None) -> None:
        self.master = master
        self.recorder = Recorder()
        framework: dict[str, Any] = {
            "user": "root",
            "name": "dlc-contract",
            "failover_timeout": 60.0,
            "capabilities": [{"type": "GPU_RESOURCES"}] if gpu else [],
        }
        if framework_id:
            framework["id"] = {"value": framework_id}
        driver_class = pymesos.MesosSchedulerDriver if gpu else NoGpuCapabilityDriver
        self.driver = driver_class(self.recorder, framework, master, use_addict=False)
        self.framework_id: str | None = framework_id
        self.torn_down = False

    def start(self) -> Harness:
        self.driver.start()
        kind, value = self.other(("registered", "reregistered"))
        if kind == "registered":
            self.framework_id = value
        return self

    def stop(self, failover: bool = False) -> None:
        """Stops the driver: TEARDOWN (tasks killed) unless ``failover``."""
        self.driver.stop(failover=failover)
        self.driver.join()
        self.torn_down = not failover

    def other(self, kinds: tuple[str, ...], timeout: float = EVENT_TIMEOUT) -> tuple[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                kind, value = self.recorder.other.get(timeout=max(left, 0.01))
            except queue.Empty:
                pytest.fail(f"no {kinds} event within {timeout} s", pytrace=False)
            if kind in kinds:
                return kind, value
            if kind == "error":
                pytest.fail(f"master sent ERROR: {value}", pytrace=False)

    def offer(self, timeout: float = EVENT_TIMEOUT) -> dict[str, Any]:
        try:
            return self.recorder.offers.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no offer within {timeout} s", pytrace=False)

    def no_offer(self, seconds: float) -> None:
        try:
            offer = self.recorder.offers.get(timeout=seconds)
        except queue.Empty:
            return
        pytest.fail(f"unexpected offer {offer['id']['value']}", pytrace=False)

    def update(self, task_id: str, timeout: float = EVENT_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                status = self.recorder.updates.get(timeout=max(left, 0.01))
            except queue.Empty:
                pytest.fail(f"no update for {task_id} within {timeout} s", pytrace=False)
            if status["task_id"]["value"] == task_id:
                return status


@pytest.fixture
def harness(mesos_master: str) -> Iterator[Any]:
    """Makes test frameworks on ``mesos_master``; all are torn down after the test."""
    made: list[Harness] = []

    def make(gpu: bool = True, framework_id: str | None = None, start: bool = True) -> Harness:
        one = Harness(mesos_master, gpu=gpu, framework_id=framework_id)
        made.append(one)
        return one.start() if start else one

    yield make
    for one in reversed(made):
        if not one.driver.aborted:
            one.stop()
    # A framework left failed over keeps its tasks for failover_timeout: resume and tear it down
    # so that the next test finds the agent free.
    torn_down = {one.framework_id for one in made if one.torn_down}
    for framework_id in {one.framework_id for one in made} - torn_down - {None}:
        Harness(mesos_master, framework_id=framework_id).start().stop()
