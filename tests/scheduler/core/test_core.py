"""SchedulerCore: jobs in, Mesos actions out, driven with offers and status updates as data."""

from __future__ import annotations

import pytest

from dlc.errors import ImageNotFound, JobNotFound, JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer, pairs_topology


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


def slave(agent, gpus=8, cpus=16.0, mem=65536.0, model="Tesla_V100-SXM2-32GB", active=True):
    """One ``/master/slaves`` entry as the real master renders it."""
    ids = ", ".join(str(i) for i in range(gpus))
    return {
        "id": agent,
        "hostname": f"host-{agent}",
        "active": active,
        "resources": {"cpus": cpus, "mem": mem, "disk": 10240.0, "gpus": float(gpus),
                      "gpu_ids": "{" + ids + "}"},
        "attributes": {"gpu_model": f"v{model}"},
    }  # fmt: skip


def test_submit_resolves_image_and_queues(core):
    job = submit(core, gpus=2)
    assert job.state is JobState.QUEUED
    assert (job.spec.image, job.spec.cuda_version) == ("pytorch/pytorch:2.3.1", "12.1")


@pytest.mark.parametrize(
    "body, error, match",
    [
        pytest.param({"framework": "pytorch:9.9"}, ImageNotFound, "known: pytorch:2.3", id="ver"),
        pytest.param({"volumes": ["/etc:/host-etc"]}, JobSpecError, "allowed: /data", id="volume"),
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
    core.on_status(status(f"{job.job_id}.1.0", "TASK_FAILED", message="exit 1"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED


@pytest.mark.parametrize(
    "update",
    [
        pytest.param({"state": "TASK_LOST", "reason": "REASON_RECONCILIATION"}, id="unknown"),
        pytest.param({"state": "TASK_GONE", "reason": "REASON_AGENT_REMOVED"}, id="agent-gone"),
        pytest.param(
            {
                "state": "TASK_FAILED",
                "reason": "REASON_EXECUTOR_TERMINATED",
                "source": "SOURCE_AGENT",
            },
            id="executor-died",
        ),  # fmt: skip
    ],
)
def test_a_task_lost_by_the_infrastructure_does_not_use_a_retry(timed, update):
    # The fault suite's case: the retry went on a real failure, then the relaunch was lost
    # with a dlc local crash. The job must run again and end as its command does.
    from dlc.scheduler.tasks.draining import ORPHAN_STOP_BOUND_S

    core, clock = timed
    job = submit(core, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED", message="exit 3"))
    core.on_offers([offer("o2", "a1", [0])])
    core.on_status(status(f"{job.job_id}.1.0", "TASK_RUNNING"))
    actions = core.on_status(status(f"{job.job_id}.1.0", **update))
    again = core.store.get_job(job.job_id)
    assert actions.revive and again.state is JobState.QUEUED
    assert again.failures == 1 and again.attempt == 2
    assert again.message.startswith("relaunching, no retry used")
    clock.now += ORPHAN_STOP_BOUND_S  # the lost task may still run: it is waited for
    core.on_offers([offer("o3", "a1", [1])])  # GPU 0 drains longer
    core.on_status(status(f"{job.job_id}.2.0", "TASK_FAILED", message="exit 3"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED


def test_an_executor_reporting_its_own_error_uses_a_retry(core):
    job = submit(core, retries=0)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED", reason="REASON_EXECUTOR_TERMINATED",
                          source="SOURCE_EXECUTOR", message="executor error"))  # fmt: skip
    assert core.store.get_job(job.job_id).state is JobState.FAILED


def test_free_relaunches_after_losses_are_bounded(timed):
    # a job whose every task dies with its node must not loop forever
    from dlc.scheduler.tasks.draining import ORPHAN_STOP_BOUND_S
    from dlc.scheduler.tasks.infra_loss import FREE_RELAUNCHES

    core, clock = timed
    job = submit(core, retries=1)
    for attempt in range(FREE_RELAUNCHES + 2):
        agent = f"a{attempt}"  # a new node each time: the lost ones' GPUs drain
        clock.now += ORPHAN_STOP_BOUND_S
        core.on_offers([offer(f"o{attempt}", agent, [0])])
        core.on_status(status(f"{job.job_id}.{attempt}.0", "TASK_LOST", agent,
                              reason="REASON_AGENT_REMOVED", source="SOURCE_MASTER"))  # fmt: skip
        if core.store.get_job(job.job_id).state is not JobState.QUEUED:
            break
    again = core.store.get_job(job.job_id)
    assert again.state is JobState.LOST
    assert again.attempt == FREE_RELAUNCHES + 1 and again.failures == 1


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
    core.update_agents([slave("a1", gpus=4)])
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
    # the node was lost, not failed: once its mate has ended, no retry is used
    assert actions.revive and again.state is JobState.QUEUED and again.failures == 0
    assert again.message.startswith("relaunching, no retry used: node 1 failed")


def test_gang_member_failing_on_its_own_uses_a_retry(core):
    job = submit(core, nodes=2, retries=1)
    core.on_offers([offer("o1", "a1", [0]), offer("o2", "a2", [0])])
    t0, t1 = f"{job.job_id}.0.0", f"{job.job_id}.0.1"
    core.on_status(status(t0, "TASK_RUNNING"))
    core.on_status(status(t1, "TASK_FAILED", "a2", source="SOURCE_EXECUTOR", message="exit 1"))
    core.on_status(status(t0, "TASK_KILLED"))
    again = core.store.get_job(job.job_id)
    assert again.state is JobState.QUEUED and again.failures == 1


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


# -- admission: refuse what no known agent could ever run --------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        pytest.param(
            {"gpu_model": "H100"},
            "gpu_model: no agent has a GPU matching 'H100' (known: Tesla_V100-SXM2-32GB); "
            "drop --gpu-model or ask an admin",
            id="model",
        ),
        pytest.param(
            {"gpus": 9}, "gpus: asked for 9 but no agent has more than 8; use --gpus 8", id="gpus"
        ),
        pytest.param({"cpus": 64}, "cpus: asked for 64 but no agent has more than 15.9", id="cpus"),
        pytest.param(
            {"mem_mib": 1 << 30}, "mem_mib: asked for 1073741824 MiB but no agent", id="mem-1pib"
        ),
        pytest.param(
            {"nodes": 1024},
            "nodes: asked for 1024 nodes but only 2 agent(s) can run this job; use --nodes 2",
            id="nodes",
        ),
        pytest.param(
            {"gpus": 8, "nodes": 2},
            "nodes: asked for 2 nodes but only 1 agent(s) can run this job",
            id="nodes-need-distinct-able-agents",
        ),
    ],
)
def test_admission_refuses_the_impossible_in_one_line(core, body, message):
    core.update_agents([slave("a1", gpus=8), slave("a2", gpus=4), slave("a3", active=False)])
    with pytest.raises(JobSpecError) as err:
        submit(core, **body)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "agents, body",
    [
        pytest.param(None, {"gpus": 64, "gpu_model": "H100", "nodes": 9}, id="fresh-start"),
        pytest.param([slave("a1")], {"gpu_model": "v100", "gpus": 8}, id="model-loose-match"),
        pytest.param([slave("a1")], {"cpus": 15.9, "mem_mib": 65472}, id="exactly-fits"),
    ],
)
def test_admission_accepts_what_could_run(core, agents, body):
    if agents:
        core.update_agents(agents)
    assert submit(core, **body).state is JobState.QUEUED


def test_offers_alone_never_refuse_on_cpus_or_memory(core):
    core.on_offers([offer("o1", "a1", [0], cpus=2, mem=1024)])  # busy agent: lower bounds
    assert submit(core, cpus=8, mem_mib=8192).state is JobState.QUEUED


def test_gpu_totals_survive_a_restart_with_running_tasks(tmp_path):
    """A 4-GPU agent with 2 GPUs busy offers 2; after a restart `--gpus 4` is still fine."""
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    first = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    job = submit(first, gpus=2)
    first.on_offers([offer("o1", "a1", [0, 1, 2, 3])])
    first.store.close()
    second = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    second.on_offers([offer("o2", "a1", [2, 3])])
    assert second.max_agent_gpus() == 4
    assert submit(second, gpus=4).state is JobState.QUEUED
    assert second.store.get_job(job.job_id).state is JobState.STAGING


# -- priority bounded by the grant ------------------------------------------------------


@pytest.mark.parametrize(
    "priority, grant, admin, error",
    [
        pytest.param(1000, 10, False, "priority: 1000 is above your limit 10;", id="above-grant"),
        pytest.param(10, 10, False, None, id="at-grant"),
        pytest.param(1, None, False, "priority: 1 is above your limit 0;", id="user-default-0"),
        pytest.param(1000, None, True, None, id="admin-unlimited"),
        pytest.param(-5, None, False, None, id="lower-is-always-fine"),
    ],
)
def test_priority_is_bounded_by_the_grant(core, priority, grant, admin, error):
    spec = JobSpec.from_dict({"image": "x", "priority": priority})
    if error is None:
        assert core.submit("alice", spec, max_priority=grant, admin=admin).spec.priority == priority
    else:
        with pytest.raises(JobSpecError, match=error.replace("(", r"\(")):
            core.submit("alice", spec, max_priority=grant, admin=admin)


# -- no stalled queue: impossible jobs and bounded reservations --------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def timed(tmp_path):
    clock = FakeClock()
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=2, reservation_s=600)
    return SchedulerCore(JobStore(tmp_path / "db"), config, resolver, clock=clock), clock


