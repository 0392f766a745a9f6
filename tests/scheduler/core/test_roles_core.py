"""The core on a shared cluster: reserved offers echoed, refusals retried elsewhere, and
``gpus`` below the ``gpu_ids`` count (another framework took whole GPUs by the scalar)."""

from __future__ import annotations

import logging

from dlc.mesos.offers import offer_view
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.memory import MemoryJobStore

from ..helpers import offer

ALLOC = {"allocation_info": {"role": "dlc"}}
STATIC = {"reservations": [{"type": "STATIC", "role": "dlc"}]}

#: the real master's words for a task whose resources the offer does not hold
REFUSED = (
    "Total resources cpus(allocated: dlc):1.1; gpus(allocated: dlc):2 required by task and its "
    "executor is more than available gpus(allocated: dlc)(reservations: [(STATIC,dlc)]):4"
)


def _core(roles=("dlc",)):
    config = CoreConfig(placement=PlacementConfig("first-fit"), roles=roles)
    return SchedulerCore(MemoryJobStore(), config, lambda spec: (spec.image, None))


def _submit(core, gpus=1):
    return core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": 1}))


def _reserved(oid, agent, role="dlc", reserved=(0, 1, 2, 3)):
    """An offer whose GPUs are statically reserved for ``role``, allocated to ``role``."""
    base = offer(oid, agent, list(reserved), cpus=8, mem=8192)
    alloc = {"allocation_info": {"role": role}}
    static = {"reservations": [{"type": "STATIC", "role": role}]}
    for res in base["resources"]:
        res.pop("role", None)
        res.update(alloc)
        if res["name"] in ("gpus", "gpu_ids"):
            res.update(static)
    base.update(alloc)
    return base


def _status(task_id, agent, state="TASK_ERROR", message=REFUSED):
    return {
        "task_id": {"value": task_id}, "agent_id": {"value": agent}, "state": state,
        "reason": "REASON_TASK_INVALID", "message": message, "source": "SOURCE_MASTER",
    }  # fmt: skip


def test_task_resources_echo_the_offers_reservations():
    core = _core()
    _submit(core, gpus=2)
    actions = core.on_offers([_reserved("o1", "a1")])
    [(offer_ids, [info])] = actions.accepts
    assert offer_ids == ["o1"]
    by_name = {r["name"]: r for r in info["resources"]}
    assert by_name["gpus"] == {"name": "gpus", "type": "SCALAR", "scalar": {"value": 2.0},
                               **ALLOC, **STATIC}  # fmt: skip
    assert by_name["gpu_ids"]["set"]["item"] == ["0", "1"]
    assert by_name["gpu_ids"]["reservations"] == STATIC["reservations"]
    assert by_name["cpus"] == {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.0}, **ALLOC}
    assert all(r["allocation_info"] == ALLOC["allocation_info"]
               for r in info["executor"]["resources"])  # fmt: skip


def test_gpus_reserved_for_another_role_are_never_taken():
    core = _core()
    job = _submit(core)
    spark = _reserved("o1", "a1", role="spark")
    for res in spark["resources"]:  # allocated to dlc, but reserved for spark (a bad master)
        res["allocation_info"] = {"role": "dlc"}
    spark["allocation_info"] = {"role": "dlc"}
    actions = core.on_offers([spark])
    assert actions.accepts == [] and actions.declines == ["o1"]
    assert core.store.get_job(job.job_id).state is JobState.QUEUED


def test_offers_of_two_roles_on_one_agent_accept_one_role_and_decline_the_other():
    core = _core(roles=("dlc", "batch"))
    _submit(core, gpus=2)
    batch = offer("o2", "a1", [], cpus=4, mem=4096)
    for res in batch["resources"]:
        res["allocation_info"] = {"role": "batch"}
    batch["allocation_info"] = {"role": "batch"}
    actions = core.on_offers([_reserved("o1", "a1"), batch])
    [(offer_ids, [_info])] = actions.accepts
    assert offer_ids == ["o1"] and actions.declines == ["o2"]


