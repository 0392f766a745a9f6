"""A forged status update cannot end another user's running DLC job (red-team finding
2026-11-26), on the emulator and on the real master with executor authentication on.

Everything the forger needs is public: ``/master/state`` lists the framework, executor and task
ids. Without the executor's token the agent answers ``401``; the job keeps running until its
owner kills it.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid

import pytest

from tests.e2e.test_scheduler_real_mesos import (  # noqa: F401 (fixture)
    _cli,
    _master_state,
    _service,
    _wait_state,
    master,
)

pytestmark = pytest.mark.mesos


def _forge(address: str, framework_id: str, executor_id: str, task_id: str) -> int:
    call = {
        "type": "UPDATE",
        "framework_id": {"value": framework_id},
        "executor_id": {"value": executor_id},
        "update": {"status": {
            "task_id": {"value": task_id}, "state": "TASK_FAILED", "message": "forged",
            "source": "SOURCE_EXECUTOR", "uuid": base64.b64encode(uuid.uuid4().bytes).decode(),
        }},
    }  # fmt: skip
    request = urllib.request.Request(f"http://{address}/slave(1)/api/v1/executor",
                                     data=json.dumps(call).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_forged_update_leaves_the_job_running(master, tmp_path):  # noqa: F811
    address, _kind = master
    service = _service(address, tmp_path / "db")
    try:
        job_id = _cli(service, "submit", "--image", "none", "--gpus", "1", "--", "sleep", "60")
        job_id = job_id.split()[0]
        job = _wait_state(service, job_id, {"running"})
        task = job.tasks[0]
        state = _master_state(address)
        [framework] = [f for f in state["frameworks"] if f["id"] == service.core.framework_id]
        assert any(t["id"] == task.task_id for t in framework["tasks"])  # all of it is public
        assert _forge(address, framework["id"], task.executor_id, task.task_id) == 401
        assert service.store.get_job(job_id).state.value == "running"
        _cli(service, "kill", job_id)
        ended = _wait_state(service, job_id, {"killed", "failed", "finished", "lost"})
        assert ended.state.value == "killed", ended.message
        assert "forged" not in ended.message
    finally:
        service.stop()
