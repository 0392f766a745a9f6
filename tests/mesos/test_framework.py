"""The pymesos adapter with a fake driver: ordering, acks, filters, watchdog, restart."""

from __future__ import annotations

import time

import pytest

from dlc.errors import JobSpecError
from dlc.mesos.framework import FrameworkConfig, MesosFramework, framework_info
from dlc.scheduler.core.facade import Actions, CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer


class FakeDriver:
    """Records driver calls like pymesos's MesosSchedulerDriver would send them."""

    instances: list[FakeDriver] = []

    def __init__(self, callbacks, info, master, principal, secret):
        self.callbacks, self.info, self.master = callbacks, info, master
        self.calls: list[tuple] = []
        self.aborted = False
        FakeDriver.instances.append(self)

    def start(self):
        self.calls.append(("start",))

    def stop(self, failover=False):
        self.calls.append(("stop", failover))

    def __getattr__(self, name):
        if name[0].islower() and name not in ("callbacks", "info", "master", "calls"):
            return lambda *args: self.calls.append((name, *args))
        raise AttributeError(name)

    def named(self, name):
        return [c[1:] for c in self.calls if c[0] == name]


AGENTS = [
    {"id": "a1", "hostname": "h1", "active": True,
     "resources": {"cpus": 8.0, "mem": 16384.0, "gpus": 4.0, "gpu_ids": "{0, 1, 2, 3}"}},
]  # fmt: skip


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


@pytest.fixture
def setup(tmp_path):
    FakeDriver.instances = []
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(
        store, CoreConfig(placement=PlacementConfig("first-fit")), lambda s: (s.image, None)
    )
    clock = Clock()
    fw = MesosFramework(
        core, FrameworkConfig("127.0.0.1:5050", refuse_seconds=7), FakeDriver, clock=clock,
        version_probe=lambda url: None, agents_probe=lambda url: AGENTS,
    )  # fmt: skip
    fw.start()
    yield fw, core, clock
    fw.stop()


def test_framework_info_exact():
    cfg = FrameworkConfig("m:5050", user="dlc", principal="p", webui_url="http://h:8642/")
    info = framework_info(cfg, "fw-9")
    info.pop("hostname")
    assert info == {
        "user": "dlc",
        "name": "dlc",
        "role": "*",
        "failover_timeout": 604800.0,
        "checkpoint": True,
        "capabilities": [{"type": "GPU_RESOURCES"}, {"type": "PARTITION_AWARE"}],
        "webui_url": "http://h:8642/",
        "principal": "p",
        "id": {"value": "fw-9"},
    }


def test_declines_wait_out_the_refuse_filter_unless_the_round_cap_left_jobs(setup):
    fw, _, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    fw.dispatch(Actions(declines=["o1"]))
    fw.dispatch(Actions(declines=["o2"], soon=True))
    wait_for(lambda: len(driver.named("declineOffer")) == 2)
    assert driver.named("declineOffer") == [
        ([{"value": "o1"}], {"refuse_seconds": 7}),
        ([{"value": "o2"}], {"refuse_seconds": 0.0}),
    ]


def test_registration_persists_id_then_reconciles_and_suppresses(setup):
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    assert "id" not in driver.info
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: driver.named("suppressOffers"))
    assert core.store.framework_id == "fw-1"
    assert driver.named("reconcileTasks") == [([],)]
    assert fw.framework_url() == "http://m:5050/#/frameworks/fw-1"


def test_an_unanswered_task_is_reconciled_again_after_the_backoff(setup):
    fw, core, clock = setup
    driver = FakeDriver.instances[0]
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    task = {"task_id": {"value": f"{job.job_id}.0.0"}, "agent_id": {"value": "a1"}}
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: driver.named("reconcileTasks"))
    assert driver.named("reconcileTasks") == [([task],)]
    clock.now += 6.0  # past the first backoff (5 s), with no answer
    fw.dispatch(Actions())
    wait_for(lambda: len(driver.named("reconcileTasks")) == 2)
    assert driver.named("reconcileTasks")[1] == ([task],)


