"""Contract tests: DLC's Mesos emulator must behave like the real Mesos 1.11 master.

Every test runs twice through the ``mesos_master`` fixture, against the emulator and against the
real master (``mesos`` marker). A test that passes on the real master and fails on the emulator
is a bug in the emulator.
"""

from __future__ import annotations

import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.contract.conftest import EVENT_TIMEOUT

GPU_TASK = {"gpus": 2, "gpu_ids": ["0", "2"]}

EXECUTOR_SOURCE = textwrap.dedent(
    """
    import os, threading, time
    from dlc.mesos import import_pymesos
    from dlc.mesos.executor_endpoint import make_executor_driver

    pymesos = import_pymesos()

    class Executor(pymesos.Executor):
        def launchTask(self, driver, task):
            def run():
                driver.sendStatusUpdate({"task_id": task["task_id"], "state": "TASK_RUNNING"})
                if task["name"] == "crash":
                    time.sleep(0.5)
                    os._exit(3)
                cwd = os.path.realpath(os.getcwd())
                same = cwd == os.path.realpath(os.environ["MESOS_SANDBOX"])
                message = "cwd-is-sandbox" if same else "cwd-is-" + cwd
                driver.sendStatusUpdate(
                    {"task_id": task["task_id"], "state": "TASK_FINISHED", "message": message}
                )
                time.sleep(1)
                driver.stop()

            threading.Thread(target=run, daemon=True).start()

        def shutdown(self, driver):
            driver.stop()

    make_executor_driver(Executor()).run()
    """
)


def scalar(name: str, value: float) -> dict[str, Any]:
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}}


def task_info(
    offer: dict[str, Any],
    task_id: str,
    *,
    command: str | None = "true",
    gpus: float | None = None,
    gpu_ids: list[str] | None = None,
    executor: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    resources = [scalar("cpus", 0.1), scalar("mem", 32)]
    if gpus is not None:
        resources.append(scalar("gpus", gpus))
    if gpu_ids is not None:
        resources.append({"name": "gpu_ids", "type": "SET", "set": {"item": gpu_ids}})
    info: dict[str, Any] = {
        "task_id": {"value": task_id},
        "agent_id": offer["agent_id"],
        "name": name or task_id,
        "resources": resources,
    }
    if executor is not None:
        info["executor"] = executor
    else:
        info["command"] = {"value": command}
    return info


def resource(offer: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in offer["resources"] if r["name"] == name]
    assert len(found) == 1, f"offer has {len(found)} {name!r} resources"
    return found[0]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


NO_FILTER = {"refuse_seconds": 0}


def test_gpu_offer_and_command_task_lifecycle(harness) -> None:
    framework = harness()
    offer = framework.offer()
    gpus = resource(offer, "gpus")
    assert gpus["type"] == "SCALAR" and gpus["scalar"]["value"] == 4
    gpu_ids = resource(offer, "gpu_ids")
    assert gpu_ids["type"] == "SET"
    assert sorted(gpu_ids["set"]["item"]) == ["0", "1", "2", "3"]
    attributes = {a["name"]: a for a in offer["attributes"]}
    assert attributes["gpu_model"] == {
        "name": "gpu_model",
        "type": "TEXT",
        "text": {"value": "Tesla_V100"},
    }
    task_id = new_id("echo")
    info = task_info(offer, task_id, command="echo hello", **GPU_TASK)
    framework.driver.launchTasks(offer["id"], [info], NO_FILTER)
    running = framework.update(task_id)
    assert (running["state"], running["source"]) == ("TASK_RUNNING", "SOURCE_EXECUTOR")
    assert running["uuid"] and running["agent_id"] == offer["agent_id"]
    finished = framework.update(task_id)
    assert (finished["state"], finished["source"]) == ("TASK_FINISHED", "SOURCE_EXECUTOR")
    assert finished["uuid"]


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param({"gpus": 1, "gpu_ids": ["7"]}, id="gpu-id-not-offered"),
        pytest.param({"gpus": 5, "gpu_ids": ["0"]}, id="more-gpus-than-offered"),
        pytest.param({"gpus": 1, "gpu_ids": ["0", "9"]}, id="one-of-two-ids-not-offered"),
    ],
)
def test_task_asking_for_resources_not_offered_gets_task_error(harness, request_) -> None:
    framework = harness()
    offer = framework.offer()
    task_id = new_id("bad")
    framework.driver.launchTasks(offer["id"], [task_info(offer, task_id, **request_)], NO_FILTER)
    status = framework.update(task_id)
    assert status["state"] == "TASK_ERROR"
    assert status["reason"] == "REASON_TASK_INVALID"
    assert status["source"] == "SOURCE_MASTER"
    assert "uuid" not in status
    assert "more than available" in status["message"]
    # Nothing was consumed: the whole agent comes back in the next offer.
    again = framework.offer()
    assert sorted(resource(again, "gpu_ids")["set"]["item"]) == ["0", "1", "2", "3"]


