"""Mesos task status updates read into the core's task updates, and reconciliation written
(dlc/mesos/status.py, through MesosCodec); malformed updates behave as they did when the core
read the TaskStatus itself."""

from __future__ import annotations

import logging

import pytest

from dlc.mesos.codec import MesosCodec
from dlc.mesos.status import decode_status, reconcile_request
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.states import TaskUpdate
from dlc.store.memory import MemoryJobStore
from tests.scheduler.helpers import offer


@pytest.mark.parametrize(
    ("status", "update"),
    [
        pytest.param(
            {"task_id": {"value": "j.0.0"}, "state": "TASK_FAILED",
             "agent_id": {"value": "a1"}, "executor_id": {"value": "dlc-executor.j.0.0"},
             "reason": "REASON_COMMAND_EXECUTOR_FAILED", "message": "exit 1",
             "source": "SOURCE_EXECUTOR", "uuid": "dXVpZA==", "healthy": True,
             "labels": {"labels": [{"key": "dlc.sandbox", "value": "/elsewhere"}]}},
            TaskUpdate(task_id="j.0.0", state="TASK_FAILED", agent_id="a1",
                       executor_id="dlc-executor.j.0.0", reason="REASON_COMMAND_EXECUTOR_FAILED",
                       message="exit 1", from_executor=True),
            id="full",
        ),
        pytest.param(
            {"task_id": {"value": "j.0.0"}, "state": "TASK_LOST",
             "reason": "REASON_RECONCILIATION", "source": "SOURCE_MASTER"},
            TaskUpdate(task_id="j.0.0", state="TASK_LOST", reason="REASON_RECONCILIATION"),
            id="master-answer-without-agent",
        ),
        pytest.param(
            {"task_id": {"value": "j.0.0"}, "agent_id": {"value": "a1"}},
            TaskUpdate(task_id="j.0.0", state="TASK_LOST", agent_id="a1", stated=False),
            id="no-state",
        ),
        pytest.param(
            {"state": "TASK_RUNNING", "agent_id": {}, "executor_id": None, "message": None},
            TaskUpdate(task_id="", state="TASK_RUNNING"),
            id="empty-parts",
        ),
    ],
)  # fmt: skip
def test_a_task_status_reads_as_the_cores_update(status, update):
    assert decode_status(status) == update
    assert MesosCodec().decode_status(status) == update


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({"task_id": "j.0.0", "state": "TASK_RUNNING"}, id="task-id-not-an-object"),
        pytest.param({"task_id": {"value": "j.0.0"}, "agent_id": None}, id="agent-id-null"),
    ],
)
def test_an_id_that_is_not_an_object_is_not_read(status):
    with pytest.raises(AttributeError):
        decode_status(status)


@pytest.mark.parametrize(
    "executor_id",
    [
        pytest.param("dlc-executor.j.0.0", id="text"),
        pytest.param(["dlc-executor.j.0.0"], id="list"),
        pytest.param({"value": 5}, id="value-not-text"),
    ],
)
def test_a_malformed_executor_id_marks_the_update_and_keeps_the_rest(executor_id):
    status = {"task_id": {"value": "j.0.0"}, "state": "TASK_FAILED",
              "agent_id": {"value": "a1"}, "executor_id": executor_id, "message": "exit 1",
              "source": "SOURCE_EXECUTOR"}  # fmt: skip
    update = MesosCodec().decode_status(status)
    assert update.malformed.startswith("with an executor_id that is not an object")
    assert repr(executor_id)[:20] in update.malformed
    assert update == TaskUpdate(task_id="j.0.0", state="TASK_FAILED", agent_id="a1",
                                message="exit 1", from_executor=True,
                                malformed=update.malformed)  # fmt: skip


def test_the_reconciliation_request_is_mesos_s():
    tasks = [("j.0.0", "a1"), ("k.1.0", "a2")]
    assert reconcile_request(iter(tasks)) == [
        {"task_id": {"value": "j.0.0"}, "agent_id": {"value": "a1"}},
        {"task_id": {"value": "k.1.0"}, "agent_id": {"value": "a2"}},
    ]
    assert MesosCodec().reconcile_request([]) == []


def _running(retries=0):
    core = SchedulerCore(
        MemoryJobStore(), CoreConfig(placement=PlacementConfig("first-fit")),
        lambda spec: (spec.image or "img", None), codec=MesosCodec(),
    )  # fmt: skip
    job = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1, "retries": retries}))
    core.on_offers([offer("o1", "a1", [0])])
    task_id = f"{job.job_id}.0.0"
    core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": "a1"},
                    "state": "TASK_RUNNING"})  # fmt: skip
    assert core.get_job(job.job_id).state is JobState.RUNNING
    return core, job.job_id, task_id


