"""A user's ``max_cpus`` and ``max_mem_mib`` count what their tasks hold on the agents: the ask
plus each task's executor (red-team finding 57, docs/security.md), with the overhead of the
core's placement config; group quotas count the ask alone (docs/quotas.md)."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.inventory import Overheads
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.held import on_agents
from dlc.scheduler.tenancy.policy import Policy, Resources, UserLimits
from dlc.scheduler.tenancy.quotas import check_submit, plan
from dlc.scheduler.tenancy.user_holdings import held_by_user
from dlc.store.sqlite import JobStore

from ..helpers import offer
from .test_cpu_only_tenancy import cpu_job
from .test_quotas import job, policy, running
from .test_quotas_core import Clock, slave

CAP = {"train": Resources(64, 1000, 1 << 30)}
EXECUTOR = " (each task's executor included)"


def capped(**limits) -> Policy:
    return policy({"a": 8}, members={"a": ["alice", "bob"]},
                  limits={"alice": UserLimits("alice", **limits)})  # fmt: skip


def test_tiny_jobs_count_their_executors_against_the_cpu_cap():
    """The finding: max_cpus 8 without max_running admitted all 100 jobs of 0.01 CPU (1 CPU
    counted, 11 held on the agents); each holds 0.11, so 72 fit in 8 (7.92)."""
    flood = [cpu_job(f"c{i:03}", "alice", at=i, cpus=0.01) for i in range(100)]
    bobs = [cpu_job(f"b{i}", "bob", at=200 + i, cpus=0.01) for i in range(3)]
    out = plan(flood + bobs, [], capped(max_cpus=8), CAP)
    admitted = [j.job_id for j in out.runnable]
    assert admitted == [f"c{i:03}" for i in range(72)] + ["b0", "b1", "b2"]
    assert out.held["c072"].endswith(
        f"user alice holds 7.92 of 8 CPUs allowed; this job needs 0.11{EXECUTOR}"
    )


def test_tiny_jobs_count_their_executors_against_the_memory_cap():
    """32 MiB jobs (the least one may ask) hold 96 MiB each with the executor's 64: 10 fit
    in 1000 MiB, where 31 did."""
    flood = [cpu_job(f"m{i:02}", "alice", at=i, cpus=0.01, mem_mib=32) for i in range(40)]
    out = plan(flood, [], capped(max_mem_mib=1000), CAP)
    assert len(out.runnable) == 10
    assert out.held["m10"].endswith(f"user alice holds 960M of 1000M memory allowed; "
                                    f"this job needs 96M{EXECUTOR}")  # fmt: skip


def test_a_gang_counts_one_executor_a_node():
    """A running 4-node gang of 1 CPU a node holds 4.4; a 1-CPU job needs 1.1: past 5.4."""
    active = [running(cpu_job("gang", "alice", cpus=1, nodes=4))]
    out = plan([cpu_job("one", "alice", cpus=1, at=1)], active, capped(max_cpus=5.4), CAP)
    assert out.runnable == []
    assert out.held["one"].endswith(f"user alice holds 4.4 of 5.4 CPUs allowed; this job needs "
                                    f"1.1{EXECUTOR}")  # fmt: skip
    queued = [cpu_job("pair", "alice", cpus=0.5, nodes=2, at=1)]  # 2 x 0.6
    out = plan(queued, active, capped(max_cpus=5.5), CAP)
    assert "this job needs 1.2" in out.held["pair"]
    assert [j.job_id for j in plan(queued, active, capped(max_cpus=5.6), CAP).runnable] == ["pair"]


def test_a_job_alone_past_the_cap_with_its_executors_is_refused_at_submit():
    pol = capped(max_cpus=8, max_mem_mib=8192)
    with pytest.raises(
        JobSpecError,
        match=r"^cpus: the job needs 8.1 CPUs over all its nodes "
        r"\(8 asked and 0.1 a node for its executor\)",
    ):
        check_submit(pol, "alice", cpu_job("c", "alice", cpus=8).spec, CAP)
    with pytest.raises(JobSpecError, match="^cpus: the job needs 8.2 CPUs"):
        check_submit(pol, "alice", cpu_job("c", "alice", cpus=4, nodes=2).spec, CAP)
    check_submit(pol, "alice", cpu_job("c", "alice", cpus=3.9, nodes=2).spec, CAP)  # 8 of 8
    with pytest.raises(JobSpecError, match=r"^mem_mib: the job needs 8.0625G of memory"):
        check_submit(pol, "alice", cpu_job("m", "alice", mem_mib=8192).spec, CAP)
    check_submit(pol, "alice", cpu_job("m", "alice", mem_mib=8192 - 64).spec, CAP)


def test_the_held_view_counts_the_executors_as_admission_does():
    active = [running(cpu_job("gang", "alice", cpus=1, nodes=4)),
              running(job("g", "alice", 1, cpus=2, mem_mib=4096))]  # fmt: skip
    held = held_by_user(Policy(), active)["alice"]
    assert (held.cpus, held.mem_mib) == (pytest.approx(6.5), 4 * 1088 + 4160)


def test_group_quotas_count_the_ask_alone():
    """Guarantees and ceilings are sized in job asks: a group's usage has no executor."""
    active = [running(cpu_job(f"c{i}", "alice", cpus=0.01)) for i in range(10)]
    out = plan([], active, capped(max_cpus=8), CAP)
    assert out.usage[("a", "train")].cpus == pytest.approx(0.1)


