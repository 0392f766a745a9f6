"""SchedulerCore: jobs in, Mesos actions out, driven with offers and status updates as data."""

from __future__ import annotations

import pytest

from dlc.errors import ImageNotFound, JobNotFound, JobSpecError
from dlc.scheduler.core import CoreConfig, SchedulerCore
from dlc.scheduler.jobs import JobSpec, JobState
from dlc.scheduler.placement import PlacementConfig
from dlc.scheduler.store import JobStore

from .helpers import offer, pairs_topology


def resolver(spec):
    if spec.image:
        return spec.image, None
    if spec.framework == "pytorch:2.3":
        return "pytorch/pytorch:2.3.1", "12.1"
    raise ImageNotFound(f"unknown {spec.framework}; known: pytorch:2.3")


@pytest.fixture
def core(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), allowed_volumes=("/data",))
    return SchedulerCore(JobStore(tmp_path / "db"), config, resolver)


def submit(core, user="alice", **body):
    return core.submit(user, JobSpec.from_dict({"framework": "pytorch:2.3", **body}))


def status(task_id, state, agent="a1", **extra):
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}, **extra}


def test_submit_resolves_image_and_queues(core):
    job = submit(core, gpus=2)
    assert job.state is JobState.QUEUED
    assert (job.spec.image, job.spec.cuda_version) == ("pytorch/pytorch:2.3.1", "12.1")


@pytest.mark.parametrize(
    "body, error, match",
    [
        pytest.param({"framework": "pytorch:9.9"}, ImageNotFound, "known: pytorch:2.3", id="ver"),
        pytest.param({"volumes": ["/etc:/etc"]}, JobSpecError, "allowed: /data", id="volume"),
        pytest.param({"gpus": 9}, JobSpecError, "no agent has more than 8", id="too-many-gpus"),
    ],
)
def test_submit_rejects(core, body, error, match):
    core.on_offers([offer("o0", "a0", list(range(8)))])  # an 8-GPU agent is known
    with pytest.raises(error, match=match):
        submit(core, **body)


def test_offer_launches_and_persists_staging_first(core):
    job = submit(core, gpus=2)
    actions = core.on_offers([offer("o1", "a1", [0, 1, 2, 3]), offer("o2", "a2", [0])])
    assert actions.declines == ["o2"]
    [(offer_ids, infos)] = actions.accepts
    assert offer_ids == ["o1"]
    assert infos[0]["task_id"] == {"value": f"{job.job_id}.0.0"}
    assert infos[0]["resources"][-1]["set"]["item"] == ["0", "1"]
    stored = core.store.get_job(job.job_id)
    assert stored.state is JobState.STAGING and stored.gpu_ids == (0, 1)
    assert actions.suppress  # nothing left in the queue


def test_lifecycle_to_finished(core):
    job = submit(core)
    core.on_offers([offer("o1", "a1", [0])])
    tid = f"{job.job_id}.0.0"
    for state, expect in [
        ("TASK_STARTING", JobState.STAGING),
        ("TASK_RUNNING", JobState.RUNNING),
        ("TASK_FINISHED", JobState.FINISHED),
    ]:
        core.on_status(status(tid, state, message=f"now {state}"))
        got = core.store.get_job(job.job_id)
        assert got.state is expect and got.message == f"now {state}"
    assert core.reconcile_tasks() == []


