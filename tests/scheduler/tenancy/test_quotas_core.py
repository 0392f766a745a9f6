"""Quotas through SchedulerCore: offers and status updates as data, a real SQLite store."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources
from dlc.store.sqlite import JobStore

from ..helpers import offer


def slave(agent: str, pool: str, gpus: int = 8) -> dict:
    ids = ", ".join(str(i) for i in range(gpus))
    return {"id": agent, "hostname": f"host-{agent}", "active": True,
            "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": float(gpus),
                          "gpu_ids": "{" + ids + "}"},
            "attributes": {"dlc_pool": pool}}  # fmt: skip


def two_groups(guarantee: float = 4, preempt_within: bool = False) -> Policy:
    groups = {g: Group(g, frozenset({g}), "train", preempt_within) for g in ("a", "b")}
    quotas = {(g, "train"): Quota(g, "train", Resources(guarantee, 32, 131072)) for g in groups}
    return Policy(groups, quotas, {}, grace_s=30)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        self.now += 1
        return self.now


@pytest.fixture
def core(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None),
                         clock=Clock())  # fmt: skip
    core.update_agents([slave("a1", "train"), slave("d1", "dev", 2)])
    core.set_tenancy(two_groups())
    return core


def submit(core, user, gpus, **kw):
    return core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": gpus, **kw}))


def train_offer(oid, gpus):
    return offer(oid, "a1", gpus, cpus=64, mem=262144, attrs={"dlc_pool": "train"})


def status(task_id, state, agent="a1"):
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}}


def test_borrowed_job_is_preempted_requeued_and_the_lender_runs(core):
    a1, a2 = submit(core, "a", 4), submit(core, "a", 4)  # a2 borrows b's idle 4
    actions = core.on_offers([train_offer("o1", list(range(8)))])
    assert sum(len(infos) for _, infos in actions.accepts) == 2
    for job in (a1, a2):
        core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    b1 = submit(core, "b", 4)
    # A full cluster sends no offer: the periodic kill pass plans the reclaim.
    kills = core.pending_kills().kills
    assert kills == [(f"{a2.job_id}.0.0", "a1")]  # the youngest borrower
    victim = core.visible_job(a2.job_id, "a")
    assert victim.state is JobState.PREEMPTED
    assert victim.message.startswith("preempted: b reclaims its guarantee in pool train")
    # Within the grace period nothing more is stopped, and the kill is re-sent.
    assert core.pending_kills().kills == kills
    core.on_status(status(f"{a2.job_id}.0.0", "TASK_KILLED"))
    requeued = core.visible_job(a2.job_id, "a")
    assert requeued.state is JobState.QUEUED
    assert (requeued.failures, requeued.attempt) == (0, 1)
    assert requeued.message.endswith("queued again (no retry used)")
    actions = core.on_offers([train_offer("o2", [4, 5, 6, 7])])
    launched = [info["task_id"]["value"] for _, infos in actions.accepts for info in infos]
    assert launched == [f"{b1.job_id}.0.0"]  # the lender first; a2 waits with a reason
    assert "a at its quota in pool train, 4 of 4 GPUs" in core.queue_reason(a2.job_id)
    # When b finishes, a2 runs again (attempt 1): nothing lost, nothing launched twice.
    core.on_status(status(f"{b1.job_id}.0.0", "TASK_RUNNING"))
    core.on_status(status(f"{b1.job_id}.0.0", "TASK_FINISHED"))
    actions = core.on_offers([train_offer("o3", [4, 5, 6, 7])])
    launched = [info["task_id"]["value"] for _, infos in actions.accepts for info in infos]
    assert launched == [f"{a2.job_id}.1.0"]


def test_jobs_run_only_in_their_pool(core):
    dev = submit(core, "a", 1, pool="dev")
    actions = core.on_offers([train_offer("o1", list(range(8)))])
    assert actions.accepts == []
    assert "o1" in actions.declines
    actions = core.on_offers([offer("o2", "d1", [0, 1], attrs={"dlc_pool": "dev"})])
    assert [i["task_id"]["value"] for _, infos in actions.accepts for i in infos] == [
        f"{dev.job_id}.0.0"
    ]


def test_unknown_pool_is_refused_at_submit(core):
    with pytest.raises(JobSpecError, match="no agent is in pool 'big'"):
        submit(core, "a", 1, pool="big")


def test_kill_of_a_preempted_job_ends_it_killed(core):
    a1, a2 = submit(core, "a", 4), submit(core, "a", 4)
    core.on_offers([train_offer("o1", list(range(8)))])
    for job in (a1, a2):
        core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    submit(core, "b", 4)
    core.pending_kills()
    core.kill(a2.job_id, "a")
    core.on_status(status(f"{a2.job_id}.0.0", "TASK_KILLED"))
    assert core.visible_job(a2.job_id, "a").state is JobState.KILLED
