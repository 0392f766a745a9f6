"""Elastic gangs (``--nodes MIN:MAX``): start at MIN, grow on left-over capacity while no
queued job of the same or higher priority waits, give back extra members first."""

from __future__ import annotations

import json

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.gangs.elastic import nodes_text
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer


def resolver(spec):
    return spec.image, None


def make_core(path):
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    return SchedulerCore(JobStore(path / "db"), config, resolver)


@pytest.fixture
def core(tmp_path):
    return make_core(tmp_path)


def submit(core, user="alice", **body):
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, **body})
    return core.submit(user, spec, admin=True)


def status(task_id, state, agent, **extra):
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}, **extra}


def one_gpu(agent):
    return offer(f"o-{agent}", agent, [0], cpus=4, mem=8192)


def env_of(info) -> dict[str, str]:
    return LaunchSpec.decode(info["data"]).env


def launched(actions) -> list[dict]:
    return [info for _, infos in actions.accepts for info in infos]


def running(core, job_id, agents):
    for rank, agent in enumerate(agents):
        core.on_status(status(f"{job_id}.0.{rank}", "TASK_RUNNING", agent))


def elastic_at_min(core, agents=("a1", "a2"), **body):
    """A 2:4 gang placed on the first two agents and running."""
    job = submit(core, nodes="2:4", **body)
    actions = core.on_offers([one_gpu(a) for a in agents])
    assert sorted(i["agent_id"]["value"] for i in launched(actions)) == sorted(agents)
    running(core, job.job_id, agents)
    return job


# -- the spec -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nodes, expected",
    [("2:4", (2, 4)), ({"min": 1, "max": 3}, (1, 3)), ("3:3", (3, None)), (4, (4, None))],
)
def test_nodes_min_max_forms(nodes, expected):
    spec = JobSpec.from_dict({"image": "busybox", "nodes": nodes})
    assert (spec.nodes, spec.nodes_max) == expected
    assert JobSpec.from_dict(spec.to_dict()) == spec  # the store's round trip


@pytest.mark.parametrize(
    "body, match",
    [
        ({"nodes": "4:2"}, "MAX \\(2\\) is below MIN \\(4\\)"),
        ({"nodes": "0:2"}, "MIN must be at least 1"),
        ({"nodes": "2:2000"}, "MAX must be at most 1024"),
        ({"nodes": "a:4"}, "MIN must be a whole number"),
        ({"nodes": {"min": 2}}, "needs exactly min and max"),
        ({"nodes": "1:2", "gpus": 0.5}, "a GPU share runs on one node, not 1:2"),
        ({"nodes": "1:2", "interactive": True}, "an environment runs on one node"),
    ],
)
def test_bad_elastic_input_is_one_line_naming_the_field(body, match):
    with pytest.raises(JobSpecError, match=match) as caught:
        JobSpec.from_dict({"image": "busybox", **body})
    assert caught.value.field == "nodes" or "interactive" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_plain_rows_keep_no_elastic_fields():
    """A fixed-size job's stored spec and tasks are as before (older DLCs read them)."""
    spec = JobSpec.from_dict({"image": "busybox", "nodes": 2})
    assert "nodes_max" not in spec.to_dict()


# -- start, grow ------------------------------------------------------------------------------


def test_starts_at_min_with_torchrun_elastic_rendezvous(core):
    job = submit(core, nodes="2:4")
    actions = core.on_offers([one_gpu("a1")])
    assert actions.accepts == []  # MIN is all or nothing
    actions = core.on_offers([one_gpu("a1"), one_gpu("a2")])
    infos = launched(actions)
    assert len(infos) == 2
    envs = [env_of(i) for i in infos]
    endpoint = envs[0]["PET_RDZV_ENDPOINT"]
    for env in envs:
        assert env["PET_NNODES"] == "2:4"
        assert env["PET_RDZV_BACKEND"] == "c10d"
        assert env["PET_RDZV_ENDPOINT"] == endpoint
        assert env["PET_RDZV_ID"] == f"{job.job_id}.0"
        assert (env["DLC_NODES_MIN"], env["DLC_NODES_MAX"]) == ("2", "4")
    assert nodes_text(core.store.get_job(job.job_id)) == "2/2:4"