def test_no_overhead_counts_the_ask_alone():
    """A core built without executor overheads (the simulator's) counts what jobs ask."""
    flood = [cpu_job(f"c{i:03}", "alice", at=i, cpus=0.01) for i in range(100)]
    out = plan(flood, [], capped(max_cpus=0.5), CAP, overheads=Overheads())
    assert len(out.runnable) == 50
    assert on_agents(flood[0].spec, Overheads()) == (0.01, 1024.0)


# -- through SchedulerCore: the overhead of the core's placement config --------------------


@pytest.fixture
def core(tmp_path):
    """A core whose executors cost 0.5 CPU and 512 MiB a task (not the default 0.1, 64)."""
    placement = PlacementConfig("first-fit", executor_cpus=0.5, executor_mem_mib=512)
    core = SchedulerCore(JobStore(tmp_path / "db"), CoreConfig(placement=placement, max_skips=9),
                         lambda s: (s.image, None), clock=Clock())  # fmt: skip
    core.update_agents([slave("a1", "default")])
    core.set_tenancy(Policy(limits={"alice": UserLimits("alice", max_cpus=4, max_mem_mib=8192)}))
    return core


def submit(core, **body):
    return core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 0, **body}))


def test_the_core_counts_its_own_executor_overhead(core):
    """Admission, the submit refusal and the held view all read the core's 0.5 CPU a task."""
    with pytest.raises(
        JobSpecError,
        match=r"needs 4.1 CPUs over all its nodes \(3.6 asked "
        r"and 0.5 a node for its executor\)",
    ):
        submit(core, cpus=3.6)
    jobs = [submit(core, cpus=0.5) for _ in range(5)]  # 1 CPU each with the executor
    plan_ = core.plan_queue()
    assert [j.job_id for j in plan_.runnable] == [j.job_id for j in jobs[:4]]
    assert plan_.held[jobs[4].job_id].endswith(
        f"user alice holds 4 of 4 CPUs allowed; this job needs 1{EXECUTOR}"
    )
    assert core.user_holdings() == {}  # nothing runs yet
    actions = core.on_offers([offer("o1", "a1", [], cpus=64, mem=262144,
                                    attrs={"dlc_pool": "default"})])  # fmt: skip
    assert sum(len(infos) for _, infos in actions.accepts) == 4
    held = core.user_holdings()["alice"]
    assert (held.running, held.cpus, held.mem_mib) == (4, 4, 4 * (1024 + 512))
