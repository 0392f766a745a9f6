"""A job's group is resolved once per round (issue 26): the planner, the usage, the victims
and the fair-share holdings read one map instead of asking the policy again and again."""

from __future__ import annotations

import pytest

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.job_groups import JobGroups
from dlc.scheduler.tenancy.policy import NO_GROUP, Policy, Resources
from dlc.scheduler.tenancy.quotas import plan
from dlc.scheduler.tenancy.share_charge import GpuSizes
from dlc.store.sqlite import JobStore

from .test_quotas import job, policy, running
from .test_quotas_core import slave, train_offer, two_groups


@pytest.fixture
def asked(monkeypatch) -> list[str]:
    """The users whose group the policy was asked for, in order."""
    calls: list[str] = []
    group_of = Policy.group_of

    def counted(self, user):
        calls.append(user)
        return group_of(self, user)

    monkeypatch.setattr(Policy, "group_of", counted)
    return calls


def test_a_map_resolves_each_job_once_and_keeps_its_policy(asked):
    pol = policy({"a": 4}, members={"a": ["ann"]})
    groups = JobGroups(pol)
    one, other = job("j1", "ann", pool="dev"), job("j2", "bob")
    assert [groups.key(one), groups.key(one), groups.key(other)] == [
        ("a", "dev"), ("a", "dev"), (NO_GROUP, "default"),
    ]  # fmt: skip
    assert groups.group(other) == NO_GROUP and groups.resolved() == 2
    assert asked == ["ann", "bob"] and groups.policy is pol


def test_a_plan_with_a_reclaim_asks_for_each_jobs_group_once(asked):
    pol = policy({"a": 4, "b": 4})
    active = [running(job("a1", "a", 4)), running(job("a2", "a", 4, at=1.0))]  # a2 borrows
    queued = [job("b1", "b", 4, at=2.0)]
    out = plan(queued, active, pol, {"train": Resources(8, 1000, 1 << 30)})
    assert [p.job_id for p in out.preemptions] == ["a2"]  # the usage, queues and victim
    assert sorted(asked) == ["a", "a", "b"]  # ... each job once


def test_memory_shares_are_charged_in_the_pool_the_round_resolved(asked):
    """A share's charge depends on its pool's smallest GPU: the planner reads that pool from
    the round's map, not from the policy again at every look at the job's demand."""
    pol = policy({"a": 1, "b": 1})
    sizes = GpuSizes(by_pool={"train": 16 * 1024})
    share = JobSpec.from_dict({"image": "busybox", "gpu_memory": "16G"})
    active = [running(Job(f"a{i}", "a", share, submitted_at=float(i))) for i in range(2)]
    queued = [Job("b1", "b", share, submitted_at=5.0)]
    out = plan(queued, active, pol, {"train": Resources(2, 1000, 1 << 30)}, gpu_mib=sizes)
    assert [p.job_id for p in out.preemptions] == ["a1"]  # a borrows one 16G GPU: reclaimed
    assert sorted(asked) == ["a", "a", "b"]  # each job's group once, shares charged or not


def test_an_offer_round_resolves_each_job_once(tmp_path, asked):
    config = CoreConfig(placement=PlacementConfig("first-fit"), fair_share_half_life_s=3600)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None))
    core.update_agents([slave("a1", "train")])
    core.set_tenancy(two_groups())
    for user in ("a", "a", "b"):
        core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": 2}))
    asked.clear()
    core.on_offers([train_offer("o1", list(range(8)))])
    jobs = core.all_jobs()
    assert [j.state for j in jobs] == [JobState.STAGING] * 3
    assert len(asked) <= len(jobs)  # queue plan, usage and fair-share holdings together