def test_decline_filter_holds_offers_back_until_revive(harness) -> None:
    framework = harness()
    offer = framework.offer()
    framework.driver.declineOffer(offer["id"], {"refuse_seconds": 60})
    framework.no_offer(2.5)
    framework.driver.reviveOffers()
    again = framework.offer(timeout=5)
    assert again["agent_id"] == offer["agent_id"]


def test_decline_filter_expires(harness) -> None:
    framework = harness()
    offer = framework.offer()
    framework.driver.declineOffer(offer["id"], {"refuse_seconds": 2})
    framework.no_offer(1.0)
    framework.offer(timeout=6)


def test_suppress_stops_offers_and_revive_resumes_them(harness) -> None:
    framework = harness()
    offer = framework.offer()
    framework.driver.suppressOffers()
    framework.driver.declineOffer(offer["id"], NO_FILTER)
    framework.no_offer(2.5)
    framework.driver.reviveOffers()
    framework.offer(timeout=5)


def test_kill_long_task_reports_task_killed(harness) -> None:
    framework = harness()
    offer = framework.offer()
    task_id = new_id("sleep")
    info = task_info(offer, task_id, command="sleep 60", gpus=1, gpu_ids=["1"])
    framework.driver.launchTasks(offer["id"], [info], NO_FILTER)
    assert framework.update(task_id)["state"] == "TASK_RUNNING"
    framework.driver.killTask({"value": task_id})
    assert framework.update(task_id)["state"] == "TASK_KILLED"


def test_failover_keeps_running_task_and_reconcile_reports_it(harness) -> None:
    first = harness()
    offer = first.offer()
    task_id = new_id("keep")
    info = task_info(offer, task_id, command="sleep 60", gpus=1, gpu_ids=["3"])
    first.driver.launchTasks(offer["id"], [info], NO_FILTER)
    assert first.update(task_id)["state"] == "TASK_RUNNING"
    first.stop(failover=True)

    second = harness(framework_id=first.framework_id, start=False)
    second.driver.start()
    assert second.other(("registered", "reregistered"))[0] == "reregistered"
    second.driver.reconcileTasks([{"task_id": {"value": task_id}}])
    status = second.update(task_id)
    assert status["state"] == "TASK_RUNNING"
    assert status["reason"] == "REASON_RECONCILIATION"
    assert status["source"] == "SOURCE_MASTER"
    assert "uuid" not in status
    second.driver.reconcileTasks([])
    assert second.update(task_id)["state"] == "TASK_RUNNING"
    second.driver.killTask({"value": task_id})
    assert second.update(task_id)["state"] == "TASK_KILLED"


def test_reconcile_unknown_task_reports_task_lost(harness) -> None:
    framework = harness()
    framework.driver.reconcileTasks([{"task_id": {"value": "no-such-task"}}])
    status = framework.update("no-such-task")
    assert status["state"] == "TASK_LOST"
    assert status["reason"] == "REASON_RECONCILIATION"
    assert status["source"] == "SOURCE_MASTER"


def test_no_offers_without_gpu_resources_capability(harness) -> None:
    framework = harness(gpu=False)
    framework.no_offer(3.0)
    # The agent was free all along: a framework with the capability gets it at once.
    harness(gpu=True).offer(timeout=5)


def test_first_heartbeat_follows_subscription(harness) -> None:
    framework = harness()
    framework.other(("heartbeat",), timeout=5)


@pytest.fixture
def executor_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("executor") / "contract_executor.py"
    path.write_text(EXECUTOR_SOURCE)
    return path


def executor_info(script: Path) -> dict[str, Any]:
    return {
        "executor_id": {"value": new_id("exec")},
        "name": "dlc contract executor",
        # `python3` from PATH: the venv's, as the real agent sees it (scripts/mesos-local.sh).
        "command": {"value": f"exec python3 {script}"},
        "resources": [scalar("cpus", 0.1), scalar("mem", 32)],
    }


def test_custom_executor_runs_task_in_its_sandbox(harness, executor_script) -> None:
    framework = harness()
    offer = framework.offer()
    task_id = new_id("custom")
    executor = executor_info(executor_script)
    info = task_info(offer, task_id, executor=executor, **GPU_TASK)
    framework.driver.launchTasks(offer["id"], [info], NO_FILTER)
    running = framework.update(task_id, timeout=30)
    assert running["state"] == "TASK_RUNNING", running.get("message")
    finished = framework.update(task_id)
    assert finished["state"] == "TASK_FINISHED"
    assert finished["message"] == "cwd-is-sandbox"
    # Mesos forwards an executor's own updates without adding executor_id.
    assert "executor_id" not in finished
    kind, (executor_id, _status) = framework.other(("executor_lost",))
    assert executor_id == executor["executor_id"]["value"]


