"""Fair share over time (issue 28): decayed GPU-hours, borrowing and reclaim order by usage
over weight, kept in the store across a restart. Pure arithmetic on a fake clock, the
planner, and SchedulerCore with offers and status updates on a real SQLite store."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from dlc.errors import TenancyError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.fair_share import (
    FairView,
    GroupShare,
    UsageLedger,
    UsageRow,
    UserShare,
    accrued,
    decay,
    fair_share_report,
    parse_span,
)
from dlc.scheduler.tenancy.policy import Quota, Resources
from dlc.scheduler.tenancy.quotas import Tenure, plan
from dlc.store.sqlite import JobStore

from .test_quotas import ids, job, policy, running
from .test_quotas_core import slave, status, two_groups

DAY = 86400.0
HOUR = 3600.0


# -- the arithmetic -------------------------------------------------------------------


def test_decay_halves_each_half_life_exactly():
    assert decay(80.0, DAY, DAY) == 40.0
    assert decay(80.0, 3 * DAY, DAY) == 10.0
    assert decay(80.0, 5 * DAY, 0) == 80.0  # 0: off, nothing decays


def test_accrual_is_the_integral_of_the_decayed_holding():
    # 4 GPUs for one half-life: 4 * h / ln 2 * (1 - 1/2) GPU-seconds, in hours
    assert accrued(4, DAY, DAY) == pytest.approx(4 * 24 * 0.5 / math.log(2), rel=1e-12)
    # a short hold barely decays: close to GPUs x hours
    assert accrued(2, 60, DAY) == pytest.approx(2 / 60, rel=1e-3)
    assert accrued(2, HOUR, 0) == 2.0  # no decay: plain GPU-hours


def test_ledger_value_does_not_depend_on_how_often_it_is_advanced():
    once = UsageLedger(DAY, now=0.0)
    once.advance(DAY, {("a", "alice"): 8.0})
    stepped = UsageLedger(DAY, now=0.0)
    for step in range(1, 97):  # every 15 minutes
        stepped.advance(step * DAY / 96, {("a", "alice"): 8.0})
    expected = 8 * 24 * 0.5 / math.log(2)
    assert once.value(("a", "alice"), DAY) == pytest.approx(expected, rel=1e-12)
    assert stepped.value(("a", "alice"), DAY) == pytest.approx(expected, rel=1e-12)
    # a day later, idle: exactly half
    assert once.groups(2 * DAY)["a"] == pytest.approx(expected / 2, rel=1e-12)


def test_ledger_starts_from_stored_rows_and_time():
    ledger = UsageLedger(DAY, [UsageRow("a", "alice", 10.0, 100.0)], now=500.0, at=100.0)
    assert ledger.at == 100.0
    ledger.advance(100.0 + DAY, {("a", "alice"): 1.0})
    assert ledger.value(("a", "alice"), 100.0 + DAY) == pytest.approx(
        5.0 + accrued(1.0, DAY, DAY), rel=1e-12
    )
    assert [r.group for r in ledger.take_dirty()] == ["a"]
    assert ledger.take_dirty() == []


@pytest.mark.parametrize("text,seconds", [("7d", 7 * DAY), ("12h", 12 * HOUR), ("90m", 5400.0),
                                          ("30s", 30.0), ("0", 0.0), ("2w", 14 * DAY)])  # fmt: skip
def test_spans_parse(text, seconds):
    assert parse_span(text) == seconds


def test_a_bad_span_is_one_line_naming_the_flag():
    with pytest.raises(TenancyError, match="fair_share_half_life: '7 days' is not a time"):
        parse_span("7 days")


# -- the planner: borrowing and reclaim order ------------------------------------------


def test_the_group_that_used_less_over_time_borrows_first():
    pol = policy({"a": 2, "b": 2})
    queued = [job("a1", "a", 6, at=1), job("b1", "b", 6, at=2)]  # a asked first
    cap = {"train": Resources(8, 1000, 1 << 30)}
    # without fair share: equal borrowed shares, a asked first, a borrows
    assert ids(plan(queued, [], pol, cap).runnable) == ["a1"]
    # a used 8 GPUs all day yesterday, b nothing: b borrows, a waits
    fair = FairView({"a": 69.2 / 2, "b": 0.0}, {})
    out = plan(queued, [], pol, cap, tenure=Tenure(1000.0, fair))
    assert ids(out.runnable) == ["b1"]
    assert "a at its quota in pool train" in out.held["a1"]


def test_guarantees_beyond_the_pool_do_not_turn_the_fair_order_around():
    # every group "guaranteed" all CPUs (1e9 each, as a quota meaning "CPUs are no limit"):
    # a waiting group's claim was all its waiting CPUs, so the group visited first (the
    # fair one) found no room to borrow and the one visited last did (issue 28's week)
    pol = policy({"a": 2, "b": 2})
    pol = replace(pol, quotas={k: replace(q, guaranteed=Resources(2, 1e9, 1 << 40))
                               for k, q in pol.quotas.items()})  # fmt: skip
    queued = [job(f"a{n}", "a", 4, at=n, cpus=8) for n in range(1, 5)]
    queued += [job("b1", "b", 4, at=5, cpus=8), job("b2", "b", 4, at=6, cpus=8)]
    active = [running(job("a0", "a", 2, cpus=4)), running(job("b0", "b", 2, cpus=4))]
    cap = {"train": Resources(8, 32, 1 << 30)}
    fair = FairView({"a": 50.0, "b": 0.0}, {})  # a used much more over time: b borrows
    out = plan(queued, active, pol, cap, tenure=Tenure(1000.0, fair))
    assert ids(out.runnable) == ["b1"], out.held


def test_the_group_that_used_more_over_time_is_reclaimed_first():
    pol = policy({"a": 4, "b": 4, "c": 8})
    # a and b each borrow 4; c (guaranteed 8) comes back and needs 4 of them
    active = [running(job("a1", "a", 8, at=1)), running(job("b1", "b", 8, at=2))]
    queued = [job("c1", "c", 4, at=3)]
    cap = {"train": Resources(16, 1000, 1 << 30)}
    started = {"a1": 100.0, "b1": 50.0}  # a1 the youngest
    # without fair share: the youngest borrower
    assert [p.job_id for p in plan(queued, active, pol, cap, started).preemptions] == ["a1"]
    # b used far more for its weight over the last week: b's job goes
    fair = FairView({"a": 1.0, "b": 30.0}, {})
    out = plan(queued, active, pol, cap, started, tenure=Tenure(200.0, fair))
    assert [p.job_id for p in out.preemptions] == ["b1"]


def test_within_a_group_the_user_who_used_less_goes_first():
    pol = policy({"a": 1}, members={"a": ["alice", "bob"]})
    queued = [job("j1", "alice", 1, at=1), job("j2", "bob", 1, at=2)]
    cap = {"train": Resources(1, 1000, 1 << 30)}
    assert ids(plan(queued, [], pol, cap).runnable) == ["j1"]
    fair = FairView({"a": 5.0}, {("a", "alice"): 5.0, ("a", "bob"): 0.0})
    assert ids(plan(queued, [], pol, cap, tenure=Tenure(10.0, fair)).runnable) == ["j2"]


# -- through the core: yesterday's usage, a restart -------------------------------------


class Clock:
    """A fake clock the test sets (it never moves by itself)."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_core(path, clock, half_life=DAY):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000,
                        fair_share_half_life_s=half_life)  # fmt: skip
    core = SchedulerCore(JobStore(path, clock=clock), config, lambda s: (s.image, None),
                         clock=clock)  # fmt: skip
    core.update_agents([slave("a1", "train")])
    core.set_tenancy(two_groups(guarantee=2))
    return core


