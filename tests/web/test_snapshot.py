"""The dashboard snapshot: who sees what, GPU holders, series ring and sampler."""

from __future__ import annotations

import pytest

from dlc.scheduler.jobs.job import JobSpec
from dlc.topology.encoding import encode_topology
from dlc.web.dashboard import Dashboard
from dlc.web.series import Sample, SeriesRing
from tests.scheduler.helpers import offer, pairs_topology


def status(task_id: str, state: str) -> dict:
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": "a1"}}


@pytest.fixture
def cluster(monitored, clock):
    """alice runs a 2-GPU job and bob a 1-GPU job on a 4-GPU agent; carol's job waits."""
    core, metrics = monitored
    ids = {}
    for user, gpus in (("alice", 2), ("bob", 1)):
        ids[user] = core.submit(user, JobSpec.from_dict({"image": "img", "gpus": gpus})).job_id
    attrs = {"dlc_topo": encode_topology(pairs_topology(4, {(0, 1), (2, 3)}))}
    for _, infos in core.on_offers([offer("o1", "a1", gpus=[0, 1, 2, 3], attrs=attrs)]).accepts:
        for info in infos:
            core.on_status(status(info["task_id"]["value"], "TASK_RUNNING"))
    ids["carol"] = core.submit("carol", JobSpec.from_dict({"image": "img", "gpus": 4})).job_id
    clock.now += 30
    return Dashboard(core, metrics, lambda: {"version": "x"}, clock=clock), ids


def holders(snap) -> dict[int, dict | None]:
    [agent] = snap["agents"]
    return {g["index"]: g["holder"] for g in agent["gpus"]}


@pytest.mark.parametrize(
    ("user", "admin", "sees_jobs_of", "details_of"),
    [
        pytest.param("root", True, {"alice", "bob", "carol"}, {"alice", "bob"}, id="admin-all"),
        pytest.param("alice", False, {"alice"}, {"alice"}, id="user-own-only"),
        pytest.param("dave", False, set(), set(), id="user-without-jobs"),
    ],
)
def test_visibility(cluster, user, admin, sees_jobs_of, details_of):
    dash, _ = cluster
    snap = dash.snapshot(user, admin)
    assert {j["user"] for j in snap["jobs"]} == sees_jobs_of
    held = {i: h for i, h in holders(snap).items() if h}
    assert len(held) == 3  # everyone sees that 3 GPUs are taken ...
    shown = {h["user"] for h in held.values() if h["job"]}
    assert shown == details_of  # ... but only whose, and which job, when allowed
    for h in held.values():
        assert (h["job"] is None) == (h["user"] is None)
        if h["user"] is not None:
            assert h["mine"] == (h["user"] == user)
    assert snap["counts"]["running"] == 2 and snap["counts"]["queued"] == 1
    assert snap["gpus"] == {"total": 4, "allocated": 3}
    assert snap["me"] == {"user": user, "admin": admin}


def test_gpu_holders_match_the_placement(cluster):
    dash, ids = cluster
    snap = dash.snapshot("root", True)
    jobs = {j["id"]: j for j in snap["jobs"]}
    for user in ("alice", "bob"):
        [task] = jobs[ids[user]]["tasks"]
        for gpu in task["gpu_ids"]:
            assert holders(snap)[gpu]["job"] == ids[user]
    assert jobs[ids["carol"]]["wait_s"] == pytest.approx(30)
    assert jobs[ids["alice"]]["wait_s"] is None


def test_finished_job_frees_its_gpus_and_moves_to_recent(cluster):
    dash, ids = cluster
    job = dash.core.store.get_job(ids["alice"])
    dash.core.on_status(status(job.tasks[0].task_id, "TASK_FINISHED"))
    snap = dash.snapshot("alice", False)
    assert [j["state"] for j in snap["jobs"]] == ["finished"]
    assert all(h is None or h["user"] is None for h in holders(snap).values())


def test_sample_counts_allocated_waiting_and_longest_wait(cluster):
    dash, _ = cluster
    sample = dash.sampler.sample_now()
    assert (sample.gpus_allocated, sample.gpus_total, sample.jobs_waiting) == (3, 4, 1)
    assert sample.queue_wait_s == pytest.approx(30)
    series = dash.snapshot("x", False)["series"]
    assert series["gpus_allocated"] == [3] and series["jobs_waiting"] == [1]


def test_topology_svg_marks_each_gpu(cluster):
    dash, _ = cluster
    [agent] = dash.metrics.agents()
    svg = dash.topology_svg(agent)
    for gpu in range(4):
        assert f'id="node-gpu{gpu}"' in svg
    assert dash.topology_svg(agent) is svg  # made once per agent layout


@pytest.mark.parametrize("capacity", [1, 3, 10])
def test_series_ring_keeps_the_newest(capacity):
    ring = SeriesRing(capacity)
    for t in range(7):
        ring.add(Sample(float(t), t, 8, 0, 0.0))
    kept = ring.to_dict()
    assert kept["t"] == [float(t) for t in range(7)][-capacity:]
    assert len(ring) == min(capacity, 7)


def test_series_ring_rejects_zero_capacity():
    with pytest.raises(ValueError, match="capacity"):
        SeriesRing(0)
