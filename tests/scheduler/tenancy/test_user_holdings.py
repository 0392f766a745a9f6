"""What each user holds, as their limits count it: the view agrees with admission (CPUs and
memory with each task's executor: 0.1 CPU and 64 MiB by default)."""

from __future__ import annotations

import pytest

from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.tenancy.policy import Policy, Resources, UserLimits
from dlc.scheduler.tenancy.quotas import plan
from dlc.scheduler.tenancy.user_holdings import UserHeld, held_by_user


def running(job_id: str, user: str, **spec) -> Job:
    body = {"image": "busybox", "gpus": 1, "cpus": 1, **spec}
    return Job(job_id, user, JobSpec.from_dict(body), JobState.RUNNING)


ACTIVE = [
    running("gang", "alice", gpus=2, nodes=2, cpus=3),
    running("env", "alice", interactive=True, cpus=2),
    running("half", "alice", gpus=0.5, cpus=1),
    running("cpu", "bob", gpus=0, cpus=8),
]


def test_each_user_holds_their_jobs_gpus_cpus_memory_and_environments():
    held = held_by_user(Policy(), ACTIVE)
    assert held == {  # memory: 1024 MiB a node by default, and 64 a task's executor
        "alice": UserHeld(running=3, gpus=5.5, cpus=pytest.approx(9.4), environments=1,
                          mem_mib=4352),
        "bob": UserHeld(running=1, gpus=0, cpus=8.1, environments=0, mem_mib=1088),
    }  # fmt: skip


def test_admission_counts_the_same_amounts():
    alice = held_by_user(Policy(), ACTIVE)["alice"]
    limits = {"alice": UserLimits("alice", max_cpus=alice.cpus, max_gpus=alice.gpus + 1)}
    queued = Job("next", "alice", JobSpec.from_dict({"image": "busybox", "gpus": 0, "cpus": 1}))
    out = plan([queued], ACTIVE, Policy(limits=limits), {"default": Resources(64, 256, 1 << 20)})
    assert out.held["next"].endswith(
        "user alice holds 9.4 of 9.4 CPUs allowed; this job needs 1.1 (each task's executor "
        "included)"
    )


def test_admission_counts_the_same_memory():
    alice = held_by_user(Policy(), ACTIVE)["alice"]
    limits = {"alice": UserLimits("alice", max_mem_mib=alice.mem_mib + 512)}
    queued = Job("next", "alice", JobSpec.from_dict({"image": "busybox", "gpus": 0}))
    out = plan([queued], ACTIVE, Policy(limits=limits), {"default": Resources(64, 256, 1 << 20)})
    assert out.held["next"].endswith(
        "user alice holds 4.25G of 4.75G memory allowed; this job needs 1.0625G (each task's "
        "executor included)"
    )
