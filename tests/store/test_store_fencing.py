"""HA on both engines: the leader epoch fences writes; PostgreSQL connection loss is clean."""

from __future__ import annotations

import pytest

from dlc.errors import StoreError
from dlc.scheduler.jobs.job import JobState
from tests.scheduler.helpers import job
from tests.store.conftest import reopen


def test_a_new_leader_epoch_refuses_every_write_of_the_old_leader(make_store):
    old = make_store()
    assert old.claim_epoch() == 1
    queued = old.add_job(job("j1"))
    new = reopen(old)
    assert new.claim_epoch() == 2
    with pytest.raises(StoreError, match="no longer the leader") as err:
        old.save_job(queued.with_state(JobState.STAGING, "launch"))
    assert err.value.kind == "fenced"
    with pytest.raises(StoreError, match="no longer the leader"):
        old.add_job(job("j2"))
    assert new.get_job("j1").state is JobState.QUEUED  # nothing of the refused write
    new.save_job(queued.with_state(JobState.STAGING, "launch"))
    assert [j.job_id for j in new.list_jobs()] == ["j1"]
    assert old.get_job("j1").state is JobState.STAGING  # reads still work on a standby


def test_fence_stops_writes_at_once(make_store):
    store = make_store()
    store.claim_epoch()
    store.fence()
    with pytest.raises(StoreError) as err:
        store.add_job(job("j1"))
    assert err.value.kind == "fenced" and "\n" not in str(err.value)


def test_schema_migrations_are_the_same_list_on_both_engines(make_store):
    from dlc.store.schema import SCHEMA_VERSION

    assert make_store().schema_version == SCHEMA_VERSION


def test_a_dropped_postgres_connection_is_retried_transparently(postgres):
    from dlc.store.postgres import JobStore

    url = postgres.new_db()
    store = JobStore(url)
    store.add_job(job("j1"))
    assert postgres.terminate_connections(url) >= 1
    assert store.get_job("j1").job_id == "j1"  # reconnected, no traceback
    store.add_job(job("j2"))
    assert [j.job_id for j in store.list_jobs()] == ["j1", "j2"]
    store.close()


def test_an_unreachable_postgres_is_one_transient_line(monkeypatch):
    from dlc.store import postgres as pg
    from tests.services import free_port

    monkeypatch.setattr(pg, "RETRY_S", 0.5)
    with pytest.raises(StoreError) as err:
        pg.JobStore(f"postgresql://dlc:secret@127.0.0.1:{free_port()}/dlc")
    assert err.value.kind == "unavailable" and err.value.transient
    assert "\n" not in str(err.value) and "secret" not in str(err.value)
    assert "cannot be reached" in str(err.value)