def test_failed_job_retried_then_gives_up(core):
    job = submit(core, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    actions = core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED", message="exit 1"))
    again = core.store.get_job(job.job_id)
    assert actions.revive and again.state is JobState.QUEUED and again.attempt == 1
    assert "retrying (1 left)" in again.message
    [(_, infos)] = core.on_offers([offer("o2", "a1", [0])]).accepts
    assert infos[0]["task_id"]["value"] == f"{job.job_id}.1.0"
    core.on_status(status(f"{job.job_id}.1.0", "TASK_LOST"))
    assert core.store.get_job(job.job_id).state is JobState.LOST


def test_update_of_old_attempt_is_killed_not_applied(core):
    job = submit(core, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED"))
    actions = core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    assert actions.kills == [(f"{job.job_id}.0.0", "a1")]
    assert core.store.get_job(job.job_id).state is JobState.QUEUED


def test_gang_failure_kills_the_rest_then_fails(core):
    job = submit(core, gpus=1, nodes=2)
    core.on_offers([offer("o1", "a1", [0]), offer("o2", "a2", [0])])
    t0, t1 = f"{job.job_id}.0.0", f"{job.job_id}.0.1"
    core.on_status(status(t0, "TASK_RUNNING"))
    core.on_status(status(t1, "TASK_RUNNING", "a2"))
    assert core.store.get_job(job.job_id).state is JobState.RUNNING
    actions = core.on_status(status(t1, "TASK_FAILED", "a2"))
    assert actions.kills == [(t0, "a1")]
    assert core.store.get_job(job.job_id).state is JobState.RUNNING
    core.on_status(status(t0, "TASK_KILLED"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED


def test_kill_queued_and_running(core):
    queued = submit(core, gpus=8)
    running = submit(core)
    core.on_offers([offer("o1", "a1", [0])])
    job, actions = core.kill(queued.job_id, "alice")
    assert job.state is JobState.KILLED and actions.kills == []
    job, actions = core.kill(running.job_id, "alice")
    assert actions.kills == [(f"{running.job_id}.0.0", "a1")]
    core.on_status(status(f"{running.job_id}.0.0", "TASK_KILLED"))
    assert core.store.get_job(running.job_id).state is JobState.KILLED


def test_other_users_job_is_invisible_but_admin_sees_it(core):
    job = submit(core, user="alice")
    with pytest.raises(JobNotFound):
        core.kill(job.job_id, "bob")
    assert core.visible_job(job.job_id, "root", admin=True).user == "alice"


def test_never_launched_task_is_requeued_without_using_a_retry(core):
    """Saved as staging, then the scheduler died before the ACCEPT reached the master."""
    job = submit(core)
    core.on_offers([offer("o1", "a1", [0])])
    assert core.reconcile_tasks() == [
        {"task_id": {"value": f"{job.job_id}.0.0"}, "agent_id": {"value": "a1"}}
    ]
    actions = core.on_status(
        status(f"{job.job_id}.0.0", "TASK_LOST", reason="REASON_RECONCILIATION")
    )
    again = core.store.get_job(job.job_id)
    assert actions.revive and again.state is JobState.QUEUED and again.failures == 0


def test_restarted_core_reconciles_running_task_and_launches_nothing(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    first = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    job = submit(first)
    first.on_offers([offer("o1", "a1", [0, 1])])
    first.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    first.store.close()

    second = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    assert second.reconcile_tasks() == [
        {"task_id": {"value": f"{job.job_id}.0.0"}, "agent_id": {"value": "a1"}}
    ]
    second.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING", reason="REASON_RECONCILIATION"))
    actions = second.on_offers([offer("o2", "a1", [1])])
    assert actions.accepts == [] and actions.declines == ["o2"]
    assert second.store.get_job(job.job_id).state is JobState.RUNNING


def test_foreign_task_update_ignored(core):
    assert core.on_status(status("not-ours", "TASK_FINISHED")).kills == []


def test_waiting_message_explains(core):
    job = submit(core, gpus=4)
    actions = core.on_offers([offer("o1", "a1", [0, 1])])
    assert actions.declines == ["o1"] and not actions.suppress
    assert core.store.get_job(job.job_id).message == "waiting: no offer has 4 free GPUs"


@pytest.mark.parametrize(
    "reason, requeued_free",
    [
        pytest.param("REASON_INVALID_OFFERS", True, id="rescinded-offer"),
        pytest.param("REASON_RECONCILIATION", True, id="unknown-to-master"),
        pytest.param("REASON_TASK_INVALID", False, id="invalid-task-is-a-failure"),
    ],
)
def test_launch_that_never_started(core, reason, requeued_free):
    job = submit(core)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_LOST", reason=reason))
    again = core.store.get_job(job.job_id)
    if requeued_free:
        assert again.state is JobState.QUEUED and again.failures == 0
    else:
        assert again.state is JobState.LOST


def test_gang_member_dropped_kills_the_rest_instead_of_free_requeue(core):
    job = submit(core, nodes=2, retries=1)
    core.on_offers([offer("o1", "a1", [0]), offer("o2", "a2", [0])])
    t0, t1 = f"{job.job_id}.0.0", f"{job.job_id}.0.1"
    core.on_status(status(t0, "TASK_RUNNING"))
    actions = core.on_status(status(t1, "TASK_LOST", "a2", reason="REASON_INVALID_OFFERS"))
    assert actions.kills == [(t0, "a1")]
    actions = core.on_status(status(t0, "TASK_KILLED"))
    again = core.store.get_job(job.job_id)
    assert actions.revive and again.state is JobState.QUEUED and again.failures == 1


@pytest.mark.parametrize(
    "with_topology, note",
    [(False, True), (True, False)],
    ids=["bare-agent-says-first-fit", "topology-agent-no-note"],
)
def test_launch_message_says_when_topology_was_not_used(tmp_path, with_topology, note):
    topo = pairs_topology(4, {(2, 3)})
    core = SchedulerCore(
        JobStore(tmp_path / "db"), CoreConfig(placement=PlacementConfig("tree")), resolver,
        topology_of=(lambda attrs: topo) if with_topology else (lambda attrs: None),
    )  # fmt: skip
    job = submit(core, gpus=2)
    core.on_offers([offer("o1", "a1", [0, 1, 2, 3])])
    message = core.store.get_job(job.job_id).message
    assert message.startswith("launching on ")
    assert ("(first-fit: the agent has no dlc_topo attribute)" in message) is note
