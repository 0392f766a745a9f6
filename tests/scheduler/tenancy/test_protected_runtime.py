"""Protected runtime (issue 28): per priority class, a minimum runtime before a job may be
preempted and a delay between the decision and the eviction; the reason names both.
Through SchedulerCore with offers and status updates, a fake clock and a real SQLite store."""

from __future__ import annotations

import pytest

from dlc.errors import TenancyError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import Resources
from dlc.scheduler.tenancy.preemption import (
    Protection,
    ProtectionRules,
    VictimChooser,
    class_of,
    parse_protection,
)
from dlc.store.sqlite import JobStore

from .test_fair_share import Clock
from .test_quotas import job
from .test_quotas_core import slave, status, train_offer, two_groups

RULES = ProtectionRules({"normal": Protection(min_runtime_s=600, evict_delay_s=30)})


def make_core(path, clock, rules=RULES):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000,
                        protection=rules)  # fmt: skip
    store = JobStore(path, clock=clock)  # history times (restarts) on the same clock
    core = SchedulerCore(store, config, lambda s: (s.image, None), clock=clock)
    core.update_agents([slave("a1", "train")])
    core.set_tenancy(two_groups(guarantee=4))
    return core


def submit(core, user, gpus, **kw):
    return core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": gpus, **kw}))


def start(core, oid, gpus):
    actions = core.on_offers([train_offer(oid, gpus)])
    for _, infos in actions.accepts:
        for info in infos:
            core.on_status(status(info["task_id"]["value"], "TASK_RUNNING"))
    return [i["task_id"]["value"] for _, infos in actions.accepts for i in infos]


@pytest.fixture
def borrowed(tmp_path):
    """Group a runs a1 (4, its guarantee, 21 min) and two borrowed 2-GPU jobs: old (started
    20 min ago, past its 10 min protection) and young (started 2 min ago, protected)."""
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    a1 = submit(core, "a", 4)
    assert start(core, "o1", [0, 1, 2, 3]) == [f"{a1.job_id}.0.0"]
    clock.now += 60
    old = submit(core, "a", 2)
    assert start(core, "o2", [4, 5]) == [f"{old.job_id}.0.0"]
    clock.now += 18 * 60
    young = submit(core, "a", 2)
    assert start(core, "o3", [6, 7]) == [f"{young.job_id}.0.0"]
    clock.now += 2 * 60
    return core, clock, a1, old, young


def test_a_protected_job_is_not_chosen_while_an_unprotected_one_exists(borrowed):
    core, clock, _, old, young = borrowed
    submit(core, "b", 2)  # b reclaims 2 of its 4
    assert core.pending_kills().kills == []  # the decision: no kill yet (30 s delay)
    assert core.visible_job(young.job_id, "a").state is JobState.RUNNING  # youngest, protected
    victim = core.visible_job(old.job_id, "a")
    assert victim.state is JobState.PREEMPTED
    assert victim.message == (
        "preempted: b reclaims its guarantee in pool train for job "
        f"{victim.message.split('for job ')[1].split(' ')[0]} after 20 min (protected for "
        "10 min, to be evicted 30 s after the decision)"
    )


def test_the_victim_is_not_evicted_before_the_delay_and_the_reason_names_both(borrowed):
    core, clock, _, old, _ = borrowed
    b1 = submit(core, "b", 2)
    assert core.pending_kills().kills == []
    clock.now += 29
    assert core.pending_kills().kills == []  # nothing before the delay
    assert core.on_offers([]).kills == []
    # a status update within the delay keeps the job preempted (not running again)
    core.on_status(status(f"{old.job_id}.0.0", "TASK_RUNNING"))
    assert core.visible_job(old.job_id, "a").state is JobState.PREEMPTED
    clock.now += 1
    assert core.pending_kills().kills == [(f"{old.job_id}.0.0", "a1")]
    evicted = core.visible_job(old.job_id, "a")
    assert evicted.message == (
        f"preempted: b reclaims its guarantee in pool train for job {b1.job_id} after 20 min "
        "(protected for 10 min, evicted 30 s after the decision)"
    )
    core.on_status(status(f"{old.job_id}.0.0", "TASK_KILLED"))
    requeued = core.visible_job(old.job_id, "a")
    assert requeued.state is JobState.QUEUED
    assert requeued.message.endswith(
        "evicted 30 s after the decision); queued again (no retry used)"
    )


