"""An offer round's writes: one transaction, and reasons kept while shapes are carried
(issue 26)."""

from __future__ import annotations

import pytest

from dlc.errors import StoreError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer


def _slave(agent: str) -> dict:
    return {"id": agent, "hostname": agent, "active": True,
            "resources": {"cpus": 64.0, "mem": 65536.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"}}  # fmt: skip


def _core(tmp_path, cpus: list[float]) -> tuple[SchedulerCore, JobStore]:
    store = JobStore(tmp_path / "db")
    for n, c in enumerate(cpus):
        spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, "cpus": c})
        store.add_job(Job(f"j{n}", "ann", spec, JobState.QUEUED, float(n)))
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")))
    core.update_agents([_slave("a1"), _slave("a2")])
    return core, store


def test_a_round_that_cannot_finish_writing_leaves_nothing_half_done(tmp_path, monkeypatch):
    core, store = _core(tmp_path, [1.0, 1.0])
    real = store.save_jobs

    def second_fails(jobs):
        assert len(jobs) == 2  # the round's launches, in one write
        real(jobs[:1])  # the first launch's STAGING is written, then the disk fills
        raise StoreError("the disk is full")

    monkeypatch.setattr(store, "save_jobs", second_fails)
    with pytest.raises(StoreError):
        core.on_offers([offer("o1", "a1"), offer("o2", "a2")])
    # the first launch's STAGING write went with the round: store and memory still agree
    assert [store.get_job(j).state for j in ("j0", "j1")] == [JobState.QUEUED] * 2
    assert sorted(j.job_id for j in core.queued_jobs()) == ["j0", "j1"]
    monkeypatch.setattr(store, "save_jobs", real)
    actions = core.on_offers([offer("o3", "a1"), offer("o4", "a2")])
    assert sum(len(infos) for _, infos in actions.accepts) == 2
    assert [store.get_job(j).state for j in ("j0", "j1")] == [JobState.STAGING] * 2


def test_a_carried_failure_keeps_its_reason_visible(tmp_path):
    core, store = _core(tmp_path, [32.0])
    core.on_offers([offer("o1", "a1", cpus=4), offer("o2", "a2", cpus=4)])
    first = core.visible_job("j0", "ann").message
    assert first.startswith("waiting: no offer with 1 GPUs has 32 cpus")
    core.on_offers([offer("o3", "a1", cpus=4), offer("o4", "a2", cpus=4)])  # carried
    assert core.visible_job("j0", "ann").message == first
    assert store.get_job("j0").message == first
    actions = core.on_offers([offer("o5", "a1", cpus=4), offer("o6", "a2", cpus=40)])
    assert [info["agent_id"]["value"] for _, infos in actions.accepts for info in infos] == ["a2"]
