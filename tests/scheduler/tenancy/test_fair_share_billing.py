"""Fair share bills a job the largest of its GPUs, CPUs and memory in GPUs (Slurm's MAX_TRES
billing): a CPU-only borrower's usage grows, a GPU job with the cluster's CPUs per GPU is
billed its GPUs exactly, and the billed value survives a restart. The arithmetic, then
SchedulerCore with offers and status updates on a real SQLite store and a fake clock."""

from __future__ import annotations

import pytest

from dlc.errors import TenancyError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.billing import (
    DEFAULT_CPUS_PER_GPU,
    BillingRates,
    BillingWeights,
    parse_billing,
    rates,
)
from dlc.scheduler.tenancy.fair_share import accrued, decay
from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources
from dlc.store.sqlite import JobStore

from .test_fair_share import Clock, offer_all
from .test_quotas_core import slave, status, two_groups

DAY = 86400.0
#: 4 agents of 8 GPUs, 64 CPUs and 256 GiB: 8 CPUs and 32 GiB per GPU
CLUSTER = Resources(32, 256, 4 * 262144)


# -- the arithmetic -------------------------------------------------------------------


def test_a_gpu_job_with_the_clusters_cpus_and_memory_per_gpu_is_billed_its_gpus_exactly():
    bill = rates(BillingWeights(), CLUSTER)
    assert bill is not None
    assert bill.billed(Resources(1, 8, 32768)) == 1.0
    assert bill.billed(Resources(3, 24, 98304)) == 3.0
    assert bill.billed(Resources(0.5, 1, 1024)) == 0.5  # a share: its part of a GPU
    # 8 GPUs of a 12-CPU-per-GPU cluster: a float step more would not be "exactly"
    odd = rates(BillingWeights(), Resources(3, 36, 3 * 1024))
    assert odd is not None and odd.billed(Resources(1, 12, 1024)) == 1.0


def test_a_cpu_only_or_cpu_heavy_job_is_billed_its_dominant_share_in_gpus():
    bill = rates(BillingWeights(), CLUSTER)
    assert bill is not None
    assert bill.billed(Resources(0, 63.8, 1024)) == pytest.approx(63.8 / 8)
    assert bill.billed(Resources(1, 64, 1024)) == pytest.approx(8.0)  # 64 CPUs for one GPU
    assert bill.billed(Resources(0, 1, 262144)) == pytest.approx(8.0)  # 256 GiB: memory wins


def test_operator_weights_replace_the_clusters_ratios():
    weights = parse_billing("cpus=16, mem=64G")
    assert weights == BillingWeights(16.0, 65536.0)
    bill = rates(weights, CLUSTER)
    assert bill is not None
    assert bill.billed(Resources(0, 64, 1024)) == pytest.approx(4.0)
    assert bill.billed(Resources(0, 1, 262144)) == pytest.approx(4.0)
    assert (bill.cpus_per_gpu(), bill.mem_mib_per_gpu()) == (16.0, 65536.0)
    off = rates(parse_billing("cpus=0,mem=0"), CLUSTER)
    assert off is not None and off.billed(Resources(2, 256, 1 << 20)) == 2.0  # GPUs only
    assert parse_billing("auto") == parse_billing("cpus=auto") == BillingWeights()


@pytest.mark.parametrize("text,message", [
    ("cpus", "fair_share_billing: 'cpus' is not cpus=N or mem=SIZE"),
    ("gpus=1", "fair_share_billing: 'gpus=1' is not cpus=N or mem=SIZE"),
    ("cpus=8,cpus=4", "fair_share_billing: 'cpus=4' is not cpus=N or mem=SIZE"),
    ("cpus=eight", "fair_share_billing: cpus=eight is not a number of CPUs"),
    ("cpus=-1", "fair_share_billing: cpus=-1 is out of range"),
    ("cpus=nan", "fair_share_billing: cpus=nan is out of range"),
    ("mem=lots", "fair_share_billing: 'LOTS' is not a size"),
])  # fmt: skip
def test_a_bad_billing_setting_is_one_line_naming_the_flag(text, message):
    with pytest.raises(TenancyError, match=message) as err:
        parse_billing(text)
    assert "\n" not in str(err.value)