def test_grows_when_capacity_frees_and_member_gets_node0_rendezvous(core):
    job = elastic_at_min(core)
    other = submit(core, user="bob")
    actions = core.on_offers([one_gpu("a3")])
    assert launched(actions)[0]["task_id"]["value"] == f"{other.job_id}.0.0"  # queue first
    core.on_status(status(f"{other.job_id}.0.0", "TASK_RUNNING", "a3"))
    actions = core.on_status(status(f"{other.job_id}.0.0", "TASK_FINISHED", "a3"))
    assert actions.revive  # the gang may grow on what the job left
    actions = core.on_offers([one_gpu("a3"), one_gpu("a4")])
    members = launched(actions)
    assert sorted(i["task_id"]["value"] for i in members) == [
        f"{job.job_id}.0.2",
        f"{job.job_id}.0.3",
    ]
    first = core.store.get_job(job.job_id)
    node0 = next(t for t in first.tasks if t.rank == 0)
    for info in members:
        env = env_of(info)
        assert env["PET_RDZV_ENDPOINT"] == node0.rendezvous
        assert env["PET_NNODES"] == "2:4"
    assert first.state is JobState.RUNNING
    assert nodes_text(first) == "4/2:4"
    assert core.on_offers([one_gpu("a5")]).accepts == []  # at MAX


def test_no_growth_on_an_agent_a_waiting_job_could_use(core):
    job = elastic_at_min(core)
    core.update_agents([_slave(a, gpus=1) for a in ("a1", "a2", "a3")] + [_slave("a9", gpus=2)])
    gang = submit(core, user="bob", nodes=2)  # could run on a3 and a9: waits for a9 to free
    actions = core.on_offers([one_gpu("a3")])
    assert launched(actions) == []
    again = core.store.get_job(job.job_id)
    assert again.message == (
        f"not growing: job {gang.job_id} (priority 0) waits for capacity and goes first"
    )
    assert len(again.tasks) == 2
    # a waiting job that could never run on a3 does not hold the gang back there ...
    core.kill(gang.job_id, "bob")
    big = submit(core, user="bob", gpus=2)  # only a9 has two GPUs
    actions = core.on_offers([one_gpu("a3")])
    assert [i["task_id"]["value"] for i in launched(actions)] == [f"{job.job_id}.0.2"]
    # ... nor does a lower-priority one
    core.kill(big.job_id, "bob")
    submit(core, user="bob", nodes=2, priority=-5)
    actions = core.on_offers([one_gpu("a9")])
    assert [i["task_id"]["value"] for i in launched(actions)] == [f"{job.job_id}.0.3"]


def test_offers_stay_unsuppressed_while_a_gang_can_grow(core):
    elastic_at_min(core)
    assert core.on_offers([]).suppress is False
    assert core.wants_offers()


# -- shrink -------------------------------------------------------------------------------------


def grown(core):
    """A 2:4 gang grown to 3 nodes (a1, a2, a3), all running."""
    job = elastic_at_min(core)
    core.on_offers([one_gpu("a3")])
    core.on_status(status(f"{job.job_id}.0.2", "TASK_RUNNING", "a3"))
    assert len(core.store.get_job(job.job_id).tasks) == 3
    return job


def test_higher_priority_job_takes_the_extra_member_first(core):
    job = grown(core)
    urgent = submit(core, user="bob", priority=10)
    actions = core.on_offers([])  # the cluster is full: no offer has a free GPU
    assert actions.kills == [(f"{job.job_id}.0.2", "a3")]  # the extra member, not node 0/1
    assert core.store.get_job(job.job_id).message.startswith("shrinking: gave back node 2")
    actions = core.on_status(status(f"{job.job_id}.0.2", "TASK_KILLED", "a3"))
    assert actions.kills == [] and actions.revive
    after = core.store.get_job(job.job_id)
    assert after.state is JobState.RUNNING and nodes_text(after) == "2/2:4"
    actions = core.on_offers([one_gpu("a3")])
    assert [i["task_id"]["value"] for i in launched(actions)] == [f"{urgent.job_id}.0.0"]
    # at MIN: nothing more is given back, whatever waits
    submit(core, user="carol", priority=10)
    assert core.on_offers([]).kills == []


