"""One Mesos TaskState vocabulary: the emulator and the scheduler agree on what is over."""

from __future__ import annotations

import pytest

from dlc.mesos.emulator import model as emulator_model
from dlc.mesos.emulator.model import Task
from dlc.mesos.resources import Resources
from dlc.scheduler.core import state as core_state
from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.jobs.job import JobState, job_state_from_task_state
from dlc.scheduler.tasks import states
from dlc.store.sqlite import JobStore

LIVE = ["TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING", "TASK_UNREACHABLE"]


def test_emulator_and_scheduler_use_the_shared_constants():
    assert emulator_model.TERMINAL_STATES is states.TERMINAL_STATES
    assert core_state._TERMINAL_TASK is states.NOT_RUNNING_STATES
    assert states.TERMINAL_STATES | {"TASK_UNKNOWN"} == states.NOT_RUNNING_STATES


@pytest.mark.parametrize("state", sorted(states.TERMINAL_STATES) + LIVE + ["TASK_UNKNOWN"])
def test_emulator_task_is_terminal_exactly_for_mesos_terminal_states(state):
    task = Task("t", "f", "a", "e", {}, Resources(), state=state)
    assert task.terminal is (state in states.TERMINAL_STATES) is states.is_terminal(state)


@pytest.mark.parametrize(
    "state, killed",
    [(s, False) for s in sorted(states.NOT_RUNNING_STATES)] + [(s, True) for s in LIVE],
)
def test_scheduler_kills_a_stale_task_only_while_it_may_run(tmp_path, state, killed):
    scheduler = SchedulerCore(JobStore(tmp_path / "db"))
    status = {"task_id": {"value": "nojob.0.0"}, "agent_id": {"value": "a1"}, "state": state}
    assert scheduler.on_status(status).kills == ([("nojob.0.0", "a1")] if killed else [])


@pytest.mark.parametrize("state", sorted(states.NOT_RUNNING_STATES))
def test_every_not_running_state_ends_the_job_task(state):
    assert job_state_from_task_state(state) not in (JobState.STAGING, JobState.RUNNING)