def submit(core, user, gpus):
    return core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": gpus}))


def offer_all(core, oid):
    from .test_quotas_core import train_offer

    actions = core.on_offers([train_offer(oid, list(range(8)))])
    return [info["task_id"]["value"] for _, infos in actions.accepts for info in infos]


def run_yesterday(core, clock):
    """Group a holds all 8 GPUs for a day, then its job ends."""
    big = submit(core, "a", 8)
    assert offer_all(core, "o0") == [f"{big.job_id}.0.0"]
    core.on_status(status(f"{big.job_id}.0.0", "TASK_RUNNING"))
    clock.now += DAY
    core.pending_kills()  # the periodic pass: the ledger is written
    core.on_status(status(f"{big.job_id}.0.0", "TASK_FINISHED"))
    return big


@pytest.mark.parametrize("half_life,first", [(DAY, "b"), (0.0, "a")])
def test_a_group_that_used_a_lot_yesterday_borrows_after_one_that_did_not(
    tmp_path, half_life, first
):
    clock = Clock()
    core = make_core(tmp_path / "db", clock, half_life)
    run_yesterday(core, clock)
    clock.now += 3600
    a_job = submit(core, "a", 6)  # a asks first; both borrow 4 beyond their 2
    clock.now += 1
    b_job = submit(core, "b", 6)
    launched = offer_all(core, "o1")
    winner = {"a": a_job, "b": b_job}[first]
    assert launched == [f"{winner.job_id}.0.0"]  # only one fits: 6 + 6 > 8


def test_decayed_usage_survives_a_core_restart_on_the_same_store(tmp_path):
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    run_yesterday(core, clock)
    expected = accrued(8, DAY, DAY)
    shown = {g.group: g for g in core.fair_share().groups}
    assert shown["a"].gpu_hours == pytest.approx(expected, rel=1e-9)
    assert shown["a"].users == (UserShare("a", pytest.approx(expected, rel=1e-9)),)
    assert shown["a"].weight == 2.0  # its guarantee
    assert shown["a"].ratio == pytest.approx(expected / 2, rel=1e-9)
    # a job still running across the restart is counted from where the ledger stopped
    still = submit(core, "b", 2)
    offer_all(core, "o1")
    core.on_status(status(f"{still.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 120
    core.pending_kills()  # written (every 60 s at most)
    core.store.close()
    clock.now += DAY  # the scheduler was down a day; b's job ran on
    again = make_core(tmp_path / "db", clock)
    shown = {g.group: g for g in again.fair_share().groups}
    assert shown["a"].gpu_hours == pytest.approx(decay(expected, DAY + 120, DAY), rel=1e-9)
    assert shown["b"].gpu_hours == pytest.approx(accrued(2, DAY + 120, DAY), rel=1e-9)
    assert again.visible_job(still.job_id, "b").state is JobState.RUNNING


def test_fair_share_off_shows_nothing(tmp_path):
    core = make_core(tmp_path / "db", Clock(), half_life=0)
    assert core.fair_share() is None


def test_the_report_shows_a_viewer_every_groups_total_but_only_their_own_user_row():
    ledger = UsageLedger(DAY, [UsageRow("a", "u1", 4.0, 0.0), UsageRow("a", "u2", 2.0, 0.0),
                               UsageRow("b", "u3", 1.0, 0.0)])  # fmt: skip
    quotas = [Quota("a", "default", Resources(gpus=3))]
    report = fair_share_report(ledger, quotas, 0.0, viewer="u2")
    assert report.half_life_s == DAY
    assert report.groups == (
        GroupShare("a", 6.0, 3.0, 2.0, (UserShare("u2", 2.0),)),
        GroupShare("b", 1.0, 1.0, 1.0, ()),  # no guarantee weighs one GPU
    )