def test_offer_to_launch_status_ack_after_store(setup):
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 2}))
    fw.dispatch(Actions(revive=True))  # what the API does after a submit
    wait_for(lambda: driver.named("reviveOffers"))
    driver.callbacks.resourceOffers(driver, [offer("o1", "a1", [0, 1, 2]), offer("o2", "a2", [])])
    wait_for(lambda: driver.named("launchTasks"))
    [(offer_ids, infos)] = driver.named("launchTasks")
    assert offer_ids == [{"value": "o1"}]
    assert infos[0]["resources"][-1]["set"]["item"] == ["0", "1"]
    wait_for(lambda: driver.named("declineOffer"))
    assert driver.named("declineOffer") == [([{"value": "o2"}], {"refuse_seconds": 7})]
    status = {
        "task_id": {"value": f"{job.job_id}.0.0"},
        "agent_id": {"value": "a1"},
        "state": "TASK_RUNNING",
        "uuid": "dXVpZA==",
    }
    driver.callbacks.statusUpdate(driver, status)
    wait_for(lambda: driver.named("acknowledgeStatusUpdate"))
    assert core.store.get_job(job.job_id).state is JobState.RUNNING
    # reconcile answers carry no uuid and are not acknowledged
    driver.callbacks.statusUpdate(driver, {**status, "uuid": None})
    # a later update that is acknowledged: the worker takes events in order, so once its ack
    # is there the reconcile answer has been handled too (a sleep might end before it was)
    driver.callbacks.statusUpdate(driver, {**status, "uuid": "dXVpZDI="})
    wait_for(lambda: len(driver.named("acknowledgeStatusUpdate")) == 2)
    acked = [args[0]["uuid"] for args in driver.named("acknowledgeStatusUpdate")]
    assert acked == ["dXVpZA==", "dXVpZDI="]


def _registered_with_a_launch(core):
    """The fake driver registered (its first reconciliation sent) and one job launched on
    agent ``a1``: ``(driver, job, task ids as an update names them)``."""
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: driver.named("reconcileTasks"))
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    task = {"task_id": {"value": f"{job.job_id}.0.0"}, "agent_id": {"value": "a1"}}
    return driver, job, task


def test_an_update_with_a_malformed_executor_id_is_acknowledged_and_reconciled(setup):
    # it used to raise on every delivery: unacknowledged, Mesos resent it for ever and held
    # back the task's later updates
    core, clock = setup[1:]
    driver, job, task = _registered_with_a_launch(core)
    status = {**task, "state": "TASK_FAILED", "executor_id": "dlc-executor.x", "uuid": "dXVpZA=="}
    clock.now += 1  # a second after the registration's reconciliation (RECONCILE_GAP_S)
    driver.callbacks.statusUpdate(driver, status)
    wait_for(lambda: len(driver.named("reconcileTasks")) == 2)
    assert driver.named("acknowledgeStatusUpdate") == [(status,)]
    assert driver.named("reconcileTasks")[1] == ([task],)
    assert core.store.get_job(job.job_id).state is JobState.STAGING


def test_a_flood_of_malformed_updates_sends_one_reconciliation_per_second(setup):
    # red-team #48: each one used to send reconcileTasks at once with every unconfirmed task
    core, clock = setup[1:]
    driver, job, task = _registered_with_a_launch(core)
    for n in range(50):
        driver.callbacks.statusUpdate(
            driver, {**task, "state": "TASK_FAILED", "executor_id": 7, "uuid": f"u{n}"}
        )
    wait_for(lambda: len(driver.named("acknowledgeStatusUpdate")) == 50)
    assert len(driver.named("reconcileTasks")) == 1  # the registration's only
    clock.now += 1
    driver.callbacks.processHeartBeat(driver)
    wait_for(lambda: len(driver.named("reconcileTasks")) == 2)
    assert driver.named("reconcileTasks")[1] == ([task],)
    driver.callbacks.statusUpdate(driver, {**task, "state": "TASK_FAILED", "executor_id": 7,
                                           "uuid": "last"})  # fmt: skip
    wait_for(lambda: len(driver.named("acknowledgeStatusUpdate")) == 51)
    assert len(driver.named("reconcileTasks")) == 2  # the next one waits a second again