def _message(core, job):
    return core.store.get_job(job.job_id).message


def test_job_impossible_after_agents_left_does_not_stall_others(timed):
    core, _ = timed
    core.update_agents([slave("a1", gpus=8), slave("a2", gpus=2)])
    big = submit(core, gpus=8)
    small = submit(core, gpus=1)
    core.update_agents([slave("a2", gpus=2)])  # the 8-GPU agent left
    for n in range(5):  # well past max_skips (2): never a block
        core.on_offers([offer(f"o{n}", "a2", [])])
    actions = core.on_offers([offer("o9", "a2", [0, 1])])
    assert [i["task_id"]["value"] for _, infos in actions.accepts for i in infos] == [
        f"{small.job_id}.0.0"
    ]
    assert _message(core, big) == (
        "waiting: impossible on the current agents: gpus: asked for 8 but no agent has more "
        "than 2; use --gpus 2"
    )
    assert core.queue_reason(big.job_id).startswith("position 1 of 1; impossible")


def test_big_job_reserves_an_agent_others_backfill_elsewhere_then_release(timed):
    core, clock = timed
    core.update_agents([slave("a1", gpus=4), slave("a2", gpus=4)])
    big = submit(core, gpus=4)
    smalls = []
    for _ in range(3):
        clock.now += 1  # a strict queue order (same times tie-break on random ids)
        smalls.append(submit(core, gpus=1))
    offers = [offer("o1", "a1", [0, 1, 2]), offer("o2", "a2", [0])]  # never 4 free
    core.on_offers(offers)  # smalls[0] -> a2, smalls[1] -> a1 (best fit)
    core.on_offers([offer("o3", "a1", [0, 1])])  # smalls[2] -> a1; big skipped twice: reserves
    # a2 has 3 of its 4 GPUs free by DLC's count (one small job there): closest to fitting
    assert _message(core, big) == "waiting: reserving agent a2: 3 of 4 GPUs free (10 min left)"
    assert any("reserving agent a2" in m for _, _, m in core.store.history(big.job_id))
    late = submit(core, gpus=1)
    actions = core.on_offers([offer("o4", "a1", [0, 1, 2]), offer("o5", "a2", [1, 2, 3])])
    placed = {i["task_id"]["value"]: i["agent_id"]["value"] for _, infos in actions.accepts
              for i in infos}  # fmt: skip
    assert placed == {f"{late.job_id}.0.0": "a1"}  # backfill only on the other agent
    assert actions.declines == ["o5"]  # the reserved agent drains
    clock.now += 601  # the bound expires: released with its reason, others may use a2
    other = submit(core, gpus=1)
    actions = core.on_offers([offer("o6", "a2", [1, 2, 3])])
    assert [i["task_id"]["value"] for _, infos in actions.accepts for i in infos] == [
        f"{other.job_id}.0.0"
    ]
    released = [m for _, _, m in core.store.history(big.job_id) if m.startswith("released")]
    assert released == [
        "released reserved agent a2: held for 10 min without room for the job; others may use it"
    ]
    assert smalls


