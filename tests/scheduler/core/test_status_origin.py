"""Status updates are trusted for a task's state only, and only from the task's own agent and
executor (red-team finding 2026-11-26: forged executor status updates)."""

from __future__ import annotations

import logging

import pytest

from dlc.api.metrics import SchedulerMetrics
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer
from .test_core import resolver, status, submit


@pytest.fixture
def core(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    store = JobStore(tmp_path / "db")
    return SchedulerCore(store, config, resolver, metrics=SchedulerMetrics())


def _running(core):
    job = submit(core, gpus=1)
    core.on_offers([offer("o1", "a1", [0, 1])])
    task_id = f"{job.job_id}.0.0"
    core.on_status(status(task_id, "TASK_RUNNING"))
    assert core.store.get_job(job.job_id).state is JobState.RUNNING
    return job.job_id, task_id


def test_an_update_from_another_agent_is_ignored_and_logged_once(core, caplog):
    job_id, task_id = _running(core)
    with caplog.at_level(logging.WARNING, logger="dlc.scheduler.core.status"):
        for _ in range(3):
            actions = core.on_status(status(task_id, "TASK_FAILED", agent="a2", message="forged"))
            assert not actions.kills
    job = core.store.get_job(job_id)
    assert job.state is JobState.RUNNING and job.tasks[0].state == "TASK_RUNNING"
    assert core.ignored_updates.count == 3
    assert "dlc_status_updates_ignored_total 3.0" in core.metrics.exposition().decode()
    lines = [r.getMessage() for r in caplog.records if task_id in r.getMessage()]
    assert len(lines) == 1 and "from agent a2, but the task runs on agent a1" in lines[0]


def test_an_update_naming_another_executor_is_ignored(core):
    job_id, task_id = _running(core)
    forged = status(task_id, "TASK_FAILED", executor_id={"value": "dlc-executor.other.0.0"})
    core.on_status(forged)
    assert core.store.get_job(job_id).state is JobState.RUNNING
    # the agent's own update about the task's real executor still counts
    real = status(task_id, "TASK_FAILED", executor_id={"value": f"dlc-executor.{task_id}"},
                  source="SOURCE_AGENT", reason="REASON_EXECUTOR_TERMINATED")  # fmt: skip
    core.on_status(real)
    after = core.store.get_job(job_id)  # the executor died under it: relaunched, no retry used
    assert after.state is JobState.QUEUED and after.attempt == 1 and after.failures == 0


def test_a_sandbox_label_in_an_update_is_ignored(core, tmp_path):
    job_id, task_id = _running(core)
    label = {"labels": [{"key": "dlc.sandbox", "value": str(tmp_path / "elsewhere")}]}
    core.on_status(status(task_id, "TASK_RUNNING", labels=label))
    assert core.store.get_job(job_id).tasks[0].sandbox == ""


def test_an_update_without_an_agent_still_applies(core):
    """The master's reconciliation answers may carry no agent: they are not foreign."""
    job_id, task_id = _running(core)
    core.on_status({"task_id": {"value": task_id}, "state": "TASK_FINISHED"})
    assert core.store.get_job(job_id).state is JobState.FINISHED
