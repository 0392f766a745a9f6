"""CPU-only jobs (``gpus: 0``) under the tenancy policy: charged 0 GPUs and their CPUs and
memory, bounded by per-user running caps and group CPU quotas, and never stopped to free GPUs
they do not hold. A user's CPU and memory caps count each task's executor too (0.1 CPU and
64 MiB by default: ``PlacementConfig``)."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources, UserLimits
from dlc.scheduler.tenancy.preemption import pick_victims
from dlc.scheduler.tenancy.quotas import check_submit, demand, plan

from .test_quotas import job, policy, run_plan, running


def cpu_job(jid: str, user: str, at: float = 0.0, prio: int = 0, cpus: float = 1, **kw):
    return job(jid, user, 0, at=at, prio=prio, cpus=cpus, **kw)


def test_a_cpu_only_job_is_charged_its_cpus_and_memory_and_no_gpu():
    spec = cpu_job("c", "a", cpus=4, mem_mib=8192, nodes=2).spec
    assert demand(spec) == Resources(0.0, 8.0, 16384.0)


def test_the_running_cap_counts_cpu_only_jobs_both_ways():
    pol = policy({"a": 8}, members={"a": ["alice"]},
                 limits={"alice": UserLimits("alice", max_running=1)})  # fmt: skip
    held = run_plan(pol, [job("g", "alice", 1)], [running(cpu_job("c", "alice"))])
    assert "user alice at their limit: 1 of 1 jobs running" in held.held["g"]
    held = run_plan(pol, [cpu_job("c2", "alice")], [running(job("g2", "alice", 1))])
    assert "user alice at their limit: 1 of 1 jobs running" in held.held["c2"]


def test_the_gpu_cap_does_not_hold_a_cpu_only_job():
    pol = policy({"a": 8}, members={"a": ["alice"]},
                 limits={"alice": UserLimits("alice", max_gpus=1)})  # fmt: skip
    out = run_plan(pol, [cpu_job("c", "alice"), job("g", "alice", 1, at=1)],
                   [running(job("r", "alice", 1))])  # fmt: skip
    assert [j.job_id for j in out.runnable] == ["c"]
    assert "holds 1 of 1 GPUs allowed" in out.held["g"]
    check_submit(pol, "alice", cpu_job("c", "alice").spec, {"train": Resources(16, 1000, 1 << 30)})


def test_a_group_cpu_ceiling_bounds_cpu_only_jobs():
    groups = {"a": Group("a", frozenset({"alice"}), "train")}
    quota = Quota("a", "train", Resources(8, 8, 1 << 20), ceiling=Resources(8, 8, 1 << 20))
    pol = Policy(groups, {("a", "train"): quota}, {}, grace_s=30)
    with pytest.raises(JobSpecError, match="^cpus: the job needs 16 CPUs but a's ceiling"):
        check_submit(pol, "alice", cpu_job("big", "alice", cpus=16).spec,
                     {"train": Resources(16, 64, 1 << 20)})  # fmt: skip
    active = [running(cpu_job(f"r{i}", "alice", cpus=4)) for i in range(2)]
    out = plan(
        [cpu_job("c", "alice", at=1, cpus=4)], active, pol, {"train": Resources(16, 64, 1 << 20)}
    )
    assert "a at its ceiling in pool train: holds 8 of 8 CPUs" in out.held["c"]


def test_reclaiming_gpus_never_stops_a_cpu_only_job():
    """The CPU-only borrower is the youngest and of the lowest priority, so it would be the
    first victim by order; stopping it frees no GPU, so the GPU borrower goes alone."""
    pol = policy({"a": 8, "b": 8})
    active = [
        running(job("a1", "a", 8, at=1)),
        running(job("a2", "a", 4, at=2)),
        running(job("a3", "a", 4, at=3)),
        running(cpu_job("a-cpu", "a", at=4, prio=-10)),
    ]
    out = run_plan(pol, [job("b1", "b", 4, at=10)], active)
    assert [p.job_id for p in out.preemptions] == ["a3"]
    assert [j.job_id for j in out.runnable] == ["b1"]


def test_a_cpu_only_job_is_a_victim_where_cpus_are_short():
    jobs = [running(cpu_job("c", "a", cpus=8)), running(job("g", "a", 2, cpus=1, at=-1))]
    picked = pick_victims(jobs, Resources(0, 4, 0), lambda j: demand(j.spec))
    assert [j.job_id for j in picked or ()] == ["c"]
    picked = pick_victims(jobs, Resources(2, 0, 0), lambda j: demand(j.spec))
    assert [j.job_id for j in picked or ()] == ["g"]


# -- the per-user CPU limit (max_cpus) ----------------------------------------------------


def cpu_capped(max_cpus: float, **more) -> Policy:
    return policy({"a": 8}, members={"a": ["alice"]},
                  limits={"alice": UserLimits("alice", max_cpus=max_cpus, **more)})  # fmt: skip


def test_the_cpu_cap_holds_cpu_only_jobs_past_it_with_a_reason():
    out = run_plan(cpu_capped(16), [cpu_job(f"c{i}", "alice", at=i, cpus=6) for i in range(3)])
    assert [j.job_id for j in out.runnable] == ["c0", "c1"]
    assert out.held["c2"].endswith(
        "user alice holds 12.2 of 16 CPUs allowed; this job needs 6.1 (each task's executor "
        "included)"
    )


def test_the_cpu_cap_counts_the_cpus_of_gpu_jobs_and_of_every_node():
    # 8 CPUs of a GPU job and 2 x 2 of a two-node CPU-only job, 0.1 a task's executor: 12.3
    active = [running(job("g", "alice", 1, cpus=8)),
              running(cpu_job("c", "alice", cpus=2, nodes=2))]  # fmt: skip
    out = run_plan(cpu_capped(16), [cpu_job("small", "alice", cpus=5, at=1)], active)
    assert "user alice holds 12.3 of 16 CPUs allowed; this job needs 5.1" in out.held["small"]
    out = run_plan(cpu_capped(16), [job("gpu", "alice", 1, cpus=5, at=1)], active)
    assert "holds 12.3 of 16 CPUs allowed; this job needs 5.1" in out.held["gpu"]
    out = run_plan(cpu_capped(16), [cpu_job("fits", "alice", cpus=3.6, at=1)], active)
    assert [j.job_id for j in out.runnable] == ["fits"]  # 16 of 16: at the cap, not past it


def test_the_cpu_cap_leaves_the_gpu_cap_as_it_was_and_other_users_alone():
    pol = cpu_capped(100, max_gpus=1)
    out = run_plan(pol, [job("g2", "alice", 1, cpus=1, at=1), cpu_job("bob", "bob", cpus=500)],
                   [running(job("g1", "alice", 1, cpus=1))])  # fmt: skip
    assert "holds 1 of 1 GPUs allowed; this job needs 1" in out.held["g2"]
    assert "bob" in [j.job_id for j in out.runnable]


def test_a_cap_lowered_below_what_runs_stops_nothing_and_holds_the_next_job():
    active = [running(cpu_job("big", "alice", cpus=32))]
    out = run_plan(cpu_capped(8), [cpu_job("next", "alice", cpus=1, at=1)], active)
    assert out.preemptions == [] and out.runnable == []
    assert "user alice holds 32.1 of 8 CPUs allowed; this job needs 1.1" in out.held["next"]


def test_a_job_alone_past_the_cpu_cap_is_refused_at_submit_naming_cpus():
    cap = {"train": Resources(16, 1000, 1 << 30)}
    with pytest.raises(JobSpecError) as err:
        check_submit(cpu_capped(8), "alice", cpu_job("c", "alice", cpus=4, nodes=3).spec, cap)
    assert str(err.value) == (
        "cpus: the job needs 12.3 CPUs over all its nodes (12 asked and 0.1 a node for its "
        "executor) but user alice may hold at most 8; ask for less or ask an admin to raise the "
        "limit (`dlc groups limit --max-cpus`)"
    )
    check_submit(cpu_capped(8), "alice", cpu_job("c", "alice", cpus=3.9, nodes=2).spec, cap)
    with pytest.raises(JobSpecError, match="^cpus: the job needs 9.1 CPUs"):  # GPU jobs too
        check_submit(cpu_capped(8), "alice", job("g", "alice", 1, cpus=9).spec, cap)


def test_a_zero_cpu_cap_runs_nothing_of_the_user():
    out = run_plan(cpu_capped(0), [job("g", "alice", 1, cpus=0.5)])
    assert out.runnable == [] and "holds 0 of 0 CPUs allowed" in out.held["g"]


def test_the_cpu_cap_closes_the_cpu_only_flood_of_a_gpu_capped_user():
    """docs/security.md: with only max_gpus 1, four --gpus 0 --cpus 63.8 jobs held four
    64-CPU agents; with max_cpus 64 one is admitted (63.9 with its executor) and the rest
    wait, bob's jobs go on."""
    pol = Policy(limits={"alice": UserLimits("alice", max_gpus=1, max_cpus=64)})
    flood = [cpu_job(f"c{i}", "alice", at=i, cpus=63.8) for i in range(4)]
    bobs = [job(f"b{i}", "bob", 1, cpus=4, at=10 + i) for i in range(16)]
    out = plan(flood + bobs, [], pol, {"default": Resources(32, 256, 1 << 30)})
    assert [j.job_id for j in out.runnable] == ["c0"] + [f"b{i}" for i in range(16)]
    assert "user alice holds 63.9 of 64 CPUs allowed; this job needs 63.9" in out.held["c1"]