def test_bad_event_does_not_kill_the_worker(setup):
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.resourceOffers(driver, [{"garbage": True}])
    driver.callbacks.registered(driver, {"value": "fw-2"}, {"hostname": "m", "port": 1})
    wait_for(lambda: core.store.framework_id == "fw-2")


def test_watchdog_restarts_driver_with_same_framework_id(setup):
    fw, core, clock = setup
    first = FakeDriver.instances[0]
    first.callbacks.registered(first, {"value": "fw-3"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: core.store.framework_id == "fw-3")
    clock.now += 15 * 5 + 1  # five missed heartbeats
    wait_for(lambda: len(FakeDriver.instances) == 2, timeout=5)
    assert first.named("stop") == [(True,)]  # failover stop: no teardown
    assert FakeDriver.instances[1].info["id"] == {"value": "fw-3"}


def test_heartbeat_keeps_watchdog_quiet(setup):
    fw, core, clock = setup
    driver = FakeDriver.instances[0]
    for _ in range(3):
        clock.now += 60
        driver.callbacks.processHeartBeat(driver)
        time.sleep(1.2)
    assert len(FakeDriver.instances) == 1


def test_removed_framework_registers_afresh(setup):
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "old"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: core.store.framework_id == "old")
    driver.callbacks.error(driver, "Framework has been removed")
    wait_for(lambda: len(FakeDriver.instances) == 2)
    assert core.store.framework_id is None and "id" not in FakeDriver.instances[1].info


@pytest.mark.parametrize(
    "version, kind, url",
    [
        pytest.param(
            {"version": "1.11.0", "build_user": "dlc-emulator"}, "emulator",
            "http://m:5050/#framework-fw-1", id="emulator",
        ),
        pytest.param(
            {"version": "1.11.0", "build_user": "root"}, "mesos",
            "http://m:5050/#/frameworks/fw-1", id="real-mesos",
        ),
        pytest.param(None, "mesos", "http://m:5050/#/frameworks/fw-1", id="no-answer"),
    ],
)  # fmt: skip
def test_framework_url_is_honest_about_the_emulator(tmp_path, version, kind, url):
    FakeDriver.instances = []
    core = SchedulerCore(JobStore(tmp_path / "db"), resolver=lambda s: (s.image, None))
    asked = []
    fw = MesosFramework(
        core, FrameworkConfig("m:5050"), FakeDriver, clock=Clock(),
        version_probe=lambda master: asked.append(master) or version,
    )  # fmt: skip
    fw.start()
    try:
        assert fw.master_kind is None and fw.framework_url() is None
        driver = FakeDriver.instances[0]
        driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
        wait_for(lambda: fw.registered.is_set())
        assert (fw.master_kind, fw.framework_url(), asked) == (kind, url, ["http://m:5050"])
    finally:
        fw.stop()


def test_registration_reads_agent_totals_for_admission(setup):
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    wait_for(lambda: core.max_agent_gpus() == 4)
    with pytest.raises(JobSpecError, match="no agent has more than 4"):
        core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 8}))


def test_kills_are_resent_after_registration_and_periodically(setup):
    fw, core, clock = setup
    driver = FakeDriver.instances[0]
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    core.kill(job.job_id, "alice")  # stored; pretend the kill never reached the master
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    tid = {"value": f"{job.job_id}.0.0"}
    wait_for(lambda: driver.named("killTask") == [(tid,)])
    clock.now += 11
    driver.callbacks.processHeartBeat(driver)
    wait_for(lambda: len(driver.named("killTask")) >= 2)