def test_a_lost_extra_member_does_not_fail_the_job(core):
    job = grown(core)
    actions = core.on_status(status(f"{job.job_id}.0.2", "TASK_FAILED", "a3", message="oom"))
    assert actions.kills == []
    after = core.store.get_job(job.job_id)
    assert after.state is JobState.RUNNING and after.failures == 0
    assert after.message == "node 2 left (oom); running on 2/2:4 nodes"
    # below MIN the gang rules stand: node 1 failing kills node 0 and fails the job
    actions = core.on_status(status(f"{job.job_id}.0.1", "TASK_FAILED", "a2"))
    assert actions.kills == [(f"{job.job_id}.0.0", "a1")]
    core.on_status(status(f"{job.job_id}.0.0", "TASK_KILLED", "a1"))
    assert core.store.get_job(job.job_id).state is JobState.FAILED


def test_a_late_update_of_a_member_that_left_is_killed_not_folded(core):
    job = grown(core)
    core.on_status(status(f"{job.job_id}.0.2", "TASK_LOST", "a3"))
    actions = core.on_status(status(f"{job.job_id}.0.2", "TASK_RUNNING", "a3"))
    assert actions.kills == [(f"{job.job_id}.0.2", "a3")]
    assert core.store.get_job(job.job_id).state is JobState.RUNNING


def test_restart_keeps_the_members_and_the_rendezvous(tmp_path):
    first = make_core(tmp_path)
    job = grown(first)
    first.store.close()
    second = make_core(tmp_path)
    again = second.store.get_job(job.job_id)
    assert nodes_text(again) == "3/2:4"
    assert {t.task_id for t in again.tasks} == {f"{job.job_id}.0.{r}" for r in range(3)}
    assert len({t.rendezvous for t in again.tasks if t.rank == 0}) == 1
    row = second.store._db.execute("SELECT tasks FROM jobs WHERE job_id = ?", (job.job_id,))
    assert json.loads(row.fetchone()[0])[0]["rendezvous"]
    actions = second.on_offers([one_gpu("a4")])  # grows on to MAX with node 0's address
    (info,) = launched(actions)
    assert (
        env_of(info)["PET_RDZV_ENDPOINT"] == next(t for t in again.tasks if t.rank == 0).rendezvous
    )


def _slave(agent, gpus=8):
    ids = ", ".join(str(i) for i in range(gpus))
    return {
        "id": agent,
        "hostname": f"host-{agent}",
        "active": True,
        "resources": {"cpus": 16.0, "mem": 65536.0, "disk": 10240.0, "gpus": float(gpus),
                      "gpu_ids": "{" + ids + "}"},
        "attributes": {},
    }  # fmt: skip


# -- quota reclaim ----------------------------------------------------------------------------