# -- the per-user memory limit (max_mem_mib): red-team finding 56 --------------------------


def test_max_cpus_alone_let_a_user_hold_every_agent_by_memory():
    """docs/security.md #56: with max_gpus 1 and max_cpus 64, four --gpus 0 --cpus 0.01 jobs
    of 500 GiB each (a 512 GiB agent's memory, so its GPUs idle) were all admitted (0.04 CPUs
    counted); max_mem_mib 512G admits one, bob's GPU jobs go on. (Each asks 64 MiB less than
    500 GiB: its executor's 64 MiB make it 500 GiB held.)"""
    flood = [cpu_job(f"m{i}", "alice", at=i, cpus=0.01, mem_mib=500 * 1024 - 64)
             for i in range(4)]  # fmt: skip
    bobs = [job(f"b{i}", "bob", 1, cpus=4, at=10 + i) for i in range(4)]
    cap = {"default": Resources(32, 256, 4 * 512 * 1024)}
    loose = Policy(limits={"alice": UserLimits("alice", max_gpus=1, max_cpus=64)})
    assert len(plan(flood, [], loose, cap).runnable) == 4  # what max_cpus left open
    tight = Policy(limits={"alice": UserLimits("alice", max_gpus=1, max_cpus=64,
                                               max_mem_mib=512 * 1024)})  # fmt: skip
    out = plan(flood + bobs, [], tight, cap)
    assert [j.job_id for j in out.runnable] == ["m0"] + [f"b{i}" for i in range(4)]
    assert "user alice holds 500G of 512G memory allowed; this job needs 500G" in out.held["m1"]


