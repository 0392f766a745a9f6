"""A job never starts again while its previous attempt may still run (dlc.scheduler.tasks.draining).

The fault suite found retries that started on *other* GPUs while the SIGKILLed executor's
container still ran (the GPUs were drained, the job was not): the job ran twice at once. These
tests drive the core with the updates Mesos sends in those cases.
"""

from __future__ import annotations

import pytest

from dlc.mesos.offers import offer_view
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.draining import ORPHAN_STOP_BOUND_S, Drains
from dlc.store.sqlite import JobStore

from ..core.test_core import FakeClock, resolver, status
from ..helpers import offer

EXECUTOR_KILLED = {
    "reason": "REASON_EXECUTOR_TERMINATED",
    "source": "SOURCE_AGENT",
    "message": "Executor terminated",
}


@pytest.fixture
def timed(tmp_path):
    clock = FakeClock()
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    return SchedulerCore(JobStore(tmp_path / "db"), config, resolver, clock=clock), clock


def _run_then_lose(core, **end):
    job = core.submit("alice", JobSpec.from_dict({"framework": "pytorch:2.3", "retries": 2}))
    core.on_offers([offer("o1", "a1", [0])])
    old = f"{job.job_id}.0.0"
    core.on_status(status(old, "TASK_RUNNING"))
    core.on_status(status(old, end.pop("state", "TASK_FAILED"), **end))
    return job, old


def test_retry_is_not_placed_anywhere_until_the_old_attempt_is_gone(timed):
    core, clock = timed
    job, old = _run_then_lose(core, **EXECUTOR_KILLED)
    # other GPUs, even another agent: still not placed, with the reason visible
    assert core.on_offers([offer("o2", "a1", [0, 1, 2]), offer("o3", "a2", [0])]).accepts == []
    message = core.store.get_job(job.job_id).message
    assert "attempt 1 may still run" in message and "confirmed gone" in message
    assert "attempt 1 may still run" in core.queue_reason(job.job_id)
    # the old executor's own terminal update proves the container is gone
    core.on_status(status(old, "TASK_KILLED", source="SOURCE_EXECUTOR"))
    [(_, [info])] = core.on_offers([offer("o4", "a2", [0])]).accepts
    assert info["task_id"]["value"] == f"{job.job_id}.1.0"


def test_a_reconciliation_answer_does_not_release_the_job(timed):
    core, clock = timed
    job, old = _run_then_lose(core, **EXECUTOR_KILLED)
    # the master only repeats what it knows; it never saw the container stop
    answer = {"reason": "REASON_RECONCILIATION", "source": "SOURCE_MASTER"}
    core.on_status(status(old, "TASK_FAILED", **answer))
    assert core.on_offers([offer("o2", "a2", [0])]).accepts == []
    assert core.store.get_job(job.job_id).state is JobState.QUEUED


def test_the_wait_is_bounded_by_the_reapers_time(timed):
    core, clock = timed
    job, _ = _run_then_lose(core, state="TASK_LOST", reason="REASON_AGENT_DISCONNECTED")
    clock.now += ORPHAN_STOP_BOUND_S - 1
    assert core.on_offers([offer("o2", "a2", [0])]).accepts == []
    clock.now += 1
    [(_, [info])] = core.on_offers([offer("o3", "a2", [0])]).accepts
    assert info["task_id"]["value"] == f"{job.job_id}.1.0"


def test_an_executor_reported_end_does_not_hold_the_job(timed):
    core, _ = timed
    job, _ = _run_then_lose(core, state="TASK_FAILED", source="SOURCE_EXECUTOR")
    assert core.on_offers([offer("o2", "a2", [0])]).accepts
    assert core.store.get_job(job.job_id).state is JobState.STAGING


def test_a_refused_launch_holds_the_gpus_but_not_the_job(timed):
    core, _ = timed
    job = core.submit("alice", JobSpec.from_dict({"framework": "pytorch:2.3"}))
    core.on_offers([offer("o1", "a1", [0])])
    refusal = "GPU double assignment refused: container dlc-x holds GPUs [0]"
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED", message=refusal,
                          source="SOURCE_EXECUTOR"))  # fmt: skip
    assert core.on_offers([offer("o2", "a1", [0])]).accepts == []  # GPU 0 drains
    assert core.on_offers([offer("o3", "a1", [1])]).accepts  # the job itself may go


