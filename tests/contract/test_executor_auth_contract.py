"""Contract: executor API calls need the agent's executor token, on the emulator and the real
master alike (red-team finding 2026-11-26: forged status updates).

The real agent runs with ``--authenticate_http_executors`` (tests/real_mesos.py turns it on);
DLC's emulator authenticates executors by default. A process that can reach the agent's port
but holds no token (any container, a host-network gang) gets ``401`` and cannot end another
user's task; one executor's token does not let it speak for another executor.
"""

from __future__ import annotations

import base64
import json
import textwrap
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.contract.test_emulator_contract import NO_FILTER, new_id, scalar, task_info

#: an executor that reports TASK_RUNNING with its token as the message (so that the test can
#: play an executor that misuses its own token), then waits for a kill
HOLDING_EXECUTOR = textwrap.dedent(
    """
    import os
    from dlc.mesos import import_pymesos
    from dlc.mesos.executor_endpoint import make_executor_driver

    pymesos = import_pymesos()
    TOKEN = os.environ.get("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "")

    class Executor(pymesos.Executor):
        def launchTask(self, driver, task):
            driver.sendStatusUpdate(
                {"task_id": task["task_id"], "state": "TASK_RUNNING", "message": TOKEN}
            )

        def killTask(self, driver, task_id):
            driver.sendStatusUpdate({"task_id": task_id, "state": "TASK_KILLED"})

        def shutdown(self, driver):
            driver.stop()

    make_executor_driver(Executor()).run()
    """
)


@pytest.fixture
def holding_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("executor") / "holding_executor.py"
    path.write_text(HOLDING_EXECUTOR)
    return path


def _launch(framework, script: Path) -> tuple[str, str, str]:
    """Launch one held task on its own executor: ``(task id, executor id, its token)``."""
    offer = framework.offer()
    task_id, executor_id = new_id("held"), new_id("exec")
    executor = {
        "executor_id": {"value": executor_id},
        "name": "held",
        "command": {"value": f"exec python3 {script}"},
        "resources": [scalar("cpus", 0.1), scalar("mem", 32)],
    }
    framework.driver.launchTasks(offer["id"], [task_info(offer, task_id, executor=executor)],
                                 NO_FILTER)  # fmt: skip
    running = framework.update(task_id, timeout=30)
    assert running["state"] == "TASK_RUNNING", running.get("message")
    return task_id, executor_id, running.get("message", "")


def _forge(master: str, framework_id: str, executor_id: str, task_id: str,
           token: str | None) -> int:  # fmt: skip
    """POST a TASK_FAILED UPDATE for ``task_id`` as ``executor_id``; returns the HTTP status."""
    call = {
        "type": "UPDATE",
        "framework_id": {"value": framework_id},
        "executor_id": {"value": executor_id},
        "update": {"status": {
            "task_id": {"value": task_id},
            "state": "TASK_FAILED",
            "message": "forged",
            "source": "SOURCE_EXECUTOR",
            "uuid": base64.b64encode(uuid.uuid4().bytes).decode(),
        }},
    }  # fmt: skip
    request = urllib.request.Request(
        f"http://{master}/slave(1)/api/v1/executor",
        data=json.dumps(call).encode(),
        headers={"Content-Type": "application/json"},
    )
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _still_running(framework, task_id: str) -> None:
    """The forged update changed nothing: a real kill is the next thing the framework hears."""
    framework.driver.killTask({"value": task_id})
    status = framework.update(task_id)
    assert (status["state"], status.get("message")) != ("TASK_FAILED", "forged")
    assert status["state"] == "TASK_KILLED", status


def test_update_without_a_token_is_refused_and_the_task_keeps_running(
    harness, holding_script, mesos_master
) -> None:
    framework = harness()
    task_id, executor_id, token = _launch(framework, holding_script)
    assert token, "the agent gave the executor no MESOS_EXECUTOR_AUTHENTICATION_TOKEN"
    assert _forge(mesos_master, framework.framework_id, executor_id, task_id, None) == 401
    assert _forge(mesos_master, framework.framework_id, executor_id, task_id, "x.y.z") == 401
    _still_running(framework, task_id)


def test_one_executors_token_does_not_cover_another_executor(
    harness, holding_script, mesos_master
) -> None:
    framework = harness()
    victim, victim_executor, _ = _launch(framework, holding_script)
    _mine, my_executor, my_token = _launch(framework, holding_script)
    fid = framework.framework_id
    # as the victim's executor, with my token: the token does not name that executor
    assert _forge(mesos_master, fid, victim_executor, victim, my_token) == 403
    _still_running(framework, victim)


def test_an_executor_updating_another_executors_task(
    harness, holding_script, mesos_master, request
) -> None:
    """As its own executor, about a task of another executor of the same framework: the
    emulator refuses (403); the real agent 1.11 forwards it (the agent looks the task's
    executor up by task id). Pinned here so that a change on either side is noticed; DLC's
    defence on a real cluster is that only DLC's executors (root processes on the agent) hold
    tokens (docs/security.md)."""
    framework = harness()
    victim, _victim_executor, _ = _launch(framework, holding_script)
    _mine, my_executor, my_token = _launch(framework, holding_script)
    code = _forge(mesos_master, framework.framework_id, my_executor, victim, my_token)
    if "emulator" in request.node.name:
        assert code == 403
        _still_running(framework, victim)
    else:
        assert code == 202
        status = framework.update(victim)
        assert (status["state"], status["message"]) == ("TASK_FAILED", "forged")
        assert "executor_id" not in status  # nothing in it tells the scheduler who sent it