def test_quota_reclaim_takes_the_extra_members_before_evicting_the_gang(tmp_path):
    from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources

    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    agents = ("a1", "a2", "a3", "a4")
    core.update_agents([{**_slave(a, gpus=2), "attributes": {"dlc_pool": "train"}}
                        for a in agents])  # fmt: skip
    groups = {g: Group(g, frozenset({g}), "train") for g in ("a", "b")}
    quotas = {(g, "train"): Quota(g, "train", Resources(4, 32, 131072)) for g in groups}
    core.set_tenancy(Policy(groups, quotas, {}, grace_s=30))

    def offers(*names):
        return [offer(f"o-{n}", n, [0, 1], attrs={"dlc_pool": "train"}) for n in names]

    gang = submit(core, user="a", gpus=2, nodes="2:4")
    core.on_offers(offers("a1", "a2"))
    running(core, gang.job_id, ("a1", "a2"))
    actions = core.on_offers(offers("a3", "a4"))  # borrows b's idle guarantee
    assert len(launched(actions)) == 2
    running(core, gang.job_id, agents)
    assert core.plan_queue().usage[("a", "train")].gpus == 8  # extra members are charged
    submit(core, user="b", gpus=2, nodes=2)
    kills = core.pending_kills().kills  # a full cluster: the kill pass plans the reclaim
    assert sorted(kills) == [(f"{gang.job_id}.0.2", "a3"), (f"{gang.job_id}.0.3", "a4")]
    after = core.store.get_job(gang.job_id)
    assert after.state is JobState.RUNNING  # shrunk, not evicted
    assert after.message.startswith("shrinking: gave back node")
    for rank, agent in ((2, "a3"), (3, "a4")):
        core.on_status(status(f"{gang.job_id}.0.{rank}", "TASK_KILLED", agent))
    assert core.pending_kills().kills == []  # at MIN and within a's guarantee: nothing more
    assert nodes_text(core.store.get_job(gang.job_id)) == "2/2:4"


def test_jobs_and_status_show_members_over_the_range(core):
    from dlc.api.app import job_to_dict
    from dlc.cli.job_view import gpus
    from dlc.cli.status_cmd import describe

    job = grown(core)
    body = job_to_dict(core.store.get_job(job.job_id))
    assert (body["nodes"], body["nodes_max"], body["members"]) == (2, 4, 3)
    assert gpus(body) == "3/2:4x1"  # `dlc jobs`
    assert any("1 x 3/2:4 node(s)" in line for line in describe(body))  # `dlc status`


def test_growth_keeps_to_the_group_ceiling(core):
    from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources

    group = Group("a", frozenset({"alice"}), "default")
    quota = Quota("a", "default", Resources(2, 8, 16384), Resources(2, 64, 131072))
    core.set_tenancy(Policy({"a": group}, {("a", "default"): quota}, {}))
    job = elastic_at_min(core)
    assert launched(core.on_offers([one_gpu("a3")])) == []
    assert core.store.get_job(job.job_id).message.startswith(
        "not growing: a would pass its ceiling in pool default (2 of 2 GPUs held)"
    )


def test_growth_keeps_to_the_users_gpu_limit_counting_this_rounds_members(core):
    """3 GPUs allowed, 2 held: one member joins, the next in the same round does not (the
    round's holdings are counted once and the members it adds on top)."""
    from dlc.scheduler.tenancy.policy import Policy, UserLimits

    job = elastic_at_min(core)
    core.set_tenancy(Policy(limits={"alice": UserLimits("alice", max_gpus=3)}))
    actions = core.on_offers([one_gpu("a3"), one_gpu("a4")])
    assert [i["agent_id"]["value"] for i in launched(actions)] == ["a3"]
    assert len(core.store.get_job(job.job_id).tasks) == 3


def test_growth_keeps_to_the_users_cpu_limit_counting_this_rounds_members(core):
    """2 CPUs a node and 0.1 its executor's, 6.3 allowed, 4.2 held: one member joins, the next
    in the same round does not; at the limit the gang says why it does not grow."""
    from dlc.scheduler.tenancy.policy import Policy, UserLimits

    job = elastic_at_min(core, cpus=2)
    core.set_tenancy(Policy(limits={"alice": UserLimits("alice", max_cpus=6.3)}))
    actions = core.on_offers([one_gpu("a3"), one_gpu("a4")])
    assert [i["agent_id"]["value"] for i in launched(actions)] == ["a3"]
    assert len(core.store.get_job(job.job_id).tasks) == 3
    assert launched(core.on_offers([one_gpu("a4")])) == []
    assert core.store.get_job(job.job_id).message.startswith(
        "not growing: user alice holds 6.3 of 6.3 CPUs allowed (each task's executor included)"
    )