def test_the_memory_cap_counts_every_node_and_gpu_jobs_too():
    pol = Policy(limits={"alice": UserLimits("alice", max_mem_mib=8192)})
    # each ask 64 MiB (a task's executor) short of whole GiB: 4G + 2 x 1G held
    active = [running(job("g", "alice", 1, mem_mib=4096 - 64)),
              running(cpu_job("c", "alice", mem_mib=1024 - 64, nodes=2))]  # fmt: skip
    out = run_plan(pol, [cpu_job("big", "alice", mem_mib=2048 - 64, at=1)], active)
    assert [j.job_id for j in out.runnable] == ["big"]  # 8G of 8G: at the cap, not past it
    out = run_plan(pol, [job("more", "alice", 1, mem_mib=3072 - 64, at=1)], active)
    assert "user alice holds 6G of 8G memory allowed; this job needs 3G" in out.held["more"]


def test_a_job_alone_past_the_memory_cap_is_refused_at_submit_naming_mem():
    cap = {"train": Resources(16, 1000, 1 << 30)}
    pol = policy({"a": 8}, members={"a": ["alice"]},
                 limits={"alice": UserLimits("alice", max_mem_mib=8192)})  # fmt: skip
    with pytest.raises(JobSpecError) as err:
        check_submit(pol, "alice", cpu_job("c", "alice", mem_mib=3072 - 64, nodes=3).spec, cap)
    assert str(err.value) == (
        "mem_mib: the job needs 9G of memory over all its nodes (8.8125G asked and 64M a node "
        "for its executor) but user alice may hold at most 8G; ask for less or ask an admin to "
        "raise the limit (`dlc groups limit --max-mem`)"
    )
    check_submit(pol, "alice", cpu_job("c", "alice", mem_mib=4096 - 64, nodes=2).spec, cap)