def test_executor_death_fails_its_task_from_the_agent(harness, executor_script) -> None:
    framework = harness()
    offer = framework.offer()
    task_id = new_id("crash")
    executor = executor_info(executor_script)
    info = task_info(offer, task_id, executor=executor, name="crash", gpus=1, gpu_ids=["2"])
    framework.driver.launchTasks(offer["id"], [info], NO_FILTER)
    assert framework.update(task_id, timeout=30)["state"] == "TASK_RUNNING"
    failed = framework.update(task_id)
    assert failed["state"] == "TASK_FAILED"
    assert failed["reason"] == "REASON_EXECUTOR_TERMINATED"
    assert failed["source"] == "SOURCE_AGENT"
    kind, (executor_id, status) = framework.other(("executor_lost",))
    assert executor_id == executor["executor_id"]["value"]
    # The raw wait status is racy on the real agent (exit code 3 or the launcher's SIGKILL).
    assert isinstance(status, int) and status != 0


def test_kill_of_unknown_task_answers_like_reconciliation(harness) -> None:
    framework = harness()
    framework.driver.killTask({"value": "never-launched"})
    status = framework.update("never-launched")
    assert (status["state"], status["reason"]) == ("TASK_LOST", "REASON_RECONCILIATION")


def test_launch_on_used_offer_loses_the_task(harness) -> None:
    framework = harness()
    offer = framework.offer()
    framework.driver.declineOffer(offer["id"], NO_FILTER)
    task_id = new_id("stale")
    framework.driver.launchTasks(offer["id"], [task_info(offer, task_id)], NO_FILTER)
    status = framework.update(task_id)
    assert (status["state"], status["source"]) == ("TASK_LOST", "SOURCE_MASTER")
    assert status["reason"] == "REASON_INVALID_OFFERS"


@pytest.mark.parametrize(
    ("second", "why"),
    [
        pytest.param({"gpus": 0.5, "gpu_ids": ["1"]}, "fractional", id="fractional-gpus"),
        pytest.param({"gpus": 1, "gpu_ids": ["1"]}, "duplicate", id="duplicate-task-id"),
    ],
)
def test_invalid_task_is_refused_with_task_error(harness, second, why) -> None:
    framework = harness()
    offer = framework.offer()
    first_id = new_id("first")
    tasks = [task_info(offer, first_id, command="sleep 30", gpus=1, gpu_ids=["0"])]
    second_id = first_id if why == "duplicate" else new_id("second")
    tasks.append(task_info(offer, second_id, **second))
    framework.driver.launchTasks(offer["id"], tasks, NO_FILTER)
    states = {}
    for _ in range(2):
        status = framework.update(first_id if why == "duplicate" else second_id)
        states[status["state"]] = status
        if why != "duplicate":
            break
    assert states["TASK_ERROR"]["reason"] == "REASON_TASK_INVALID"
    assert states["TASK_ERROR"]["source"] == "SOURCE_MASTER"


def agent_used_resources(master: str) -> dict[str, Any]:
    """The only agent's ``used_resources`` from ``/master/state``."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://{master}/master/state", timeout=10) as response:
        state = json.load(response)
    (agent,) = state["slaves"]
    return agent["used_resources"]


def nothing_used(used: dict[str, Any]) -> bool:
    """True when every scalar is zero and no set or range is held (Mesos lists zeros)."""
    return all(value == 0 for value in used.values())


def test_executor_exit_gives_the_agent_its_resources_back(
    harness, executor_script, mesos_master
) -> None:
    framework = harness()
    offer = framework.offer()
    task_id = new_id("exits")
    executor = executor_info(executor_script)
    info = task_info(offer, task_id, executor=executor, **GPU_TASK)
    framework.driver.launchTasks(offer["id"], [info], NO_FILTER)
    assert framework.update(task_id, timeout=30)["state"] == "TASK_RUNNING"
    assert framework.update(task_id)["state"] == "TASK_FINISHED"
    kind, (executor_id, _status) = framework.other(("executor_lost",))
    assert executor_id == executor["executor_id"]["value"]
    deadline = time.monotonic() + EVENT_TIMEOUT
    used = agent_used_resources(mesos_master)
    while not nothing_used(used) and time.monotonic() < deadline:
        time.sleep(0.2)
        used = agent_used_resources(mesos_master)
    assert nothing_used(used), used