def test_a_cluster_without_gpus_bills_gpu_hours_at_the_default_ratio_and_nothing_known_nothing():
    bill = rates(BillingWeights(), Resources(0, 128, 512 * 1024))
    # one unit always: 8 CPUs (and their 32 GiB: the cluster's 4 GiB per CPU) bill one GPU
    assert bill == BillingRates(1 / DEFAULT_CPUS_PER_GPU, 1 / (8 * 4096), cpus_default=True)
    assert DEFAULT_CPUS_PER_GPU == 8
    assert bill.billed(Resources(0, 4, 1024)) == 0.5
    assert bill.billed(Resources(0, 1, 64 * 1024)) == pytest.approx(2.0)  # 4 GiB per CPU
    assert rates(BillingWeights(4.0), Resources(0, 128, 0)) == BillingRates(0.25, 0.0)  # cpus=4
    assert rates(BillingWeights(), Resources()) is None  # no agent yet: wait
    assert rates(BillingWeights(), Resources(8, 0, 0)) is None  # a task's GPUs only
    assert rates(BillingWeights(8.0, 0.0), Resources()) == BillingRates(0.125, 0.0)


# -- through the core ---------------------------------------------------------------------


def make_core(path, clock, agents=True):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000,
                        fair_share_half_life_s=DAY)  # fmt: skip
    core = SchedulerCore(JobStore(path, clock=clock), config, lambda s: (s.image, None),
                         clock=clock)  # fmt: skip
    if agents:
        core.update_agents([slave("a1", "train")])  # 8 GPUs, 64 CPUs, 256 GiB
    core.set_tenancy(two_groups(guarantee=2))  # each: 2 GPUs, 32 CPUs, 128 GiB
    return core


def submit(core, user, gpus, cpus, mem_mib=1024):
    spec = {"image": "busybox", "gpus": gpus, "cpus": cpus, "mem_mib": mem_mib}
    return core.submit(user, JobSpec.from_dict(spec))


def run_for(core, clock, job, seconds, oid):
    assert offer_all(core, oid) == [f"{job.job_id}.0.0"]
    core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += seconds
    core.pending_kills()  # the periodic pass: the ledger is written
    core.on_status(status(f"{job.job_id}.0.0", "TASK_FINISHED"))


def test_a_cpu_only_borrower_is_billed_and_borrows_after_a_gpu_borrower_that_used_less(tmp_path):
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    # a borrows b's idle CPUs all day with a CPU-only job: 60 of the agent's 64 CPUs
    run_for(core, clock, submit(core, "a", 0, 60), DAY, "o0")
    # then b holds 1 GPU with its fair 8 CPUs and 32 GiB all day
    run_for(core, clock, submit(core, "b", 1, 8, 32768), DAY, "o1")
    shown = {g.group: g for g in core.fair_share().groups}
    cpu_only = decay(accrued(60 / 8, DAY, DAY), DAY, DAY)
    assert shown["a"].gpu_hours == pytest.approx(cpu_only, rel=1e-9)
    assert shown["b"].gpu_hours == pytest.approx(accrued(1, DAY, DAY), rel=1e-9)  # its GPU
    assert shown["a"].ratio > shown["b"].ratio
    assert core.fair_share().billing == BillingRates(8 / 64, 8 / 262144)
    clock.now += 3600
    a_job = submit(core, "a", 6, 8)  # a asks first; both borrow 4 GPUs beyond their 2
    clock.now += 1
    b_job = submit(core, "b", 6, 8)
    assert offer_all(core, "o2") == [f"{b_job.job_id}.0.0"]  # only one fits: 6 + 6 > 8
    assert "a at its quota in pool train" in core.visible_job(a_job.job_id, "a").message


