"""``save_jobs``: an offer round's launches in one transaction (both engines), and the
field-by-field encoding that replaced ``dataclasses.asdict`` (the same bytes)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest

from dlc.errors import JobNotFound
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement
from dlc.store.rows import decode_job, encode_job
from tests.scheduler.helpers import job


def _staged(j: Job, agent: str = "a1") -> Job:
    task = TaskPlacement(f"{j.job_id}.0.0", agent, "h1", (0, 1), "o1", share_gpu=None)
    return replace(j, state=JobState.STAGING, tasks=(task,), message=f"launching on {agent}")


def test_save_jobs_writes_every_job_and_a_history_entry_per_state_change(make_store):
    store = make_store()
    a, b = store.add_jobs([job("x"), job("y")])
    c = store.add_job(job("jmessage1"))
    saved = store.save_jobs([_staged(a), _staged(b, "a2"), replace(c, message="waiting")])
    assert [j.job_id for j in saved] == [a.job_id, b.job_id, c.job_id]
    for want in saved:
        assert store.get_job(want.job_id) == want
    assert [(s, m) for _, s, m in store.history(a.job_id)] == [
        ("queued", "submitted"),
        ("staging", "launching on a1"),
    ]
    assert [s for _, s, _ in store.history(c.job_id)] == ["queued"]  # a message alone: none
    assert store.save_jobs([]) == []


def test_save_jobs_is_all_or_nothing(make_store):
    store = make_store()
    a = store.add_job(job("jknown001"))
    with pytest.raises(JobNotFound, match="jnothere1"):
        store.save_jobs([_staged(a), _staged(job("jnothere1"))])
    assert store.get_job(a.job_id).state is JobState.QUEUED
    assert [s for _, s, _ in store.history(a.job_id)] == ["queued"]


def _asdict_spec(spec: JobSpec) -> dict:
    """JobSpec.to_dict as it was written with ``dataclasses.asdict`` (the stored format)."""
    body = asdict(spec)
    body["command"] = list(spec.command)
    body["volumes"] = [asdict(v) for v in spec.volumes]
    if spec.nodes_max is None:
        del body["nodes_max"]
    return body


def _asdict_task(task: TaskPlacement) -> dict:
    body = asdict(task)
    body["gpu_ids"] = list(task.gpu_ids)
    if not task.rendezvous:
        del body["rendezvous"]
    return body


_SPECS = [
    {"image": "busybox"},
    {"image": "busybox", "gpus": 4, "nodes": 2, "command": ["python", "t.py"],
     "env": {"B": "2", "A": "1"}, "volumes": ["/data:/data:ro", "/scratch:/s:rw"],
     "priority": 3, "name": "n", "pool": "p", "gang_topology": "switch"},
    {"image": "busybox", "gpu_fraction": 0.25, "gpu_memory": 4096, "nodes": 1},
    {"image": "busybox", "nodes": 2, "nodes_max": 4},
]  # fmt: skip


@pytest.mark.parametrize("data", _SPECS)
def test_the_encoding_is_byte_for_byte_the_asdict_one_and_reads_back(data):
    spec = JobSpec.from_dict(data)
    tasks = (
        TaskPlacement("t.0.0", "a1", "h1", (0, 3), "o1", 0, rendezvous="h1:29500"),
        TaskPlacement("t.0.1", "a2", "h2", (), "o2", 1, share_gpu=2, share_memory_mib=512,
                      share_core_milli=250),
    )  # fmt: skip
    j = Job("jabcdef01", "alice", spec, state=JobState.STAGING, submitted_at=5.0, tasks=tasks)
    row = encode_job(j)
    assert row["spec"] == json.dumps(_asdict_spec(spec), sort_keys=True)
    assert row["tasks"] == json.dumps([_asdict_task(t) for t in tasks])
    back, warnings = decode_job({**row, "updated_at": 0.0})
    assert back == j and not warnings