def test_an_update_without_a_state_is_a_loss_that_holds_no_gpu():
    """Folded as TASK_LOST (a failure, not a free relaunch) but proving nothing about the
    container: its GPU is not drained, so the retry starts on it at once."""
    core, job_id, task_id = _running(retries=1)
    core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": "a1"}})
    again = core.get_job(job_id)
    assert (again.state, again.attempt, again.failures) == (JobState.QUEUED, 1, 1)
    [(_, [info])] = core.on_offers([offer("o2", "a1", [0])]).accepts
    assert info["task_id"]["value"] == f"{job_id}.1.0"


def test_an_update_with_an_id_that_is_not_an_object_changes_nothing():
    core, job_id, task_id = _running()
    with pytest.raises(AttributeError):
        core.on_status({"task_id": {"value": task_id}, "agent_id": "a1", "state": "TASK_FAILED"})
    with pytest.raises(AttributeError):
        core.on_status({"task_id": task_id, "state": "TASK_FAILED"})
    job = core.get_job(job_id)
    assert job.state is JobState.RUNNING and job.tasks[0].state == "TASK_RUNNING"


def test_an_update_with_a_malformed_executor_id_is_refused_logged_and_reconciled(caplog):
    """Refused (its origin cannot be checked) but not raised: raising left it unacknowledged,
    so Mesos resent it for ever; the master is asked for the task's state instead, and its
    answer applies."""
    core, job_id, task_id = _running()
    forged = {"task_id": {"value": task_id}, "agent_id": {"value": "a1"}, "state": "TASK_FAILED",
              "executor_id": "dlc-executor.other", "source": "SOURCE_EXECUTOR"}  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="dlc.scheduler.core.status"):
        actions = core.on_status(forged)
        again = core.on_status(dict(forged))
    assert actions.reconcile == again.reconcile == [(task_id, "a1")] and not actions.kills
    job = core.get_job(job_id)
    assert job.state is JobState.RUNNING and job.tasks[0].state == "TASK_RUNNING"
    assert core.ignored_updates.count == 2
    [line] = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
    assert "executor_id that is not an object" in line and "'dlc-executor.other'" in line
    # the master's answer names no executor: it is checked as usual and applies
    core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": "a1"},
                    "state": "TASK_FAILED", "source": "SOURCE_MASTER",
                    "reason": "REASON_RECONCILIATION"})  # fmt: skip
    assert core.get_job(job_id).state is JobState.FAILED


def test_a_refused_update_without_an_agent_is_reconciled_on_the_tasks_agent():
    core, _, task_id = _running()
    actions = core.on_status({"task_id": {"value": task_id}, "state": "TASK_FINISHED",
                              "executor_id": ["x"]})  # fmt: skip
    assert actions.reconcile == [(task_id, "a1")]
    assert core.on_status({"task_id": {"value": "nojob.0.0"}, "executor_id": 7}).reconcile == []


def test_a_malformed_update_is_reconciled_only_for_a_placed_task_on_its_own_agent():
    # red-team #48: the update's own task and agent ids were asked after, whatever they named
    core, _, task_id = _running()
    forged = {"agent_id": {"value": "a9"}, "state": "TASK_FAILED", "executor_id": 7}
    made_up = core.on_status({**forged, "task_id": {"value": "nojob.0.0"}})
    assert made_up.reconcile == []
    assert core.on_status({**forged, "task_id": {"value": task_id}}).reconcile == [(task_id, "a1")]


def test_a_made_up_task_id_or_state_cannot_write_lines_of_its_own_into_the_log(caplog):
    # red-team #51: a malformed update's task id and state were logged as they came
    core, _, _ = _running()
    task_id = "nojob.0.0\n2026-11-27 WARNING dlc: admin token rotated" + "x" * 100_000
    with caplog.at_level(logging.WARNING, logger="dlc.scheduler.core.status"):
        core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": "a1"},
                        "state": "TASK_FAILED\nforged", "executor_id": 7})  # fmt: skip
    [line] = [r.getMessage() for r in caplog.records if "nojob.0.0" in r.getMessage()]
    assert "\n" not in line and len(line) < 600
    assert "'nojob.0.0\\n2026-11-27 WARNING" in line and "'TASK_FAILED\\nforged'" in line
