"""Allocated versus used, scheduler side: the report contract, aggregation, idle detection."""

from __future__ import annotations

import base64
import json

from dlc.scheduler.tasks.usage import (
    GpuUsage,
    TaskUsage,
    UsageBook,
    decode_report,
    encode_report,
    is_idle,
    job_usage,
    rollup,
)

TOTAL = 81559  # the real H100's memory in all (tests/topology/data/h100-x1)


def _gpu(index=0, util=50.0, top=90, used=1542, task=1542, n=6, at=100.0):
    return GpuUsage(index, util, top, used, TOTAL, task, n, at)


def test_report_round_trips():
    gpus = [_gpu(0), _gpu(1, util=None, top=None, task=None)]
    (task,) = decode_report(encode_report({"t1": gpus}), "agent-1")
    assert task == TaskUsage("t1", "agent-1", tuple(gpus))


def test_unreadable_reports_and_entries_are_dropped_not_raised():
    assert decode_report("not base64 !", "a") == []
    assert decode_report(base64.b64encode(b"[1, 2]").decode(), "a") == []
    assert decode_report("A" * 70000, "a") == []
    body = {"v": 9, "tasks": {"t1": [{"i": "x"}, {"i": 0, "mem": 1, "total": 2, "at": 3.0,
                                                  "new_field": True}], "t2": "junk"}}  # fmt: skip
    (task,) = decode_report(base64.b64encode(json.dumps(body).encode()).decode(), "a")
    assert task.gpus == (GpuUsage(0, None, None, 1, 2, None, 1, 3.0),)


def test_idle_needs_a_full_enough_window_under_the_threshold():
    assert is_idle([_gpu(util=0.5, top=2, n=6)])
    assert not is_idle([_gpu(util=0.5, top=2, n=2)])  # too few samples to tell
    assert not is_idle([_gpu(util=1.0, top=60)])  # one busy sample in the window
    assert not is_idle([_gpu(util=None, top=None)])  # NVML did not say
    assert not is_idle([])


def test_job_usage_averages_gpus_and_sums_the_tasks_memory():
    busy = _gpu(0, util=80.0, task=10000)
    unmapped = _gpu(1, util=40.0, task=None, used=2000, at=90.0)  # device memory counts
    a = TaskUsage("t1", "a1", (busy, unmapped))
    usage = job_usage([a])
    assert (usage.util_pct, usage.mem_used_mib, usage.gpus, usage.sampled_at) == (
        60.0, 12000, 2, 90.0)  # fmt: skip
    assert usage.mem_total_mib == 2 * TOTAL and not usage.idle
    assert job_usage([]) is None


def test_rollup_counts_allocated_sampled_and_idle_gpus_per_key():
    idle = TaskUsage("t2", "a1", (_gpu(util=0.0, top=0, task=600),))
    held = [("ann", 2, TaskUsage("t1", "a1", (_gpu(0, util=90.0), _gpu(1, util=70.0)))),
            ("bob", 1, idle), ("bob", 4, None)]  # fmt: skip
    by_user = {r.key: r for r in rollup(held, lambda u: u)}
    assert (by_user["ann"].gpus_allocated, by_user["ann"].util_pct) == (2, 80.0)
    assert (by_user["bob"].gpus_allocated, by_user["bob"].gpus_sampled) == (5, 1)
    assert (by_user["bob"].gpus_idle, by_user["bob"].mem_used_mib) == (1, 600)
    (group,) = rollup(held, lambda u: "vision")
    assert (group.gpus_allocated, group.gpus_idle, group.util_pct) == (7, 1, round(160 / 3, 1))


def test_book_keeps_live_tasks_only():
    book = UsageBook()
    readings = [TaskUsage("t1", "a1", (_gpu(),)), TaskUsage("t2", "a2", (_gpu(),))]
    assert book.record(readings, lambda t, a: (t, a) == ("t1", "a1")) == 1
    assert book.of("t1") is not None and book.of("t2") is None
    book.prune(lambda t: False)
    assert book.tasks() == []