def test_a_late_running_update_of_an_old_attempt_holds_the_job_again():
    drains = Drains(timeout_s=120.0, job_wait_s=20.0)
    drains.hold("j1.0.0", "a1", [0], now=0.0)
    assert drains.job_wait("j1", 10.0) is not None
    drains.hold("j1.0.0", "a1", [0], now=15.0)  # it was seen running after all
    assert drains.job_wait("j1", 30.0) is not None
    assert drains.job_wait("j1", 35.0) is None
    assert drains.job_wait("j2", 10.0) is None


def test_the_job_wait_never_outlasts_the_gpu_drain():
    assert Drains(timeout_s=5.0, job_wait_s=20.0).job_wait_s == 5.0


def test_a_launch_dropped_by_a_restarting_agent_is_queued_again_for_free(timed):
    core, _ = timed
    job = core.submit("alice", JobSpec.from_dict({"framework": "pytorch:2.3", "retries": 0}))
    core.on_offers([offer("o1", "a1", [0])])
    dropped = {"reason": "REASON_AGENT_RESTARTED", "source": "SOURCE_AGENT",
               "message": "Task launched during agent restart"}  # fmt: skip
    core.on_status(status(f"{job.job_id}.0.0", "TASK_LOST", **dropped))
    again = core.store.get_job(job.job_id)
    assert again.state is JobState.QUEUED and again.failures == 0
    [(_, [info])] = core.on_offers([offer("o2", "a1", [0])]).accepts
    assert info["task_id"]["value"] == f"{job.job_id}.1.0"


def test_a_draining_gpu_takes_no_share_either():
    """Fault suite, seed 2027: a whole-GPU job's executor was SIGKILLed, its GPU drained, and
    a share was placed on that GPU (its gpu_mem/gpu_core blocks were still offered) while the
    orphaned container ran: two jobs on one GPU for 0.9 s."""
    from dlc.topology.gpu_shares import STRIDE
    from tests.scheduler.helpers import place

    from ..placement.test_share_placement import ranged_offer, share_job

    drains = Drains()
    drains.hold("jold.0.0", "a1", [0], now=0.0)
    view = drains.strip(offer_view(ranged_offer("o1", "a1", gpus=2)))
    assert view.gpu_ids == frozenset({1})
    assert all(begin // STRIDE == 1 for begin, _ in view.gpu_mem + view.gpu_core)
    (launch,) = place([view], [share_job("s1", gpu_memory="4G")]).launches
    assert launch.share is not None and launch.share.gpu_index == 1
    # with every GPU draining, the share waits
    drains.hold("jold2.0.0", "a1", [1], now=0.0)
    view = drains.strip(offer_view(ranged_offer("o2", "a1", gpus=2)))
    assert not view.gpu_ids and not view.gpu_mem and not view.gpu_core
    assert not place([view], [share_job("s2", gpu_memory="4G")]).launches
    # an agent with nothing draining gets its offer back as it is
    other = offer_view(ranged_offer("o3", "a2", gpus=2))
    assert drains.strip(other) is other


def test_a_share_whose_executor_died_holds_its_gpu_from_the_next_share(timed):
    """The share's orphaned container may still use its GPU's memory: the GPU drains as a
    whole GPU's would (it held nothing before: a share task has no ``gpu_ids``)."""
    from ..placement.test_share_placement import ranged_offer

    core, clock = timed
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpu_memory": "30G",
                                                  "retries": 2}))  # fmt: skip
    actions = core.on_offers([ranged_offer("o1", "a1", gpus=2)])
    assert len(actions.accepts) == 1
    (task,) = core.get_job(job.job_id).tasks
    assert task.share_gpu is not None and not task.gpu_ids
    core.on_status(status(task.task_id, "TASK_RUNNING"))
    core.on_status(status(task.task_id, "TASK_FAILED", **EXECUTOR_KILLED))
    assert core.state.drains.held("a1") == {task.share_gpu}
    other = core.submit("bob", JobSpec.from_dict({"image": "busybox", "gpu_memory": "30G"}))
    clock.now += 1
    core.on_offers([ranged_offer("o2", "a1", gpus=2)])
    (placed,) = core.get_job(other.job_id).tasks
    assert placed.share_gpu == 1 - task.share_gpu
