"""The snapshot's fields for the compact cluster view: NVLink groups, pool, sharing backend,
shares by job, the queue in the core's run order, and the slots for measured use."""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec
from dlc.web.dashboard import Dashboard
from tests.scheduler.placement.test_share_placement import ranged_offer
from tests.web.test_snapshot import cluster, status  # noqa: F401  (fixture)


def test_agent_rows_carry_groups_pool_and_empty_use_slots(cluster):  # noqa: F811
    dash, ids = cluster
    [agent] = dash.snapshot("root", True)["agents"]
    assert agent["nvlink"] == [[0, 1], [2, 3]]
    assert (agent["pool"], agent["sharing"], agent["shared"]) == ("default", None, 0)
    assert [g["state"] for g in agent["gpus"]].count("taken") == 3
    assert all(g["used"] is None and g["shares"] == [] for g in agent["gpus"])
    jobs = dash.snapshot("root", True)["jobs"]
    assert all(j["usage"] is None for j in jobs)


def test_queue_follows_the_run_order_with_global_positions(cluster):  # noqa: F811
    dash, ids = cluster
    core = dash.core
    low = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 4}), max_priority=9)
    high = core.submit(
        "bob", JobSpec.from_dict({"image": "img", "gpus": 4, "priority": 7}), max_priority=9
    )
    two = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 2}), max_priority=9)
    queued = [j for j in dash.snapshot("root", True)["jobs"] if j["state"] == "queued"]
    planned = [row.job.job_id for row in core.plan_queue(core.queued_jobs()).rows]
    assert [j["id"] for j in queued] == planned  # the core's order, not the submit order
    assert planned[0] == high.job_id and planned != [
        ids["carol"],
        low.job_id,
        high.job_id,
        two.job_id,
    ]
    assert [j["position"] for j in queued] == [1, 2, 3, 4]
    assert queued[0]["priority"] == 7
    mine = [(j["id"], j["position"]) for j in dash.snapshot("alice", False)["jobs"]
            if j["state"] == "queued"]  # fmt: skip
    assert mine == [(i, planned.index(i) + 1) for i in planned if i in (low.job_id, two.job_id)]


def test_shares_are_listed_by_job_and_hidden_from_other_users(monitored, clock):
    core, metrics = monitored
    spec = {"image": "img", "cpus": 0.1, "mem_mib": 64}
    a = core.submit("alice", JobSpec.from_dict({**spec, "gpu_memory": "4G"})).job_id
    b = core.submit("bob", JobSpec.from_dict({**spec, "gpus": 0.25})).job_id
    for _, infos in core.on_offers([ranged_offer("o1", "a1", gpus=8, sharing="none")]).accepts:
        for info in infos:
            core.on_status(status(info["task_id"]["value"], "TASK_RUNNING"))
    dash = Dashboard(core, metrics, lambda: {"version": "x"}, clock=clock)
    [agent] = dash.snapshot("alice", False)["agents"]
    shared = [g for g in agent["gpus"] if g["shares"]]
    assert len(shared) == 1 and agent["shared"] == 1 and agent["sharing"] == "none"
    seen = {(s["job"], s["user"], s["mine"], s["memory_mib"], s["core_milli"])
            for s in shared[0]["shares"]}  # fmt: skip
    assert seen == {(a, "alice", True, 4096, 0), (None, None, False, 8192, 250)}
    [job] = [j for j in dash.snapshot("root", True)["jobs"] if j["id"] == b]
    assert job["share"] == "0.25" and job["tasks"][0]["share"].startswith("0.25 of GPU")