def test_when_every_borrower_is_protected_nothing_is_stopped_until_protection_ends(tmp_path):
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    jobs = [submit(core, "a", 4), submit(core, "a", 4)]  # the second borrows b's 4
    start(core, "o1", list(range(8)))
    clock.now += 60
    b1 = submit(core, "b", 4)
    assert core.pending_kills().kills == []
    states = lambda: [core.visible_job(j.job_id, "a").state for j in jobs]  # noqa: E731
    assert states() == [JobState.RUNNING, JobState.RUNNING]
    core.on_offers([])
    assert core.queue_reason(b1.job_id).endswith(
        "b is within its quota in pool train; waiting for running jobs to end "
        "(borrowed jobs are in their protected runtime)"
    )
    clock.now += 9 * 60  # 10 min of runtime: no longer protected
    core.pending_kills()
    assert sorted(s.value for s in states()) == ["preempted", "running"]


def test_a_victim_that_ends_on_its_own_within_the_delay_ends_as_it_ended(borrowed):
    core, clock, _, old, _ = borrowed
    submit(core, "b", 2)
    core.pending_kills()
    core.on_status(status(f"{old.job_id}.0.0", "TASK_FINISHED"))
    assert core.visible_job(old.job_id, "a").state is JobState.FINISHED
    clock.now += 60
    assert core.pending_kills().kills == []


def test_a_pending_eviction_survives_a_restart(borrowed, tmp_path):
    core, clock, _, old, _ = borrowed
    b1 = submit(core, "b", 2)
    core.pending_kills()
    core.store.close()
    clock.now += 10
    again = make_core(tmp_path / "db", clock)
    assert again.pending_kills().kills == []  # 20 s of the delay still to run
    clock.now += 20
    assert again.pending_kills().kills == [(f"{old.job_id}.0.0", "a1")]
    assert again.visible_job(old.job_id, "a").message.endswith(
        f"for job {b1.job_id} after 20 min (protected for 10 min, evicted 30 s after the decision)"
    )


def test_without_protection_the_youngest_goes_at_once(borrowed, tmp_path):
    core, clock, _, _, young = borrowed
    core.config = type(core.config)(**{**core.config.__dict__, "protection": ProtectionRules()})
    submit(core, "b", 2)
    assert core.pending_kills().kills == [(f"{young.job_id}.0.0", "a1")]
    assert "protected" not in core.visible_job(young.job_id, "a").message


def test_protection_flags_parse_and_classes_follow_priorities():
    rules = parse_protection(["normal=10m:30s", "low=1h"])
    assert rules.by_class == {"normal": Protection(600, 30), "low": Protection(3600, 0)}
    assert class_of(job("j", "u", prio=0)) == "normal"
    assert class_of(job("j", "u", prio=15)) == "high"
    assert class_of(job("j", "u", prio=-50)) == "low"
    assert class_of(job("j", "u", priority_class="urgent")) == "urgent"
    with pytest.raises(TenancyError, match="protect: 'normal': write CLASS=MIN_RUNTIME"):
        parse_protection(["normal"])


def test_a_round_with_nothing_queued_still_evicts_a_victim_whose_delay_is_over(borrowed):
    # the idle round (nothing queued parses no offers) keeps this part of every round
    core, clock, _, old, _ = borrowed
    b1 = submit(core, "b", 2)
    assert core.pending_kills().kills == []  # the decision: evicted after 30 s
    assert core.visible_job(old.job_id, "a").state is JobState.PREEMPTED
    core.kill(b1.job_id, "b")
    assert core.queued_jobs() == []
    clock.now += 30
    assert core.on_offers([train_offer("o9", [])]).kills == [(f"{old.job_id}.0.0", "a1")]


def test_the_victim_chooser_says_who_and_why_and_skips_the_protected():
    """The planner's need in, the victims out as typed decisions: a job inside its protected
    runtime is left out (and the choice says so), the one chosen carries its reason with its
    runtime and eviction delay named."""
    old, young = job("old", "a", 2, at=0.0), job("young", "a", 2, at=1.0)
    started = {"old": 0.0, "young": 900.0}  # at now=1000: ran 1000 s and 100 s
    chooser = VictimChooser(demand_of=lambda j: Resources(j.spec.gpus, 0, 0),
                            started_of=lambda j: started[j.job_id], now=1000.0,
                            protection=RULES)  # fmt: skip
    choice = chooser.choose([old, young], Resources(2, 0, 0), lambda v: f"preempted: {v.job_id}")
    assert [v.job_id for v in choice.victims] == ["old"] and choice.shielded
    (decision,) = choice.preemptions
    assert decision.job_id == "old" and decision.delay_s == 30
    assert decision.reason == (
        "preempted: old after 17 min (protected for 10 min, evicted 30 s after the decision)"
    )
    none = chooser.choose([young], Resources(2, 0, 0), lambda v: "x")
    assert none.victims == () and none.preemptions == () and none.shielded
