"""Quotas and user limits count a GPU share by its part of one GPU, not as a whole GPU."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.tenancy.policy import Resources, UserLimits
from dlc.scheduler.tenancy.quotas import check_submit, demand, gpu_amount, largest_gpu_memory, plan
from tests.scheduler.tenancy.test_quotas import policy

GIB = 1024

AMOUNTS = {
    # spec -> (GPU size the memory shares count against, GPUs counted)
    "whole GPUs": ({"gpus": 2}, 32 * GIB, 2.0),
    "a gang counts every node": ({"gpus": 2, "nodes": 3}, 32 * GIB, 6.0),
    "half a GPU": ({"gpus": 0.5}, 32 * GIB, 0.5),
    "4 GiB of a 32 GiB GPU": ({"gpu_memory": "4G"}, 32 * GIB, 0.125),
    "4 GiB of an 80 GiB GPU": ({"gpu_memory": "4G"}, 80 * GIB, 0.05),
    "fraction and memory: the larger part": ({"gpus": 0.25, "gpu_memory": "16G"}, 32 * GIB, 0.5),
    "fraction larger than its memory": ({"gpus": 0.75, "gpu_memory": "4G"}, 32 * GIB, 0.75),
    "no GPU size known: a memory share counts one GPU": ({"gpu_memory": "4G"}, None, 1.0),
    "no GPU size known: a fraction still counts itself": ({"gpus": 0.5}, None, 0.5),
}


@pytest.mark.parametrize("body, gpu_mib, want", AMOUNTS.values(), ids=AMOUNTS.keys())
def test_gpu_amount(body, gpu_mib, want):
    spec = JobSpec.from_dict({"image": "busybox", **body})
    assert gpu_amount(spec, gpu_mib) == pytest.approx(want)
    assert demand(spec, gpu_mib).gpus == pytest.approx(want)


def test_largest_gpu_memory_of_the_agents():
    agents = [
        SimpleNamespace(gpu_memory={0: 16 * GIB, 1: 16 * GIB}),
        SimpleNamespace(gpu_memory={0: 32 * GIB}),
        SimpleNamespace(gpu_memory={}),
    ]
    assert largest_gpu_memory(agents) == 32 * GIB
    assert largest_gpu_memory([SimpleNamespace(gpu_memory={})]) is None


def share(job_id: str, user: str, state: JobState = JobState.QUEUED, at: float = 0.0, **ask) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "cpus": 1, **(ask or {"gpus": 0.25})})
    return Job(job_id, user, spec, state, submitted_at=at)


POOL = {"train": Resources(16, 1000, 1 << 30)}


def test_a_guarantee_of_one_gpu_holds_four_quarter_shares_and_not_a_fifth():
    pol = policy({"a": 1}, ceilings={"a": 1})
    running = [share(f"r{i}", "a", JobState.RUNNING) for i in range(3)]
    out = plan([share("q1", "a", at=1), share("q2", "a", at=2)], running, pol, POOL)
    assert [j.job_id for j in out.runnable] == ["q1"]  # 3 x 0.25 + 0.25 = the one GPU
    assert "q2" in out.held and "1 of 1 GPUs" in out.held["q2"], out.held


def test_memory_shares_count_against_the_gpu_size():
    pol = policy({"a": 1}, ceilings={"a": 1})
    running = [share(f"r{i}", "a", JobState.RUNNING, gpu_memory="4G") for i in range(7)]
    queued = [share("q1", "a", at=1, gpu_memory="4G"), share("q2", "a", at=2, gpu_memory="4G")]
    out = plan(queued, running, pol, POOL, gpu_mib=32 * GIB)
    # 7 + 1 shares of 4 GiB fill one 32 GiB GPU's worth; the ninth is over the ceiling
    assert [j.job_id for j in out.runnable] == ["q1"]
    assert "q2" in out.held
    # counted as whole GPUs (the old way) not even the first would have run
    assert out.usage[("a", "train")].gpus == pytest.approx(7 / 8)


def test_a_user_gpu_limit_counts_shares_by_fraction():
    pol = replace(policy({"a": 8}), limits={"a": UserLimits("a", max_gpus=1)})
    running = [share("r1", "a", JobState.RUNNING, gpus=0.5)]
    out = plan([share("q1", "a", at=1, gpus=0.5), share("q2", "a", at=2, gpus=0.5)],
               running, pol, POOL)  # fmt: skip
    assert [j.job_id for j in out.runnable] == ["q1"]
    assert "user a holds 1 of 1 GPUs allowed; this job needs 0.5" in out.held["q2"], out.held


def test_submit_checks_a_share_by_its_fraction():
    pol = replace(policy({"a": 8}), limits={"a": UserLimits("a", max_gpus=0.25)})
    check_submit(pol, "a", share("ok", "a", gpus=0.25).spec, POOL)
    with pytest.raises(JobSpecError, match="needs 0.5 GPUs but user a may hold at most 0.25"):
        check_submit(pol, "a", share("big", "a", gpus=0.5).spec, POOL)
    # 4 GiB of a 32 GiB GPU is 0.125: within the 0.25 limit
    check_submit(pol, "a", share("mem", "a", gpu_memory="4G").spec, POOL, gpu_mib=32 * GIB)
