"""Groups, quotas, limits and their audit log in the SQLite store (migrations 4 and 5) and
the in-memory store and PostgreSQL: the shared tests run on all three (same answers, same
refusals)."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import pytest

from dlc.errors import TenancyError
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.tenancy.fair_share import UsageRow
from dlc.scheduler.tenancy.policy import Resources, UserLimits
from dlc.store.memory import MemoryJobStore
from dlc.store.schema import SCHEMA_VERSION
from dlc.store.sqlite import JobStore
from tests.store.conftest import reopen


@pytest.fixture(params=["sqlite", "memory", "postgresql"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryJobStore(clock=lambda: 5.0)
        return
    if request.param == "postgresql":
        from dlc.store.postgres import JobStore as PgJobStore

        opened = PgJobStore(request.getfixturevalue("postgres").new_db(), clock=lambda: 5.0)
    else:
        opened = JobStore(tmp_path / "jobs.db", clock=lambda: 5.0)
    yield opened
    opened.close()


def test_policy_reads_back_what_was_set(store):
    store.create_group("team-a", "admin", default_pool="train", preempt_within=True)
    store.create_group("team-b", "admin")
    store.add_member("team-a", "alice", "admin")
    store.add_member("team-b", "bob", "admin")
    store.remove_member("team-b", "bob", "admin")
    store.set_quota("team-a", "train", Resources(6, 40, 262144), "admin",
                    ceiling=Resources(8, float("inf"), float("inf")))  # fmt: skip
    store.set_quota("team-b", "dev", Resources(1, 2, 3), "admin",
                    ceiling=Resources(float("inf"), float("inf"), float("inf")))  # fmt: skip
    store.set_quota("team-a", "dev", Resources(1, 1, 1), "admin")
    store.set_quota("team-a", "dev", Resources(2, 3, 4), "admin")  # replaces, per group and pool
    store.set_user_limits(UserLimits("alice", 2, 4.0, 28800.0, 1, 96.5), "admin")
    store.set_grace(45, "admin")
    policy = store.tenancy_policy()
    assert policy.quota("team-a", "dev").guaranteed == Resources(2, 3, 4)
    assert policy.quota("team-a", "train").guaranteed == Resources(6, 40, 262144)
    assert policy.group_of("alice") == "team-a" and policy.group_of("bob") == "-"
    assert policy.groups["team-a"].preempt_within and not policy.groups["team-b"].preempt_within
    assert policy.pool_of("alice", None) == "train" and policy.pool_of("bob", None) == "default"
    assert policy.quota("team-a", "train").ceiling == Resources(8, float("inf"), float("inf"))
    assert policy.quota("team-b", "dev").ceiling is None
    assert policy.limits["alice"] == UserLimits("alice", 2, 4.0, 28800.0, 1, 96.5)
    assert policy.grace_s == 45
    log = store.quota_audit()
    assert [e.action for e in log][:3] == ["grace", "limits", "quota"]
    assert log[1].detail == {"user": "alice", "max_running": 2, "max_gpus": 4.0,
                             "max_cpus": 96.5, "max_mem_mib": None, "max_interactive_s": 28800.0,
                             "max_interactive": 1}  # fmt: skip
    assert len(store.quota_audit(limit=2)) == 2


def test_changing_one_limit_keeps_the_others_and_none_removes_one(store):
    store.set_user_limits(UserLimits("alice", 2, 4.0, 28800.0, 1, 64), "admin")
    store.update_user_limits("alice", {"max_cpus": 16}, "admin")
    assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 2, 4.0, 28800.0, 1, 16)
    store.update_user_limits("alice", {"max_gpus": None, "max_running": 0}, "root")
    assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 0, None, 28800.0, 1, 16)
    entry = store.quota_audit()[0]
    assert (entry.actor, entry.action) == ("root", "limits")
    assert entry.detail == {"user": "alice", "max_running": 0, "max_gpus": None,
                            "max_cpus": 16, "max_mem_mib": None, "max_interactive_s": 28800.0,
                            "max_interactive": 1,
                            "changed": ["max_gpus", "max_running"]}  # fmt: skip
    store.update_user_limits("alice", {"max_mem_mib": 262144}, "admin")  # red-team #56
    assert store.tenancy_policy().limits["alice"].max_mem_mib == 262144
    assert store.tenancy_policy().limits["alice"].max_cpus == 16
    store.update_user_limits("bob", {"max_gpus": 2}, "admin")  # a user without a row gets one
    assert store.tenancy_policy().limits["bob"] == UserLimits("bob", max_gpus=2)


def test_a_user_left_with_no_cap_has_no_limits_row(store):
    store.update_user_limits("alice", {"max_cpus": 8}, "admin")
    store.update_user_limits("alice", {"max_cpus": None}, "admin")
    assert "alice" not in store.tenancy_policy().limits
    assert store.quota_audit()[0].detail["max_cpus"] is None


def test_clearing_a_users_limits_removes_all_and_is_audited_once(store):
    store.set_user_limits(UserLimits("alice", 2, 4.0), "admin")
    assert store.clear_user_limits("alice", "root") is True
    assert "alice" not in store.tenancy_policy().limits
    assert store.clear_user_limits("alice", "root") is False  # nothing to remove: no line
    log = store.quota_audit()
    assert [(e.action, e.detail) for e in log[:2]] == [
        ("limits-removed", {"user": "alice"}),
        ("limits", log[1].detail),
    ]
    assert len(log) == 2


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"max_cpus": -1}, "max_cpus: -1 is negative"),
        ({"max_gpus": float("nan")}, "max_gpus: nan is out of range"),
        ({"max_cpu": 4}, "max_cpu: no such limit; the limits are max_running, max_gpus"),
        ({"max_mem_mib": float("nan")}, "max_mem_mib: nan is out of range"),
        ({"max_mem_mib": -1}, "max_mem_mib: -1 is negative"),
    ],
)
def test_a_bad_change_is_refused_and_nothing_is_written(store, changes, match):
    store.set_user_limits(UserLimits("alice", max_gpus=4.0), "admin")
    with pytest.raises(TenancyError, match=match):
        store.update_user_limits("alice", {"max_running": 1, **changes}, "admin")
    assert store.tenancy_policy().limits["alice"] == UserLimits("alice", max_gpus=4.0)
    assert len(store.quota_audit()) == 1


def test_policy_round_trips_through_a_restart(tmp_path):
    path = tmp_path / "jobs.db"
    store = JobStore(path)
    store.create_group("team-a", "admin", default_pool="train", preempt_within=True)
    store.add_member("team-a", "alice", "admin")
    store.set_quota("team-a", "train", Resources(6, 40, 262144), "admin",
                    ceiling=Resources(8, float("inf"), float("inf")))  # fmt: skip
    store.set_user_limits(UserLimits("alice", 2, 4.0, 3600.0), "admin")
    store.set_grace(45, "admin")
    store.close()
    policy = JobStore(path).tenancy_policy()
    assert policy.group_of("alice") == "team-a"
    assert policy.pool_of("alice", None) == "train"
    quota = policy.quota("team-a", "train")
    assert quota.guaranteed == Resources(6, 40, 262144)
    assert quota.ceiling.gpus == 8 and quota.ceiling.cpus == float("inf")
    assert policy.limits["alice"].max_running == 2
    assert policy.groups["team-a"].preempt_within and policy.grace_s == 45


def test_every_change_is_audited_newest_first(store):
    store.create_group("team-a", "root")
    store.set_quota("team-a", "dev", Resources(2, 8, 1024), "root")
    log = store.quota_audit()
    assert [e.action for e in log] == ["quota", "group"]
    assert log[0].actor == "root" and log[0].at == 5.0
    assert log[0].detail["guaranteed"] == {"gpus": 2, "cpus": 8, "mem_mib": 1024}


def test_a_user_is_in_one_group(store):
    for name in ("a", "b"):
        store.create_group(name, "root")
    store.add_member("a", "alice", "root")
    store.add_member("b", "alice", "root")
    assert store.tenancy_policy().group_of("alice") == "b"


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda s: s.add_member("nope", "x", "r"), "group: no group 'nope'; create it"),
        (lambda s: s.set_quota("nope", "dev", Resources(1), "r"), "no group 'nope'"),
        (lambda s: s.create_group("Team A", "r"), "group: 'Team A' is not a valid group name"),
        (lambda s: s.set_user_limits(UserLimits("u", -1), "r"), "max_running: -1 is negative"),
        (lambda s: s.set_grace(-1, "r"), "grace: -1 s is out of range"),
        (
            lambda s: s.set_user_limits(UserLimits("u", max_interactive=-2), "r"),
            "max_interactive: -2 is negative",
        ),
        (lambda s: s.remove_member("a", "nobody", "r"), "user: nobody is not in group a"),
        (
            lambda s: s.set_user_limits(UserLimits("u", max_cpus=-0.5), "r"),
            "max_cpus: -0.5 is negative",
        ),
        # NaN compares false with everything: stored, it would cap nothing
        (
            lambda s: s.set_user_limits(UserLimits("u", max_cpus=float("nan")), "r"),
            "max_cpus: nan is out of range; give 0 to 1000000000",
        ),
        (
            lambda s: s.set_user_limits(UserLimits("u", max_gpus=float("inf")), "r"),
            "max_gpus: inf is out of range",
        ),
        # past PostgreSQL's 32-bit INTEGER column: refused before the database
        (
            lambda s: s.set_user_limits(UserLimits("u", max_running=10**12), "r"),
            "max_running: 1000000000000 is out of range",
        ),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_written(store, call, match):
    with pytest.raises(TenancyError, match=match):
        call(store)
    assert store.quota_audit() == []


def test_ceiling_below_guarantee_is_refused(store):
    store.create_group("a", "r")
    with pytest.raises(TenancyError, match="ceiling: GPUs ceiling is below the guarantee"):
        store.set_quota("a", "dev", Resources(4, 1, 1), "r", ceiling=Resources(2, 9, 9))


def test_migration_5_adds_the_interactive_cap_to_a_version_4_file(tmp_path):
    from dlc.store import schema

    path = tmp_path / "v4.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, schema.MIGRATIONS[:4])
    db.execute("INSERT INTO user_limits (user, max_running) VALUES ('alice', 3)")
    db.close()
    store = JobStore(path)
    assert store.schema_version == SCHEMA_VERSION
    assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 3)


def test_migration_4_adds_tables_to_a_version_3_file(tmp_path):
    from dlc.store import schema

    path = tmp_path / "v3.db"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, schema.MIGRATIONS[:3])
    db.execute("INSERT INTO meta (key, value) VALUES ('framework_id', 'fw-1')")
    db.close()
    store = JobStore(path)
    assert store.schema_version == SCHEMA_VERSION
    assert store.tenancy_policy().enabled is False
    assert store.framework_id == "fw-1"


def test_fair_usage_rows_round_trip_and_update_in_place(store):
    assert store.fair_usage() == ([], None)
    store.save_fair_usage([UsageRow("a", "alice", 12.5, 100.0), UsageRow("b", "bob", 1.0, 100.0)],
                          100.0)  # fmt: skip
    store.save_fair_usage([UsageRow("a", "alice", 20.25, 160.0)], 160.0)
    rows, at = store.fair_usage()
    assert sorted(rows, key=lambda r: r.group) == [
        UsageRow("a", "alice", 20.25, 160.0),
        UsageRow("b", "bob", 1.0, 100.0),
    ]
    assert at == 160.0


def test_fair_usage_survives_a_reopen_on_both_engines(make_store):
    store = make_store()
    store.save_fair_usage([UsageRow("a", "alice", 3.0, 42.0)], 42.0)
    again = reopen(store)
    try:
        assert again.fair_usage() == ([UsageRow("a", "alice", 3.0, 42.0)], 42.0)
    finally:
        again.close()


@contextmanager
def at_version(engine: str, version: int, tmp_path, request):
    """A database of ``engine`` migrated to ``version`` only: ``(connection, open)``, where
    ``open()`` closes the connection and opens it as a store of this DLC (migrating it)."""
    from dlc.store import schema

    if engine == "sqlite":
        url = tmp_path / f"v{version}.db"
        db = sqlite3.connect(url, isolation_level=None)
        store_type = JobStore
    else:
        from dlc.store.postgres import JobStore as PgJobStore
        from dlc.store.postgres import PgConnection

        url = request.getfixturevalue("postgres").new_db()
        db = PgConnection(url)
        store_type = PgJobStore
    schema.migrate(db, schema.MIGRATIONS[:version])
    opened = []

    def open_store():
        db.close()
        opened.append(store_type(url))
        return opened[-1]

    try:
        yield db, open_store
    finally:
        for store in opened:
            store.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_migration_6_adds_fair_usage_to_a_version_5_database(engine, tmp_path, request):
    from dlc.store import schema

    with at_version(engine, 5, tmp_path, request) as (db, open_store):
        db.execute("INSERT INTO user_limits (user, max_running) VALUES ('alice', 3)")
        assert not schema.has_table(db, "fair_usage")
        store = open_store()
        assert store.schema_version == SCHEMA_VERSION
        assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 3)  # kept
        store.save_fair_usage([UsageRow("a", "alice", 1.5, 7.0)], 7.0)
        assert store.fair_usage() == ([UsageRow("a", "alice", 1.5, 7.0)], 7.0)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_migration_7_adds_the_cpu_limit_to_a_version_6_database(engine, tmp_path, request):
    with at_version(engine, 6, tmp_path, request) as (db, open_store):
        db.execute("INSERT INTO user_limits (user, max_running, max_gpus) VALUES ('alice', 3, 2)")
        store = open_store()
        assert store.schema_version == SCHEMA_VERSION
        # an existing user keeps their limits and gets no CPU cap
        assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 3, 2.0)
        store.set_user_limits(UserLimits("alice", 3, 2.0, max_cpus=16), "root")
        assert store.tenancy_policy().limits["alice"].max_cpus == 16


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_migration_8_adds_the_memory_limit_to_a_version_7_database(engine, tmp_path, request):
    with at_version(engine, 7, tmp_path, request) as (db, open_store):
        db.execute("INSERT INTO user_limits (user, max_running, max_cpus) VALUES ('alice', 3, 8)")
        store = open_store()
        assert store.schema_version == SCHEMA_VERSION == 8
        # an existing user keeps their limits and gets no memory cap
        assert store.tenancy_policy().limits["alice"] == UserLimits("alice", 3, max_cpus=8.0)
        store.set_user_limits(UserLimits("alice", 3, max_cpus=8, max_mem_mib=65536), "root")
        assert store.tenancy_policy().limits["alice"].max_mem_mib == 65536


def test_the_store_knows_a_user_by_their_token_group_or_job_and_names_the_first_two(store):
    assert not store.knows_user("alice") and store.user_names() == []
    store.add_token("alice")
    store.revoke_token(store.add_token("old-timer"))  # a revoked token's user was real
    store.create_group("team-a", "admin")
    store.add_member("team-a", "carol", "admin")
    store.add_job(Job(store.new_job_id(), "dave", JobSpec.from_dict({"image": "busybox"})))
    assert [u for u in ("alice", "old-timer", "carol", "dave") if store.knows_user(u)] == [
        "alice", "old-timer", "carol", "dave"
    ]  # fmt: skip
    assert not store.knows_user("alcie") and not store.knows_user("Alice")
    assert store.user_names() == ["alice", "carol", "old-timer"]  # jobs add no name
