"""Multi-tenant policy of the pure core: named scenarios (plain jobs, a fake clock)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.jobs.queue import queue_key
from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources, UserLimits
from dlc.scheduler.tenancy.quotas import check_submit, plan

GPU = Resources(1, 1, 1024)  # what one test GPU job holds besides its GPU (cpus 1, 1 GiB)


def policy(
    guarantees: dict[str, float],
    members: dict[str, list[str]] | None = None,
    ceilings: dict[str, float] | None = None,
    limits: dict[str, UserLimits] | None = None,
    preempt_within: bool = False,
    pool: str = "train",
) -> Policy:
    """Groups g->members (default: a user named like the group), GPU guarantees in one pool."""
    members = members or {g: [g] for g in guarantees}
    groups = {g: Group(g, frozenset(m), pool, preempt_within) for g, m in members.items()}
    quotas = {
        (g, pool): Quota(
            g, pool, Resources(n, 1000, 1 << 30),
            Resources(ceilings[g], 1000, 1 << 30) if ceilings and g in ceilings else None,
        )
        for g, n in guarantees.items()
    }  # fmt: skip
    return Policy(groups, quotas, limits or {}, grace_s=30)


def job(jid: str, user: str, gpus: int = 1, at: float = 0.0, prio: int = 0, **kw) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "priority": prio, **kw})
    return Job(jid, user, spec, submitted_at=at)


def running(j: Job) -> Job:
    return replace(j, state=JobState.RUNNING)


def run_plan(pol, queued, active=(), gpus=16):
    queued = sorted(queued, key=queue_key)
    return plan(queued, active, pol, {"train": Resources(gpus, 1000, 1 << 30)})


def ids(jobs):
    return [j.job_id for j in jobs]


# -- named scenarios: (policy, queued, running, capacity GPUs) -> admitted order, preempted
SCENARIOS = {
    "within guarantee runs": dict(
        pol=policy({"a": 6, "b": 6}),
        queued=[job("a1", "a", 6)],
        active=[],
        runnable=["a1"], preempted=[],
    ),
    "borrowing idle quota": dict(
        pol=policy({"a": 6, "b": 6}),
        queued=[job("a1", "a", 6), job("a2", "a", 4, at=1)],
        active=[],
        runnable=["a1", "a2"], preempted=[],
    ),
    "no borrowing of what the lender waits for": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("a1", "a", 8), job("a2", "a", 4, at=1), job("b1", "b", 8, at=2)],
        active=[],
        runnable=["a1", "b1"], preempted=[],
    ),
    "reclaim from the youngest lowest-priority borrower": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("b1", "b", 4, at=10)],
        active=[running(job("a1", "a", 8, at=1)), running(job("a2", "a", 4, at=2, prio=0)),
                running(job("a3", "a", 4, at=3, prio=0))],
        runnable=["b1"], preempted=["a3"],
    ),
    "reclaim stops the lower priority first": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("b1", "b", 4, at=10)],
        active=[running(job("a1", "a", 8, at=1)), running(job("a2", "a", 4, at=2, prio=-10)),
                running(job("a3", "a", 4, at=3, prio=0))],
        runnable=["b1"], preempted=["a2"],
    ),
    "no reclaim while the victim is already stopping (grace period)": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("b1", "b", 4, at=10)],
        active=[running(job("a1", "a", 8, at=1)), running(job("a2", "a", 4, at=2)),
                replace(job("a3", "a", 4, at=3), state=JobState.PREEMPTED)],
        runnable=["b1"], preempted=[],
    ),
    "guaranteed work is never preempted": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("b1", "b", 4, at=10)],
        active=[running(job("a1", "a", 8, at=1)), running(job("b0", "b", 8, at=1))],
        runnable=[], preempted=[],
    ),
    "priority order within a group": dict(
        pol=policy({"a": 2, "b": 2}),
        queued=[job("lo", "a", 1, at=1, prio=-10), job("hi", "a", 1, at=2, prio=10),
                job("mid", "a", 1, at=0, prio=0)],
        active=[],
        runnable=["hi", "mid", "lo"], preempted=[],
        gpus=3,
    ),
    "preemption within a group for a higher priority": dict(
        pol=policy({"a": 4}, preempt_within=True),
        queued=[job("urgent", "a", 4, at=5, prio=20)],
        active=[running(job("old", "a", 2, at=1)), running(job("young", "a", 2, at=2))],
        runnable=[], preempted=["young", "old"],
        gpus=4,
    ),
    "no more within-group preemption while victims stop": dict(
        pol=policy({"a": 4}, preempt_within=True),
        queued=[job("urgent", "a", 4, at=5, prio=20)],
        active=[running(job("old", "a", 2, at=1)),
                replace(job("young", "a", 2, at=2), state=JobState.PREEMPTED),
                replace(job("mid", "a", 2, at=1.5), state=JobState.PREEMPTED)],
        runnable=[], preempted=[],
        gpus=6,
    ),
    "no preemption within a group unless configured": dict(
        pol=policy({"a": 4}),
        queued=[job("urgent", "a", 4, at=5, prio=20)],
        active=[running(job("old", "a", 2, at=1)), running(job("young", "a", 2, at=2))],
        runnable=[], preempted=[],
        gpus=4,
    ),
    "a big job within its guarantee is not starved by small ones": dict(
        pol=policy({"a": 8, "b": 8}),
        queued=[job("big", "a", 8, at=5)] + [job(f"s{i}", "b", 1, at=i) for i in range(8)],
        active=[running(job(f"r{i}", "b", 1, at=-i)) for i in range(14)],
        runnable=["big"], preempted=["r0", "r1", "r2", "r3", "r4", "r5"],
    ),
    "user limit on running jobs holds only that user": dict(
        pol=policy({"a": 8}, members={"a": ["alice", "bob"]},
                   limits={"alice": UserLimits("alice", max_running=1)}),
        queued=[job("x1", "alice", 1, at=1), job("x2", "alice", 1, at=2),
                job("y1", "bob", 1, at=3)],
        active=[],
        runnable=["x1", "y1"], preempted=[],
    ),
    "user limit on GPUs held": dict(
        pol=policy({"a": 8}, members={"a": ["alice"]},
                   limits={"alice": UserLimits("alice", max_gpus=3)}),
        queued=[job("x1", "alice", 2, at=1), job("x2", "alice", 2, at=2),
                job("x3", "alice", 1, at=3)],
        active=[],
        runnable=["x1", "x3"], preempted=[],
    ),
    "ceiling caps borrowing": dict(
        pol=policy({"a": 2, "b": 2}, ceilings={"a": 4}),
        queued=[job("a1", "a", 2, at=1), job("a2", "a", 2, at=2), job("a3", "a", 2, at=3)],
        active=[],
        runnable=["a1", "a2"], preempted=[],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name):
    case = SCENARIOS[name]
    out = run_plan(case["pol"], case["queued"], case["active"], case.get("gpus", 16))
    assert ids(out.runnable) == case["runnable"]
    assert [p.job_id for p in out.preemptions] == case["preempted"]
    assert len(out.rows) == len(case["queued"])
    for row in out.rows:
        assert row.admitted == (row.job.job_id not in out.held)
        assert row.admitted or row.reason


def test_fairness_between_two_groups_with_equal_demand():
    """Nothing guaranteed, equal demand: the GPUs are split evenly, alternating."""
    pol = policy({"a": 0, "b": 0})
    queued = [job(f"a{i}", "a", 1, at=i) for i in range(10)]
    queued += [job(f"b{i}", "b", 1, at=100 + i) for i in range(10)]
    out = run_plan(pol, queued, gpus=8)
    admitted = ids(out.runnable)
    assert sum(j.startswith("a") for j in admitted) == 4
    assert sum(j.startswith("b") for j in admitted) == 4
    assert admitted[:4] == ["a0", "b0", "a1", "b1"]


def test_fair_share_favours_the_group_borrowing_less():
    pol = policy({"a": 2, "b": 2})
    active = [running(job(f"ra{i}", "a", 1, at=-i)) for i in range(6)]
    queued = [job("a9", "a", 1, at=1), job("b9", "b", 3, at=50)]
    out = run_plan(pol, queued, active, gpus=16)
    assert ids(out.runnable)[0] == "b9"


def test_reasons_name_group_position_and_quota():
    pol = policy({"a": 6, "b": 10})
    active = [running(job(f"r{i}", "a", 1, at=-i)) for i in range(6)]
    queued = [job("q1", "a", 1, at=1), job("q2", "a", 1, at=2), job("b1", "b", 10, at=3)]
    out = run_plan(pol, queued, active, gpus=16)
    assert out.held["q2"].startswith("position 2 in a; a at its quota in pool train, 6 of 6 GPUs")
    assert "borrowing needs 1 idle, 0 are" in out.held["q2"]


def test_user_limit_reason():
    pol = policy({"a": 8}, members={"a": ["alice"]},
                 limits={"alice": UserLimits("alice", max_running=1)})  # fmt: skip
    out = run_plan(pol, [job("x", "alice")], [running(job("r", "alice"))])
    assert "user alice at their limit: 1 of 1 jobs running" in out.held["x"]


def test_empty_policy_changes_nothing():
    queued = sorted([job("a", "u", 1, at=2), job("b", "v", 4, at=1)], key=queue_key)
    out = plan(queued, [], Policy(), {})
    assert ids(out.runnable) == ["b", "a"] and not out.held and not out.preemptions


def test_fractional_gpus_count_as_their_fraction():
    pol = policy({"a": 1.5})
    spec_half = replace(JobSpec.from_dict({"image": "busybox"}), gpus=1)
    half = Job("h", "a", spec_half)
    out = plan([half], [], pol, {"train": Resources(0.5, 10, 1 << 20)})
    assert ids(out.runnable) == ["h"]  # within the 1.5 guarantee; the pool decides placement
    assert Resources(0.5, 0, 0).fits(Resources(0.5, 0, 0))


IMPOSSIBLE = {
    "unknown pool": ({"pool": "gpu-xl"}, "pool", "no agent is in pool 'gpu-xl'"),
    "above the ceiling": ({"gpus": 6}, "gpus", "a's ceiling in pool train is 4"),
    "more than the pool": ({"gpus": 20, "pool": "dev"}, "gpus", "pool dev has 4 in all"),
    "above the user's GPU limit": ({"gpus": 3}, "gpus", "may hold at most 2"),
}


@pytest.mark.parametrize("name", IMPOSSIBLE)
def test_impossible_jobs_are_refused(name):
    body, field, text = IMPOSSIBLE[name]
    pol = policy({"a": 2}, ceilings={"a": 4})
    if name == "above the user's GPU limit":
        pol = replace(pol, limits={"a": UserLimits("a", max_gpus=2)})
    spec = JobSpec.from_dict({"image": "busybox", **body})
    capacity = {"train": Resources(16, 100, 1 << 20), "dev": Resources(4, 100, 1 << 20)}
    with pytest.raises(JobSpecError, match=text) as err:
        check_submit(pol, "a", spec, capacity)
    assert err.value.field == field


def test_priority_class_sets_the_number_and_bad_names_are_refused():
    assert JobSpec.from_dict({"image": "x", "priority_class": "high"}).priority == 10
    assert JobSpec.from_dict({"image": "x", "priority_class": "high", "priority": 3}).priority == 3
    with pytest.raises(JobSpecError, match="unknown class 'vip'; use one of low"):
        JobSpec.from_dict({"image": "x", "priority_class": "vip"})
    with pytest.raises(JobSpecError, match="not a valid pool name"):
        JobSpec.from_dict({"image": "x", "pool": "Bad Pool"})
    # `$` also matches before a final newline: a group "team-a\n" (the admin's calls check
    # names with this rule alone; a spec's fields also refuse control characters)
    from dlc.scheduler.jobs.spec_fields import check_name

    with pytest.raises(JobSpecError, match="not a valid group name"):
        check_name("group", "team-a\n")