def test_refused_resources_retry_elsewhere_without_a_failure_and_log_once(caplog):
    now = [1000.0]
    config = CoreConfig(placement=PlacementConfig("first-fit"), roles=("dlc",))
    core = SchedulerCore(MemoryJobStore(), config, lambda spec: (spec.image, None),
                         clock=lambda: now[0])  # fmt: skip
    job = _submit(core)
    core.on_offers([_reserved("o1", "a1")])
    with caplog.at_level(logging.WARNING, logger="dlc.scheduler.tasks.refusals"):
        actions = core.on_status(_status(f"{job.job_id}.0.0", "a1"))
        again = core.store.get_job(job.job_id)
        assert actions.revive and again.state is JobState.QUEUED and again.failures == 0
        assert again.message.startswith("relaunching elsewhere: the Mesos master refused")
        assert "\n" not in again.message and len(again.message) < 200
        # the refusing agent is skipped for now: its offer is declined, another agent takes it
        actions = core.on_offers([_reserved("o2", "a1"), _reserved("o3", "a2")])
        [(offer_ids, [info])] = actions.accepts
        assert offer_ids == ["o3"] and actions.declines == ["o2"]
        core.on_status({**_status(info["task_id"]["value"], "a2"), "state": "TASK_FINISHED"})
        # later the agent is tried again; a second refusal there logs nothing new
        now[0] += 61.0
        job2 = _submit(core)
        [(offer_ids, _)] = core.on_offers([_reserved("o4", "a1")]).accepts
        assert offer_ids == ["o4"]
        core.on_status(_status(f"{job2.job_id}.0.0", "a1", state="TASK_DROPPED"))
        assert core.store.get_job(job2.job_id).failures == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "dlc.scheduler.tasks.refusals"]
    assert len(lines) == 1  # once per agent, not per task
    assert "on agent host-a1 (a1)" in lines[0]
    assert "fix: start `dlc scheduler --role ROLE`" in lines[0]


def test_other_failures_still_count_against_retries():
    core = _core()
    job = _submit(core)
    core.on_offers([_reserved("o1", "a1")])
    core.on_status(_status(f"{job.job_id}.0.0", "a1", message="Task uses invalid agent"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED


def test_gpus_below_gpu_ids_count_marks_the_lowest_ids_taken():
    # another framework took 2 whole GPUs by the plain scalar: gpus 2, gpu_ids still 4 items
    raw = offer("o1", "a1", [0, 1, 2, 3], gpus_scalar=2)
    raw["resources"].append({"name": "gpu_mem", "type": "RANGES", "ranges": {"range": [
        {"begin": i << 20, "end": (i << 20) + 1023} for i in range(4)]}})  # fmt: skip
    raw["resources"].append({"name": "gpu_core", "type": "RANGES", "ranges": {"range": [
        {"begin": i << 20, "end": (i << 20) + 999} for i in range(4)]}})  # fmt: skip
    view = offer_view(raw)
    assert view.gpu_ids == frozenset({2, 3})
    assert view.gpu_mem == ((2 << 20, (2 << 20) + 1023), (3 << 20, (3 << 20) + 1023))
    core = _core(roles=())
    _submit(core, gpus=2)
    [(_, [info])] = core.on_offers([raw]).accepts
    [ids] = [r for r in info["resources"] if r["name"] == "gpu_ids"]
    assert ids["set"]["item"] == ["2", "3"]
    [mem] = [r for r in info["resources"] if r["name"] == "gpu_mem"]
    assert [r["begin"] >> 20 for r in mem["ranges"]["range"]] == [2, 3]


def test_group_roles_keep_a_groups_jobs_on_its_roles_offers():
    from dlc.scheduler.tenancy.policy import Group, Policy

    config = CoreConfig(placement=PlacementConfig("first-fit"), roles=("dlc", "vision"),
                        group_roles=(("vision-team", "vision"),))  # fmt: skip
    core = SchedulerCore(MemoryJobStore(), config, lambda spec: (spec.image, None))
    core.set_tenancy(Policy(groups={"vision-team": Group("vision-team", frozenset({"alice"}))}))
    job = _submit(core)  # alice's job: only offers allocated to role vision
    actions = core.on_offers([_reserved("o1", "a1", role="dlc")])
    assert actions.accepts == [] and actions.declines == ["o1"]
    queued = core.store.get_job(job.job_id)
    assert queued.state is JobState.QUEUED
    assert "waiting for an offer of its group's role vision" in queued.message
    [(offer_ids, _)] = core.on_offers([_reserved("o2", "a1", role="vision")]).accepts
    assert offer_ids == ["o2"]


def test_roles_no_queued_job_can_use_are_suppressed_alone():
    from dlc.scheduler.tenancy.policy import Group, Policy

    config = CoreConfig(placement=PlacementConfig("first-fit"), roles=("dlc", "vision"),
                        group_roles=(("vision-team", "vision"),))  # fmt: skip
    core = SchedulerCore(MemoryJobStore(), config, lambda spec: (spec.image, None))
    core.set_tenancy(Policy(groups={"vision-team": Group("vision-team", frozenset({"alice"}))}))
    core.submit("alice", JobSpec.from_dict({"image": "busybox", "cpus": 64}))  # waits: too big
    actions = core.on_offers([_reserved("o1", "a1", role="vision")])
    assert not actions.suppress and actions.suppress_roles == ("dlc",)
    core.submit("bob", JobSpec.from_dict({"image": "busybox", "cpus": 64}))  # unmapped group
    assert core.on_offers([_reserved("o2", "a1", role="vision")]).suppress_roles == ()