def cpu_gangs(core, count, **limits):
    """``count`` 1:4 CPU-only gangs of alice (2 CPUs a node) running at MIN on a1, a2, ...,
    then alice's ``limits`` set."""
    from dlc.scheduler.tenancy.policy import Policy, UserLimits

    jobs = [submit(core, gpus=0, cpus=2, nodes="1:4") for _ in range(count)]
    actions = core.on_offers([one_gpu(f"a{i + 1}") for i in range(count)])
    assert len(launched(actions)) == count
    for job in jobs:
        running(core, job.job_id, [core.store.get_job(job.job_id).tasks[0].agent_id])
    core.set_tenancy(Policy(limits={"alice": UserLimits("alice", **limits)}))
    return jobs


def cpus_held(core, jobs) -> float:
    return sum(j.spec.cpus * len(core.store.get_job(j.job_id).tasks) for j in jobs)


def test_two_gangs_of_one_user_growing_in_one_round_keep_to_the_cpu_limit(core):
    """Red-team finding 55: 8 CPUs allowed (8.4 with a task's executor), 4 held by two gangs
    at MIN; one round with four free agents let each gang add two members against the round's
    first count (12 held)."""
    jobs = cpu_gangs(core, 2, max_cpus=8.4)
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert len(launched(actions)) == 2
    assert cpus_held(core, jobs) == 8


def test_growth_counts_the_jobs_the_queue_launched_in_the_same_round(core):
    """Red-team finding 55: 6 CPUs allowed (6.3 with the executors), 2 held by a gang at MIN, a
    3-CPU job queued: the round launches it and no member beside it (growth counted only what
    ran before it, and added two: 9 held)."""
    jobs = cpu_gangs(core, 1, max_cpus=6.3)
    queued = submit(core, gpus=0, cpus=3)
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert [i["task_id"]["value"] for i in launched(actions)] == [f"{queued.job_id}.0.0"]
    assert cpus_held(core, jobs) == 2
    assert core.store.get_job(jobs[0].job_id).message.startswith(
        "not growing: user alice holds 5.2 of 6.3 CPUs allowed"
    )


def test_growth_keeps_to_the_users_memory_limit(core):
    """Red-team finding 56: three nodes' memory allowed (1 GiB and the executor's 64 MiB
    each), one held by a gang at MIN: two members join, the third does not."""
    (job,) = cpu_gangs(core, 1, max_mem_mib=3 * 1088)
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert len(launched(actions)) == 2
    assert launched(core.on_offers([one_gpu("b9")])) == []
    assert core.store.get_job(job.job_id).message.startswith(
        "not growing: user alice holds 3.1875G of 3.1875G memory allowed (each task's executor "
        "included)"
    )


def test_each_member_counts_its_executor_against_the_users_limits(core):
    """Red-team finding 57: 6 CPUs allowed, a gang at MIN of 2 CPUs a node: with each
    member's executor (0.1) a third node would hold 6.3, so one member joins, not two."""
    (job,) = cpu_gangs(core, 1, max_cpus=6)
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert len(launched(actions)) == 1
    assert launched(core.on_offers([one_gpu("b9")])) == []
    assert core.store.get_job(job.job_id).message.startswith(
        "not growing: user alice holds 4.2 of 6 CPUs allowed (each task's executor included)"
    )


def test_two_gangs_of_one_user_growing_in_one_round_keep_to_the_gpu_limit(core):
    """As the CPU limit: 3 GPUs allowed, 2 held by two one-GPU gangs at MIN: one member
    joins in all (each gang added one against the round's first count: 4 held)."""
    from dlc.scheduler.tenancy.policy import Policy, UserLimits

    jobs = [submit(core, nodes="1:4") for _ in range(2)]
    core.on_offers([one_gpu("a1"), one_gpu("a2")])
    for job in jobs:
        running(core, job.job_id, [core.store.get_job(job.job_id).tasks[0].agent_id])
    core.set_tenancy(Policy(limits={"alice": UserLimits("alice", max_gpus=3)}))
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert len(launched(actions)) == 1
    assert sum(len(core.store.get_job(j.job_id).tasks) for j in jobs) == 3


