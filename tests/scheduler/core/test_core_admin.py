"""The core's reads and writes for the API (issue 26, narrow ports): the API never reaches
the store, so what it needs is here, and a tenancy change is in force at once."""

from __future__ import annotations

import pytest

from dlc.errors import JobNotFound, StoreError
from dlc.scheduler.core.admin import UnknownUser
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.core.ports import JobReader
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import Resources, UserLimits
from dlc.store.memory import MemoryJobStore
from dlc.store.sqlite import JobStore

CONFIG = CoreConfig(placement=PlacementConfig("first-fit"))


@pytest.fixture
def core(tmp_path):
    store = JobStore(tmp_path / "db")
    yield SchedulerCore(store, CONFIG, lambda spec: (spec.image, None))
    store.close()


def test_tenancy_changes_are_in_force_without_a_reload(core):
    core.create_group("vision", "root")
    core.add_member("vision", "alice", "root")
    policy = core.set_quota("vision", "default", Resources(4, 32, 65536), "root")
    assert policy is core.tenancy  # the next round plans with it
    assert core.tenancy.group_of("alice") == "vision"
    assert core.tenancy.quotas[("vision", "default")].guaranteed.gpus == 4
    core.set_user_limits(UserLimits("alice", max_running=2), "root")
    core.set_grace(45.0, "root")
    assert core.tenancy.limits["alice"].max_running == 2 and core.tenancy.grace_s == 45.0
    core.remove_member("vision", "alice", "root")
    assert core.tenancy.group_of("alice") != "vision"
    assert [e.action for e in core.quota_audit(2)] == ["member-removed", "grace"]


def test_tokens_are_made_through_the_core(core):
    token = core.add_token("bob", max_priority=5)
    assert core.authenticate(token) == ("bob", False, 5)


def test_get_job_reads_memory_then_the_store_whoever_owns_it(core):
    job = core.submit("alice", JobSpec(image="busybox", gpus=1))
    assert core.get_job(job.job_id) is core.queued_jobs()[0]
    core.kill(job.job_id, "alice")
    assert core.get_job(job.job_id).state is JobState.KILLED
    with pytest.raises(JobNotFound):
        core.get_job("no-such-job")


def test_the_core_is_a_job_reader(core):
    reader: JobReader = core
    job = core.submit("alice", JobSpec(image="busybox", gpus=1))
    assert [j.job_id for j in reader.all_jobs()] == [job.job_id]
    assert [state for _, state, _ in reader.job_history(job.job_id)] == ["queued"]


def test_a_store_without_tokens_is_named():
    class Bare(MemoryJobStore):
        add_token = None  # type: ignore[assignment]

    core = SchedulerCore(Bare(), CONFIG, lambda spec: (spec.image, None))
    with pytest.raises(StoreError, match="keeps no API tokens"):
        core.add_token("bob")


def test_a_user_name_nobody_has_is_unknown_with_the_close_known_names(core):
    core.add_token("alice")
    core.create_group("vision", "root")
    core.add_member("vision", "alicia", "root")
    unknown = core.unknown_user("alcie")
    assert unknown is not None and unknown.similar == ("alice", "alicia")
    assert core.unknown_user("alice") is None and core.unknown_user("alicia") is None
    core.submit("zoe", JobSpec(image="busybox", gpus=1))  # a job's owner is known too
    assert core.unknown_user("zoe") is None
    assert core.unknown_user("x") == UnknownUser("x")  # nothing close: no guess


def test_a_name_with_a_newline_stays_one_line_and_a_store_without_users_warns_of_nobody():
    assert "\n" not in UnknownUser("al\nice").warning()
    assert "\n" not in UnknownUser("al\nice").member_warning("team\na")

    class Bare(MemoryJobStore):
        knows_user = None  # type: ignore[assignment]

    core = SchedulerCore(Bare(), CONFIG, lambda spec: (spec.image, None))
    assert core.unknown_user("alcie") is None  # it cannot tell: no warning rather than a false one