def test_the_billed_value_survives_a_restart_and_the_gap_is_billed_once_agents_are_known(
    tmp_path,
):
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    cpu_job = submit(core, "a", 0, 60)
    assert offer_all(core, "o0") == [f"{cpu_job.job_id}.0.0"]
    core.on_status(status(f"{cpu_job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 120
    core.pending_kills()  # written (every 60 s at most)
    stored = accrued(7.5, 120, DAY)
    assert {g.group: g.gpu_hours for g in core.fair_share().groups} == {
        "a": pytest.approx(stored, rel=1e-9)
    }
    core.store.close()
    clock.now += DAY  # the scheduler was down a day; the CPU-only job ran on
    again = make_core(tmp_path / "db", clock, agents=False)
    # no agent known yet: the stored billed value, decayed; the gap is not counted yet ...
    shown = {g.group: g.gpu_hours for g in again.fair_share().groups}
    assert shown == {"a": pytest.approx(decay(stored, DAY, DAY), rel=1e-9)}
    assert again.fair_share().billing is None
    # ... and once the master's agents are known it is, at the billed rate
    again.update_agents([slave("a1", "train")])
    shown = {g.group: g.gpu_hours for g in again.fair_share().groups}
    assert shown == {"a": pytest.approx(accrued(7.5, DAY + 120, DAY), rel=1e-9)}
    assert again.visible_job(cpu_job.job_id, "a").state is JobState.RUNNING


def test_a_cluster_with_no_gpu_bills_gpu_hours_at_the_default_ratio_through_the_core(tmp_path):
    """One GPU-less 64-CPU agent: a 60-CPU job bills 60 / 8 GPU-hours an hour into the same
    ledger as on a GPU cluster (it billed 60 CPU-hours, a unit the views called GPU-hours)."""
    from .test_quotas_core import train_offer

    clock = Clock()
    core = make_core(tmp_path / "db", clock, agents=False)
    core.update_agents([slave("a1", "train", gpus=0)])
    job = submit(core, "a", 0, 60)
    actions = core.on_offers([train_offer("o0", [])])
    assert [i["task_id"]["value"] for _, infos in actions.accepts for i in infos] == [
        f"{job.job_id}.0.0"
    ]
    core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += DAY
    fair = core.fair_share()
    assert fair.billing == BillingRates(1 / 8, 1 / (8 * 4096), cpus_default=True)
    (group,) = fair.groups
    assert group.gpu_hours == pytest.approx(accrued(60 / 8, DAY, DAY), rel=1e-9)


def three_groups() -> Policy:
    """a: CPUs only; b: 1 GPU; c: 2 GPUs and most CPUs (one 8-GPU 64-CPU agent in train)."""
    guarantees = {"a": Resources(0, 8, 65536), "b": Resources(1, 8, 65536),
                  "c": Resources(2, 40, 65536)}  # fmt: skip
    groups = {g: Group(g, frozenset({g}), "train") for g in guarantees}
    quotas = {(g, "train"): Quota(g, "train", r) for g, r in guarantees.items()}
    return Policy(groups, quotas, {}, grace_s=30)


def test_the_cpu_only_borrower_that_was_billed_more_is_reclaimed_first(tmp_path):
    clock = Clock()
    core = make_core(tmp_path / "db", clock)
    core.set_tenancy(three_groups())
    run_for(core, clock, submit(core, "a", 0, 40), DAY, "o0")  # a: 5 GPUs' worth of CPUs
    run_for(core, clock, submit(core, "b", 1, 8), DAY, "o1")  # b: 1 GPU, within its guarantee
    # now both borrow CPUs: a 20 beyond its 8, b 2 GPUs and 16 CPUs beyond its 1 and 8
    a_job, b_job = submit(core, "a", 0, 20), submit(core, "b", 2, 16)
    assert sorted(offer_all(core, "o2")) == sorted([f"{a_job.job_id}.0.0", f"{b_job.job_id}.0.0"])
    core.on_status(status(f"{a_job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 60  # b's job is the younger: youngest first alone would stop it
    core.on_status(status(f"{b_job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 60
    ratio = {g.group: g.ratio for g in core.fair_share().groups}
    assert ratio["a"] > ratio["b"] > 0
    submit(core, "c", 1, 40)  # within c's guarantee; 12 CPUs short, either victim frees them
    assert core.pending_kills().kills == [(f"{a_job.job_id}.0.0", "a1")]
    victim = core.visible_job(a_job.job_id, "a")
    assert victim.message.startswith("preempted: c reclaims its guarantee in pool train")