def test_two_gangs_of_one_group_growing_in_one_round_keep_to_its_ceiling(core):
    """Red-team finding 55, the group's side: a ceiling of 3 GPUs, 2 held by two one-GPU gangs
    of the group at MIN: one member joins in all (each gang added one: 4 held)."""
    from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources

    jobs = [submit(core, nodes="1:4") for _ in range(2)]
    core.on_offers([one_gpu("a1"), one_gpu("a2")])
    for job in jobs:
        running(core, job.job_id, [core.store.get_job(job.job_id).tasks[0].agent_id])
    group = Group("a", frozenset({"alice"}), "default")
    quota = Quota("a", "default", Resources(1, 4, 8192), Resources(3, 64, 131072))
    core.set_tenancy(Policy({"a": group}, {("a", "default"): quota}, {}))
    actions = core.on_offers([one_gpu(f"b{i}") for i in range(4)])
    assert len(launched(actions)) == 1
    assert sum(len(core.store.get_job(j.job_id).tasks) for j in jobs) == 3


@pytest.mark.parametrize("nodes", ["2:4", {"min": 2, "max": 4}])
def test_the_api_takes_both_range_forms(tmp_path, nodes):
    from dlc.api.client import ApiClient
    from dlc.api.logs import LogReader
    from dlc.api.server import ApiServer

    core = make_core(tmp_path)
    server = ApiServer(core, LogReader(lambda: "fw", sandbox_roots=[tmp_path]), lambda a: None)
    server.start()
    try:
        token = core.store.add_token("alice")
        job = ApiClient(server.url, token).submit({"image": "busybox", "nodes": nodes})
        assert (job["nodes"], job["nodes_max"], job["members"]) == (2, 4, 0)
    finally:
        server.stop()


def test_new_members_go_nearest_to_node0_and_keep_a_required_level():
    from dlc.scheduler.gangs.elastic import member_order
    from dlc.scheduler.gangs.topology import Locality

    places = {
        "same-switch": Locality("r", "z1", "rack1", "tor1"),
        "same-rack": Locality("r", "z1", "rack1", "tor2"),
        "same-zone": Locality("r", "z1", "rack2", "tor1"),
        "elsewhere": Locality("r", "z2", "rack9", "tor9"),
    }
    anchor = Locality("r", "z1", "rack1", "tor1")
    agents = sorted(places)
    assert member_order(agents, places.get, anchor, None) == [
        "same-switch", "same-rack", "same-zone", "elsewhere",
    ]  # fmt: skip
    assert member_order(agents, places.get, anchor, "rack:required") == ["same-switch", "same-rack"]


def test_torchrun_defaults_unless_the_job_sets_them(core):
    submit(core, nodes="1:2", env={"PET_MAX_RESTARTS": "3"})
    (info,) = launched(core.on_offers([one_gpu("a1")]))
    env = env_of(info)
    assert env["PET_MAX_RESTARTS"] == "3"  # the job's own
    # without it a joining node never completed torchrun's rendezvous (docs/environments.md)
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "WORLD_SIZE" not in env and "PET_NODE_RANK" not in env


def test_a_gang_whose_min_nodes_finished_ends_with_its_last_member(core):
    job = grown(core)
    for rank, agent in ((0, "a1"), (1, "a2")):
        core.on_status(status(f"{job.job_id}.0.{rank}", "TASK_FINISHED", agent))
    assert core.store.get_job(job.job_id).state is JobState.RUNNING  # node 2 still runs
    core.on_status(status(f"{job.job_id}.0.2", "TASK_FINISHED", "a3"))
    assert core.store.get_job(job.job_id).state is JobState.FINISHED


def test_the_dashboard_snapshot_carries_the_members(core):
    from dlc.web.snapshot import job_summary

    job = grown(core)
    view = job_summary(core.store.get_job(job.job_id), 0.0)
    assert (view["nodes"], view["nodes_max"], view["members"]) == (2, 4, 3)
