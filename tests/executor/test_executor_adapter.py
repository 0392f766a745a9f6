"""The pymesos adapter's pure parts: durations, grace period, TaskStatus bodies, callbacks."""

from __future__ import annotations

import base64
import json

import pytest

from dlc.errors import DlcError
from dlc.executor.executor import (
    DriverSink,
    grace_from_env,
    kill_grace_s,
    make_executor_class,
    parse_mesos_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("5secs", 5.0, id="secs"),
        pytest.param("500ms", 0.5, id="ms"),
        pytest.param("2mins", 120.0, id="mins"),
        pytest.param("1.5hrs", 5400.0, id="fractional-hours"),
    ],
)
def test_parse_mesos_duration(text, seconds):
    assert parse_mesos_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "fivesecs", "5 parsecs"])
def test_bad_duration_names_the_variable(text):
    with pytest.raises(DlcError, match="MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"):
        parse_mesos_duration(text)


@pytest.mark.parametrize(
    ("env", "grace"),
    [
        pytest.param({}, 10.0, id="default"),
        pytest.param(
            {"MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": "5secs"}, 4.0, id="agent-minus-margin"
        ),
        pytest.param({"MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD": "500ms"}, 0.0, id="never-negative"),
    ],
)
def test_grace_from_env(env, grace):
    assert grace_from_env(env) == pytest.approx(grace)


class RecordingDriver:
    def __init__(self, fail=False):
        self.sent = []
        self.fail = fail

    def sendStatusUpdate(self, status):  # noqa: N802 (pymesos's name)
        if self.fail:
            raise RuntimeError("Not connected yet")
        self.sent.append(status)


def test_driver_sink_builds_task_status_with_labels_and_data():
    sink = DriverSink()
    sink.driver = RecordingDriver()
    sink.update("t1", "TASK_RUNNING", "up", labels={"dlc.container_id": "abc"})
    (status,) = sink.driver.sent
    assert len(base64.b64decode(status.pop("uuid"))) == 16  # a fresh UUID per update
    assert status == {
        "task_id": {"value": "t1"},
        "state": "TASK_RUNNING",
        "message": "up",
        "labels": {"labels": [{"key": "dlc.container_id", "value": "abc"}]},
        "data": base64.b64encode(json.dumps({"dlc.container_id": "abc"}).encode()).decode(),
    }


def test_driver_sink_survives_a_send_failure():
    sink = DriverSink()
    sink.driver = RecordingDriver(fail=True)
    sink.update("t1", "TASK_FAILED", "x", "REASON_CONTAINER_LAUNCH_FAILED")  # must not raise


class StubRunner:
    def __init__(self):
        self.calls = []

    def launch(self, task_id, data, grace_s=None):
        self.calls.append(("launch", task_id, data) + ((grace_s,) if grace_s is not None else ()))

    def kill(self, task_id):
        raise RuntimeError("boom")  # a failing callback must not escape into pymesos

    def shutdown(self):
        self.calls.append(("shutdown",))

    def remove_orphans(self):
        self.calls.append(("sweep",))
        return []


def test_callbacks_delegate_are_guarded_and_shutdown_is_idempotent():
    runner, sink = StubRunner(), DriverSink()
    executor = make_executor_class()(runner, sink)
    driver = RecordingDriver()
    executor.registered(driver, {}, {}, {})
    executor.launchTask(driver, {"task_id": {"value": "t1"}, "data": "ZGF0YQ=="})
    executor.killTask(driver, {"value": "t1"})
    executor.shutdown(driver)
    executor.shutdown(driver)
    assert runner.calls == [("sweep",), ("launch", "t1", "ZGF0YQ=="), ("shutdown",)]
    assert sink.driver is driver


def test_launch_passes_the_task_kill_policy_grace():
    runner = StubRunner()
    executor = make_executor_class()(runner, DriverSink())
    policy = {"grace_period": {"nanoseconds": 45_000_000_000}}
    executor.launchTask(RecordingDriver(), {"task_id": {"value": "t1"}, "data": "",
                                            "kill_policy": policy})  # fmt: skip
    assert runner.calls == [("launch", "t1", "", 45.0)]


@pytest.mark.parametrize(
    "task, grace",
    [
        ({}, None),
        ({"kill_policy": {}}, None),
        ({"kill_policy": {"grace_period": {"nanoseconds": "2500000000"}}}, 2.5),
        ({"kill_policy": {"grace_period": {"nanoseconds": 0}}}, 0.0),
        ({"kill_policy": {"grace_period": {"nanoseconds": -1}}}, None),
        ({"kill_policy": {"grace_period": {"nanoseconds": "x"}}}, None),
        ({"kill_policy": None}, None),
    ],
)
def test_kill_grace_of_a_task_info(task, grace):
    assert kill_grace_s(task) == grace
