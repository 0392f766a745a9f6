"""Snapshot storage per user is bounded (red-team 2026-11-23).

Every ``POST /v1/workdirs`` without a blob id made a new file under ``<db>.blobs`` and nothing
ever removed one, so one user could fill the scheduler's disk 64 MiB at a time. Now a user
keeps at most 32: before a new upload, their oldest snapshots that no queued or running job
uses (and that are over an hour old) are deleted; if none can go, the upload is refused.
"""

from __future__ import annotations

import base64
import os

import pytest

from dlc.api.client import ApiClient
from dlc.api.env_routes import EnvContext
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.errors import ApiError, DlcError
from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.store.blobs import BlobStore
from dlc.store.sqlite import JobStore

NOW = 1_900_000_000.0


def _blobs(store: BlobStore, owner: str, n: int, age_s: float) -> list[str]:
    made = []
    for i in range(n):
        blob = store.create(owner)
        store.append(blob, owner, b"x")
        when = NOW - age_s - (n - i)  # oldest first
        os.utime(store.root / f"{blob}.tgz", (when, when))
        made.append(blob)
    return made


def test_old_unused_snapshots_make_room_oldest_first(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    mine = _blobs(store, "alice", 4, age_s=7200)
    theirs = _blobs(store, "bob", 4, age_s=7200)
    store.make_room("alice", in_use={mine[0]}, now=NOW, max_blobs=4)
    assert [b for _, b in store.owned("alice")] == [mine[0], *mine[2:]]  # mine[1] went
    assert [b for _, b in store.owned("bob")] == theirs  # another user's are untouched


def test_snapshots_in_use_or_recent_are_kept_and_the_upload_refused(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    used = _blobs(store, "alice", 2, age_s=7200)
    _blobs(store, "alice", 2, age_s=60)  # uploaded a minute ago: a submit may follow
    with pytest.raises(DlcError, match="already keeps 4 snapshots"):
        store.make_room("alice", in_use=set(used), now=NOW, max_blobs=4)
    assert len(store.owned("alice")) == 4


def test_the_api_refuses_the_33rd_fresh_snapshot_of_one_user(tmp_path):
    core = SchedulerCore(JobStore(tmp_path / "db"), resolver=lambda s: (s.image, None))
    server = ApiServer(core, LogReader(lambda: None), lambda a: None)
    server.env = EnvContext(BlobStore(tmp_path / "db.blobs"), "key")
    server.start()
    try:
        alice = ApiClient(server.url, core.store.add_token("alice"))
        bob = ApiClient(server.url, core.store.add_token("bob"))
        chunk = {"data": base64.b64encode(b"snapshot").decode()}
        blobs = [alice._call("POST", "/v1/workdirs", chunk)["blob"] for _ in range(32)]
        with pytest.raises(ApiError, match="alice already keeps 32 snapshots"):
            alice._call("POST", "/v1/workdirs", chunk)
        assert bob._call("POST", "/v1/workdirs", chunk)["size"] == 8  # others still upload
        core.submit("alice", JobSpec.from_dict({"image": "x", "workdir": blobs[0]}))
        assert len(server.env.blobs.owned("alice")) == 32
    finally:
        server.stop()
        core.store.close()


def test_concurrent_first_chunks_cannot_pass_the_cap(tmp_path):
    """Red-team 2026-11-26: 48 first chunks at once took a user from 2 snapshots to 41 (the
    count and the create were apart). Now exactly the 30 that fit are made; the rest refused."""
    from concurrent.futures import ThreadPoolExecutor

    core = SchedulerCore(JobStore(tmp_path / "db"), resolver=lambda s: (s.image, None))
    server = ApiServer(core, LogReader(lambda: None), lambda a: None)
    server.env = EnvContext(BlobStore(tmp_path / "db.blobs"), "key")
    _blobs(server.env.blobs, "alice", 2, age_s=60)  # recent: neither may be reclaimed
    _blobs(server.env.blobs, "bob", 200, age_s=60)  # a longer count: the race shows each run
    server.start()
    try:
        alice = ApiClient(server.url, core.store.add_token("alice"))
        chunk = {"data": base64.b64encode(b"snapshot").decode()}

        def upload(_):
            try:
                return alice._call("POST", "/v1/workdirs", chunk)["blob"]
            except ApiError as exc:
                return str(exc)

        with ThreadPoolExecutor(48) as pool:
            results = list(pool.map(upload, range(48), timeout=120))
        made = [r for r in results if len(r) == 32 and "snapshots" not in r]
        refused = [r for r in results if "alice already keeps 32 snapshots" in r]
        assert (len(made), len(refused)) == (30, 18), results
        assert len(server.env.blobs.owned("alice")) == 32
    finally:
        server.stop()
        core.store.close()
