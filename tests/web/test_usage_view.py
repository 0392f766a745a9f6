"""Allocated versus used on ``/metrics`` and in the dashboard snapshot (a GPU share included)."""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.tasks.usage import GpuUsage, encode_report
from dlc.web.snapshot import add_usage, build_snapshot
from tests.scheduler.placement.test_share_placement import ranged_offer
from tests.web.test_metrics import samples, status

TOTAL = 81559
MIB = 1 << 20


def _gpu_labels(gpu: int) -> frozenset:
    return frozenset({"agent": "a1", "hostname": "host-a1", "gpu": str(gpu)}.items())


def _run_share_and_whole(core):
    """A 4 GiB share and a whole GPU running on a1; the share reports, the whole GPU not yet."""
    share = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpu_memory": "4G"}))
    whole = core.submit("bob", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    queued = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 8}))
    [(_, infos)] = core.on_offers([ranged_offer("o1", "a1", gpus=2, mem_gib=32)]).accepts
    tasks = {i["task_id"]["value"].rsplit(".", 2)[0]: i["task_id"]["value"] for i in infos}
    for task_id in tasks.values():
        core.on_status(status(task_id, "TASK_RUNNING"))
    share_gpu = next(t.share_gpu for j in core.active_jobs() for t in j.tasks
                     if t.share_gpu is not None)  # fmt: skip
    reading = GpuUsage(share_gpu, 37.5, 80, 2100, TOTAL, 1542, 6, 1000.0)
    assert core.on_usage("a1", encode_report({tasks[share.job_id]: [reading]})) == 1
    return share, whole, queued, share_gpu


def test_metrics_show_used_next_to_allocated_without_user_labels_by_default(monitored):
    core, metrics = monitored
    share, _, _, gpu = _run_share_and_whole(core)
    got = samples(metrics)
    assert got[("dlc_gpu_allocated", _gpu_labels(gpu))] == 1
    assert got[("dlc_gpu_allocated", _gpu_labels(1 - gpu))] == 1
    assert got[("dlc_gpu_utilization_pct", _gpu_labels(gpu))] == 37.5
    assert got[("dlc_gpu_memory_used_bytes", _gpu_labels(gpu))] == 2100 * MIB
    assert ("dlc_gpu_utilization_pct", _gpu_labels(1 - gpu)) not in got  # no reading yet
    assert got[("dlc_gpu_idle", _gpu_labels(gpu))] == 0
    # the whole GPU, and the share as its part of a GPU (as quotas charge it)
    assert got[("dlc_group_gpus_allocated", frozenset({"group": "-"}.items()))] == 1.125
    # /metrics is unauthenticated: no user names or job ids unless the operator asks
    assert not [name for name, _ in got if name.startswith(("dlc_user_", "dlc_job_"))]
    metrics.tenant_labels = True
    got = samples(metrics)
    assert got[("dlc_user_gpus_allocated", frozenset({"user": "bob"}.items()))] == 1
    assert got[("dlc_job_gpu_utilization_pct", frozenset({"job": share.job_id}.items()))] == 37.5


def test_snapshot_carries_used_per_gpu_and_usage_per_job(monitored):
    core, _ = monitored
    share, whole, queued, gpu = _run_share_and_whole(core)
    snapshot = add_usage(build_snapshot(core.all_jobs(), core.cluster(), "alice", False, 2000.0,
                                        {}, {}), core)  # fmt: skip
    (agent,) = snapshot["agents"]
    used = {g["index"]: g["used"] for g in agent["gpus"]}
    assert used[gpu] == {"util_pct": 38, "mem_used_mib": 2100, "mem_total_mib": TOTAL,
                         "sampled_at": 1000.0}  # fmt: skip
    assert used[1 - gpu] is None  # allocated to bob, not reported yet
    jobs = {j["id"]: j for j in snapshot["jobs"]}
    assert jobs[share.job_id]["usage"] == {"util_pct": 37.5, "mem_used_mib": 1542,
                                          "sampled_at": 1000.0}  # fmt: skip
    assert jobs[queued.job_id]["usage"] is None
    assert whole.job_id not in jobs  # bob's job: alice does not see it