def test_every_waiting_job_has_a_true_reason(timed):
    core, clock = timed
    jobs = []
    for body in ({}, {}, {"gpu_model": "P100"}):
        clock.now += 1
        jobs.append(submit(core, gpus=2, **body))
    core.update_agents([slave("a1", gpus=2)])  # known after the submits: P100 is impossible
    core.on_offers([offer("o1", "a1", [0])])
    reasons = [core.queue_reason(j.job_id) for j in jobs]
    assert reasons == [
        "position 1 of 3; no offer has 2 free GPUs",
        "position 2 of 3; no offer has 2 free GPUs",
        "position 3 of 3; impossible on the current agents: gpu_model: no agent has a GPU "
        "matching 'P100' (known: Tesla_V100-SXM2-32GB); drop --gpu-model or ask an admin",
    ]


def test_offer_round_reads_no_job_list_from_the_store(core, monkeypatch):
    submit(core)
    monkeypatch.setattr(core.store, "list_jobs", lambda *a, **k: pytest.fail("list_jobs called"))
    assert core.on_offers([offer("o1", "a1", [0])]).accepts


# -- crash safety ----------------------------------------------------------------------


def test_kill_is_stored_before_the_answer_and_resent_after_restart(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    first = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    job = submit(first)
    first.on_offers([offer("o1", "a1", [0])])
    first.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    first.kill(job.job_id, "alice")  # the scheduler dies before the kill reaches Mesos
    first.store.close()
    second = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    tid = f"{job.job_id}.0.0"
    assert second.pending_kills().kills == [(tid, "a1")]
    # the reconciliation answer says it still runs: kill again
    assert second.on_status(status(tid, "TASK_RUNNING", reason="REASON_RECONCILIATION")).kills == [
        (tid, "a1")
    ]
    second.on_status(status(tid, "TASK_KILLED", source="SOURCE_EXECUTOR"))
    assert second.store.get_job(job.job_id).state is JobState.KILLED
    assert second.pending_kills().kills == []


@pytest.mark.parametrize(
    "end, drains",
    [
        pytest.param({"state": "TASK_FAILED", "reason": "REASON_EXECUTOR_TERMINATED",
                      "source": "SOURCE_AGENT"}, True, id="executor-terminated"),
        pytest.param({"state": "TASK_LOST", "reason": "REASON_AGENT_DISCONNECTED",
                      "source": "SOURCE_MASTER"}, True, id="agent-disconnected"),
        pytest.param({"state": "TASK_GONE", "reason": "REASON_AGENT_REMOVED"}, True,
                     id="agent-removed"),
        pytest.param({"state": "TASK_FAILED", "source": "SOURCE_EXECUTOR"}, False,
                     id="executor-says-failed"),
    ],
)  # fmt: skip
def test_retry_waits_for_the_old_attempt_to_be_confirmed_gone(timed, end, drains):
    core, clock = timed
    job = submit(core, gpus=2, retries=2)
    core.on_offers([offer("o1", "a1", [0, 1])])
    old = f"{job.job_id}.0.0"
    core.on_status(status(old, "TASK_RUNNING"))
    core.on_status(status(old, end.pop("state"), **end))
    assert core.store.get_job(job.job_id).state is JobState.QUEUED
    actions = core.on_offers([offer("o2", "a1", [0, 1])])
    assert bool(actions.accepts) is not drains
    if not drains:
        return
    assert core.draining_gpus("a1") == {0, 1}
    assert "confirmed gone" in _message(core, job)
    assert {"task_id": {"value": old}, "agent_id": {"value": "a1"}} in core.reconcile_tasks()
    # the old container reports its end: the GPUs are free for the retry
    core.on_status(status(old, "TASK_KILLED", source="SOURCE_EXECUTOR"))
    [(_, [info])] = core.on_offers([offer("o3", "a1", [0, 1])]).accepts
    assert info["task_id"]["value"] == f"{job.job_id}.1.0"


def test_draining_gpus_are_released_after_the_timeout(timed):
    core, clock = timed
    job = submit(core, gpus=1, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_LOST", reason="REASON_AGENT_DISCONNECTED"))
    assert core.on_offers([offer("o2", "a1", [0])]).accepts == []
    clock.now += core.config.drain_timeout_s
    assert core.on_offers([offer("o3", "a1", [0])]).accepts


def test_late_update_of_an_old_attempt_drains_its_gpus_and_is_killed(timed):
    core, _ = timed
    job = submit(core, gpus=1, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    old = f"{job.job_id}.0.0"
    core.on_status(status(old, "TASK_FAILED", source="SOURCE_EXECUTOR"))
    assert core.on_status(status(old, "TASK_RUNNING")).kills == [(old, "a1")]
    assert core.on_offers([offer("o2", "a1", [0])]).accepts == []


def test_unreachable_task_keeps_the_job_running(core):
    job = submit(core, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    tid = f"{job.job_id}.0.0"
    core.on_status(status(tid, "TASK_RUNNING"))
    actions = core.on_status(status(tid, "TASK_UNREACHABLE", reason="REASON_AGENT_DISCONNECTED"))
    got = core.store.get_job(job.job_id)
    assert actions.kills == [] and not actions.revive
    assert got.state is JobState.RUNNING and "unreachable" in got.message
    assert core.reconcile_tasks() == [{"task_id": {"value": tid}, "agent_id": {"value": "a1"}}]
    core.on_status(status(tid, "TASK_RUNNING", reason="REASON_RECONCILIATION"))
    core.on_status(status(tid, "TASK_FINISHED", source="SOURCE_EXECUTOR"))
    assert core.store.get_job(job.job_id).state is JobState.FINISHED


def test_node_refusing_a_double_assignment_costs_no_retry_and_moves_the_job(timed):
    """The executor refused to start because a live container holds the GPUs: retry the job
    on other GPUs without spending one of its retries."""
    core, _ = timed
    job = submit(core, gpus=1, retries=0)
    core.on_offers([offer("o1", "a1", [0, 1])])
    first = core.store.get_job(job.job_id).tasks[0]
    refusal = (
        "GPU double assignment refused: container dlc-x (task t) holds GPUs [0] and its "
        "executor is still running; the task was not started"
    )
    core.on_status(status(first.task_id, "TASK_FAILED", source="SOURCE_EXECUTOR",
                          message=refusal))  # fmt: skip
    again = core.store.get_job(job.job_id)
    assert (again.state, again.failures, again.attempt) == (JobState.QUEUED, 0, 1)
    assert core.draining_gpus("a1") == set(first.gpu_ids)
    [(_, [info])] = core.on_offers([offer("o2", "a1", [0, 1])]).accepts
    ids = {int(i) for r in info["resources"] if r["name"] == "gpu_ids" for i in r["set"]["item"]}
    assert ids.isdisjoint(first.gpu_ids)


def test_a_failed_gang_reports_the_failing_nodes_cause_not_its_mates_kill(core):
    job = submit(core, gpus=1, nodes=2)
    core.on_offers([offer("o1", "a1", [0]), offer("o2", "a2", [0])])
    t0, t1 = f"{job.job_id}.0.0", f"{job.job_id}.0.1"
    core.on_status(status(t0, "TASK_RUNNING"))
    core.on_status(status(t1, "TASK_RUNNING", "a2"))
    core.on_status(status(t0, "TASK_FAILED", message="nc: bind: Address already in use"))
    core.on_status(
        status(t1, "TASK_KILLED", "a2", message="killed on request (SIGTERM, then SIGKILL)")
    )
    ended = core.store.get_job(job.job_id)
    assert ended.state is JobState.FAILED
    assert ended.message == "node 0 failed: nc: bind: Address already in use"


@pytest.mark.parametrize("late", ["TASK_STARTING", "TASK_RUNNING"])
def test_a_mates_late_start_does_not_hide_the_failed_nodes_cause(core, late):
    # seen on dlc local: node 0 failed while node 1 was still starting its container; node
    # 1's "container ... running" then became the failed job's only message
    job = submit(core, gpus=1, nodes=2)
    core.on_offers([offer("o1", "a1", [0]), offer("o2", "a2", [0])])
    t0, t1 = f"{job.job_id}.0.0", f"{job.job_id}.0.1"
    core.on_status(status(t0, "TASK_RUNNING"))
    core.on_status(status(t0, "TASK_FAILED", message="exit code 1; last output: nc: bind"))
    core.on_status(status(t1, late, "a2", message="container 3544a528051d running busybox"))
    assert core.store.get_job(job.job_id).message == (
        "node 0 failed: exit code 1; last output: nc: bind"
    )
    core.on_status(status(t1, "TASK_KILLED", "a2", message="killed on request"))
    ended = core.store.get_job(job.job_id)
    assert ended.state is JobState.FAILED
    assert ended.message == "node 0 failed: exit code 1; last output: nc: bind"


@pytest.mark.parametrize(
    "late",
    [
        pytest.param(
            {"state": "TASK_FAILED", "source": "SOURCE_MASTER", "reason": "REASON_RECONCILIATION"},
            id="reconciliation-echo",
        ),  # fmt: skip
        pytest.param(
            {"state": "TASK_LOST", "source": "SOURCE_MASTER", "reason": "REASON_RECONCILIATION"},
            id="late-loss",
        ),  # fmt: skip
    ],
)
def test_an_ended_job_is_not_reopened_by_a_late_update(core, late):
    # the held-out fault seed 7700: a job failed for good, then the master's answer to
    # reconciliation (its latest state) relaunched it as if the task had been lost
    job = submit(core, retries=1)
    core.on_offers([offer("o1", "a1", [0])])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FAILED", message="exit 3"))
    core.on_offers([offer("o2", "a1", [1])])
    core.on_status(status(f"{job.job_id}.1.0", "TASK_FAILED", message="exit 3"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED
    actions = core.on_status(status(f"{job.job_id}.1.0", **late))
    again = core.store.get_job(job.job_id)
    assert again.state is JobState.FAILED and again.attempt == 1 and not actions.revive
    assert again.message == "exit 3"
