"""The framework hands executors' usage reports (framework messages) to the core."""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.tasks.usage import GpuUsage, encode_report
from tests.mesos.test_framework import FakeDriver, setup, wait_for  # noqa: F401 - fixture
from tests.scheduler.helpers import offer


def test_framework_message_reaches_the_core_without_an_acknowledgement(setup):  # noqa: F811
    fw, core, _ = setup
    driver = FakeDriver.instances[0]
    driver.callbacks.registered(driver, {"value": "fw-1"}, {"hostname": "m", "port": 5050})
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    driver.callbacks.resourceOffers(driver, [offer("o1", "a1", [0])])
    wait_for(lambda: driver.named("launchTasks"))
    task_id = f"{job.job_id}.0.0"
    running = {"task_id": {"value": task_id}, "agent_id": {"value": "a1"},
               "state": "TASK_RUNNING", "uuid": "dXVpZA=="}  # fmt: skip
    driver.callbacks.statusUpdate(driver, running)
    wait_for(lambda: driver.named("acknowledgeStatusUpdate"))
    report = encode_report({task_id: [GpuUsage(0, 12.5, 40, 1542, 81559, 1542, 3, 5.0)]})
    driver.callbacks.frameworkMessage(driver, {"value": "ex"}, {"value": "a1"}, report)
    wait_for(lambda: core.job_usage(job.job_id) is not None)
    assert core.job_usage(job.job_id).util_pct == 12.5
    assert len(driver.named("acknowledgeStatusUpdate")) == 1  # messages need no ack
