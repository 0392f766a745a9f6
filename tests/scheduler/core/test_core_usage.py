"""SchedulerCore keeps the latest GPU reading of each running task (allocated versus used)."""

from __future__ import annotations

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.usage import GpuUsage, encode_report
from dlc.scheduler.tenancy.policy import Group, Policy
from dlc.store.memory import MemoryJobStore

from ..helpers import offer

TOTAL = 81559


def _core():
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    return SchedulerCore(MemoryJobStore(), config, lambda spec: (spec.image, None))


def _running(core, user="alice", gpus=2, agent="a1"):
    job = core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": gpus}))
    actions = core.on_offers([offer(f"o-{job.job_id}", agent, gpus=list(range(8)))])
    (_, (task,)) = actions.accepts[0]
    task_id = task["task_id"]["value"]
    core.on_status({"task_id": {"value": task_id}, "state": "TASK_RUNNING",
                    "agent_id": {"value": agent}})  # fmt: skip
    return job.job_id, task_id, sorted(int(i) for r in task["resources"] if r["name"] == "gpu_ids"
                                       for i in r["set"]["item"])  # fmt: skip


def _report(task_id, gpus, util=0.0, top=0, used=1542, n=6):
    return encode_report({task_id: [GpuUsage(i, util, top, used, TOTAL, used, n, 50.0)
                                    for i in gpus]})  # fmt: skip


def test_a_running_tasks_report_reaches_job_and_gpu_views():
    core = _core()
    job_id, task_id, gpus = _running(core)
    assert core.job_usage(job_id) is None  # allocated, not reported yet
    assert core.on_usage("a1", _report(task_id, gpus, util=75.0, top=99)) == 1
    usage = core.job_usage(job_id)
    assert (usage.util_pct, usage.gpus, usage.mem_used_mib, usage.idle) == (75.0, 2, 3084, False)
    assert sorted(core.gpu_usage()) == [("a1", g) for g in gpus]


def test_reports_of_unknown_tasks_or_the_wrong_agent_are_dropped():
    core = _core()
    job_id, task_id, gpus = _running(core)
    assert core.on_usage("a2", _report(task_id, gpus)) == 0
    assert core.on_usage("a1", _report("job-x.0.0", gpus)) == 0
    assert core.on_usage("a1", "garbage") == 0
    assert core.job_usage(job_id) is None and core.gpu_usage() == {}


def test_an_ended_task_disappears_from_the_usage():
    core = _core()
    job_id, task_id, gpus = _running(core)
    core.on_usage("a1", _report(task_id, gpus))
    core.on_status({"task_id": {"value": task_id}, "state": "TASK_FINISHED",
                    "agent_id": {"value": "a1"}})  # fmt: skip
    assert core.job_usage(job_id) is None and core.gpu_usage() == {}
    assert core.usage_rollups("user") == []


def test_rollups_show_allocated_but_idle_gpus_per_user_and_group():
    core = _core()
    team = Group("vision", members=frozenset({"alice", "bob"}))
    core.set_tenancy(Policy(groups={"vision": team}))
    _, busy, busy_gpus = _running(core, "alice", gpus=2)
    _, idle, idle_gpus = _running(core, "bob", gpus=1)
    core.on_usage("a1", _report(busy, busy_gpus, util=90.0, top=100))
    core.on_usage("a1", _report(idle, idle_gpus, util=0.0, top=1))
    users = {r.key: r for r in core.usage_rollups("user")}
    assert (users["alice"].gpus_idle, users["bob"].gpus_idle) == (0, 1)
    (group,) = core.usage_rollups("group")
    assert (group.key, group.gpus_allocated, group.gpus_idle, group.util_pct) == (
        "vision", 3, 1, 60.0)  # fmt: skip
    jobs = {busy.rsplit(".", 2)[0], idle.rsplit(".", 2)[0]}
    assert {r.key for r in core.usage_rollups("job")} == jobs


def test_a_memory_share_counts_its_part_of_a_gpu():
    # new-user walkthrough (issue 30): three 4 GiB shares of 32 GiB GPUs showed "GPUS 3" in
    # `dlc usage` while `dlc quota` charged 0.375
    from tests.scheduler.placement.test_share_placement import ranged_offer

    core = _core()
    for n in range(3):
        core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpu_memory": "4G",
                                                "cpus": 0.1, "mem_mib": 64}))  # fmt: skip
        actions = core.on_offers([ranged_offer(f"o{n}", "a1", sharing="none")])
        (_, (task,)) = actions.accepts[0]
        core.on_status({"task_id": task["task_id"], "state": "TASK_RUNNING",
                        "agent_id": {"value": "a1"}})  # fmt: skip
    (alice,) = core.usage_rollups("user")
    assert alice.gpus_allocated == 0.375
