"""Named scenarios: victims youngest by start and gangs whole (pure plan), and per-user
interactive limits through SchedulerCore (time limit on the kill pass, running cap)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import Resources, UserLimits
from dlc.scheduler.tenancy.quotas import plan
from dlc.store.memory import MemoryJobStore
from dlc.store.sqlite import JobStore

from ..helpers import offer
from .test_quotas_core import slave, status, submit, train_offer, two_groups

TRAIN = {"train": Resources(8, 64, 262144)}


def running(job_id: str, user: str, gpus: int, nodes: int = 1, at: float = 0.0) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "nodes": nodes, "cpus": 1})
    return Job(job_id, user, spec, JobState.RUNNING, submitted_at=at)


def queued(job_id: str, user: str, gpus: int) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": 1})
    return Job(job_id, user, spec, submitted_at=100.0)


VICTIM_CASES = {
    # a borrows 4 with two 2-GPU jobs; b wants its 2 back: the later STARTED one goes,
    # although it was submitted first
    "youngest_by_start_not_submission": (
        [
            running("old-sub", "a", 2, at=1),
            running("new-sub", "a", 2, at=2),
            running("base", "a", 4, at=0),
        ],
        {"old-sub": 50.0, "new-sub": 10.0, "base": 5.0},
        2,
        ["old-sub"],
    ),
    # a 2-node gang (2 GPUs a node) is the youngest borrower: it is stopped whole and its
    # 4 GPUs count, so nothing else is stopped although b needs only 2
    "gang_stopped_whole_counting_all_nodes": (
        [running("gang", "a", 2, nodes=2), running("one", "a", 2), running("two", "a", 2)],
        {"gang": 30.0, "one": 20.0, "two": 10.0},
        2,
        ["gang"],
    ),
    # b needs 4 back: the gang (4 GPUs) alone covers it, no single job is added
    "gang_covers_the_whole_need": (
        [running("gang", "a", 2, nodes=2), running("one", "a", 2), running("two", "a", 2)],
        {"gang": 30.0, "one": 20.0, "two": 10.0},
        4,
        ["gang"],
    ),
    # the gang is the oldest: single jobs go first, youngest first, until 4 are freed
    "old_gang_kept_singles_go": (
        [running("gang", "a", 2, nodes=2), running("one", "a", 2), running("two", "a", 2)],
        {"gang": 1.0, "one": 20.0, "two": 10.0},
        4,
        ["one", "two"],
    ),
}


@pytest.mark.parametrize("name", sorted(VICTIM_CASES))
def test_victims(name):
    active, started, b_gpus, expected = VICTIM_CASES[name]
    queue = [queued("b1", "b", b_gpus)]
    out = plan(queue, active, two_groups(), TRAIN, started)
    assert [p.job_id for p in out.preemptions] == expected


def test_without_start_times_submission_order_decides():
    active = [running("x", "a", 2, at=1), running("y", "a", 2, at=2), running("z", "a", 4)]
    out = plan([queued("b1", "b", 2)], active, two_groups(), TRAIN)
    assert [p.job_id for p in out.preemptions] == ["y"]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture(params=["sqlite", "memory"])
def core_and_clock(request, tmp_path):
    clock = Clock()
    store = (MemoryJobStore(clock=clock) if request.param == "memory"
             else JobStore(tmp_path / "db", clock=clock))  # fmt: skip
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000)
    core = SchedulerCore(store, config, lambda s: (s.image, None), clock=clock)
    core.update_agents([slave("a1", "train")])
    policy = two_groups()
    limits = {"a": UserLimits("a", max_interactive_s=8 * 3600, max_interactive=1)}
    core.set_tenancy(replace(policy, limits=limits))
    return core, clock


def test_interactive_environment_is_stopped_at_its_user_limit(core_and_clock):
    core, clock = core_and_clock
    env = submit(core, "a", 1, interactive=True)
    batch = submit(core, "a", 1)
    core.on_offers([train_offer("o1", list(range(8)))])
    for job in (env, batch):
        core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 8 * 3600 - 1
    assert core.pending_kills().kills == []
    clock.now += 1
    assert core.pending_kills().kills == [(f"{env.job_id}.0.0", "a1")]
    why = "stopped: interactive limit of 8 h for a reached"
    assert core.visible_job(env.job_id, "a").message == why
    assert core.pending_kills().kills == [(f"{env.job_id}.0.0", "a1")]  # re-sent, not doubled
    core.on_status({**status(f"{env.job_id}.0.0", "TASK_KILLED"), "message": "killed"})
    ended = core.visible_job(env.job_id, "a")
    assert (ended.state, ended.message) == (JobState.KILLED, why)
    assert core.visible_job(batch.job_id, "a").state is JobState.RUNNING  # batch: no limit


def test_second_interactive_environment_waits_for_the_first(core_and_clock):
    core, clock = core_and_clock
    first = submit(core, "a", 1, interactive=True)
    clock.now += 1
    second = submit(core, "a", 1, interactive=True)
    actions = core.on_offers([train_offer("o1", list(range(8)))])
    launched = [i["task_id"]["value"] for _, infos in actions.accepts for i in infos]
    assert launched == [f"{first.job_id}.0.0"]
    assert core.queue_reason(second.job_id).endswith(
        "in a; user a at their limit: 1 of 1 interactive environments running"
    )


def test_tasks_carry_the_policy_grace_as_their_kill_policy(core_and_clock):
    core, _ = core_and_clock
    submit(core, "a", 1)
    actions = core.on_offers([train_offer("o1", list(range(8)))])
    (info,) = [i for _, infos in actions.accepts for i in infos]
    assert info["kill_policy"] == {"grace_period": {"nanoseconds": 30_000_000_000}}


def test_interactive_limit_counts_from_the_launch_across_a_restart(tmp_path):
    clock = Clock()
    store = JobStore(tmp_path / "db", clock=clock)
    store.set_user_limits(UserLimits("a", max_interactive_s=3600), "admin")
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=1000)
    core = SchedulerCore(store, config, lambda s: (s.image, None), clock=clock)
    core.update_agents([slave("a1", "default")])
    env = submit(core, "a", 1, interactive=True)
    actions = core.on_offers([offer("o1", "a1", list(range(8)), cpus=64, mem=262144)])
    assert [i["task_id"]["value"] for _, infos in actions.accepts for i in infos] == [
        f"{env.job_id}.0.0"
    ]
    core.on_status(status(f"{env.job_id}.0.0", "TASK_RUNNING"))
    clock.now += 3000
    restarted = SchedulerCore(store, config, lambda s: (s.image, None), clock=clock)
    assert restarted.pending_kills().kills == []
    clock.now += 600  # 3600 s after the launch, not after the restart
    assert restarted.pending_kills().kills == [(f"{env.job_id}.0.0", "a1")]
    assert restarted.visible_job(env.job_id, "a").message == (
        "stopped: interactive limit of 1 h for a reached"
    )
