"""``add_jobs``: many submits in one transaction, each under a fresh id (both engines)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from dlc.scheduler.jobs.job import JobState
from dlc.store import sqlite
from tests.scheduler.helpers import job


def test_add_jobs_names_each_job_afresh_and_records_its_submit(make_store):
    store = make_store()
    store.add_job(job("jtaken01"))
    added = store.add_jobs([job("jtaken01", gpus=2), job("jtaken01", gpus=3)])
    ids = [j.job_id for j in added]
    assert len(set(ids)) == 2 and "jtaken01" not in ids  # the ids they carried are not used
    assert [store.get_job(i).spec.gpus for i in ids] == [2, 3]
    assert all(store.get_job(i).state is JobState.QUEUED for i in ids)
    assert [(s, m) for _, s, m in store.history(ids[0])] == [("queued", "submitted")]
    assert store.add_jobs([]) == []


def test_add_jobs_draws_again_for_an_id_already_taken(make_store, monkeypatch):
    store = make_store()
    store.add_job(job("j00000001"))
    drawn = itertools.chain(["00000001", "00000001", "00000002"], itertools.repeat("00000003"))
    monkeypatch.setattr(sqlite.secrets, "token_hex", lambda n: next(drawn))
    [added] = store.add_jobs([job("x")])
    assert added.job_id == "j00000002"


def test_add_jobs_as_keeps_the_ids_and_stores_a_retried_batch_once(make_store):
    import pytest

    from dlc.errors import StoreError

    store = make_store()
    ids = store.new_job_ids(2)
    batch = [job(ids[0], gpus=2), job(ids[1], gpus=3)]
    first = store.add_jobs_as(batch)
    assert [j.job_id for j in first] == ids
    again = store.add_jobs_as(batch)  # the retry after a lost COMMIT answer
    assert [(j.job_id, j.spec.gpus) for j in again] == [(ids[0], 2), (ids[1], 3)]
    assert sorted(j.job_id for j in store.list_jobs()) == sorted(ids)
    assert len(store.history(ids[0])) == 1
    with pytest.raises(StoreError, match="are taken"):  # someone else's id: refused
        store.add_jobs_as([replace(job(ids[0]), user="mallory")])
