"""``/metrics`` shows memory, compute and shares allocated per GPU (issue 12)."""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec
from tests.scheduler.placement.test_share_placement import ranged_offer
from tests.web.test_metrics import samples, status

GIB = 1 << 30


def _labels(gpu: int) -> frozenset:
    return frozenset({"agent": "a1", "hostname": "host-a1", "gpu": str(gpu)}.items())


def test_shares_and_whole_gpus_are_counted_per_gpu(monitored):
    core, metrics = monitored
    for spec in ({"gpu_memory": "4G"}, {"gpus": 0.5}, {"gpus": 1}):
        core.submit("alice", JobSpec.from_dict({"image": "busybox", "cpus": 0.1, **spec}))
    actions = core.on_offers([ranged_offer("o1", "a1", gpus=2, mem_gib=32)])
    [(_, infos)] = actions.accepts
    assert len(infos) == 3
    for info in infos:
        core.on_status(status(info["task_id"]["value"], "TASK_RUNNING"))
    got = samples(metrics)
    shared = [g for g in (0, 1) if got[("dlc_gpu_shares", _labels(g))] == 2]
    (gpu,) = shared
    other = 1 - gpu
    assert got[("dlc_gpu_memory_allocated_bytes", _labels(gpu))] == (4 + 16) * GIB
    assert got[("dlc_gpu_compute_allocated_ratio", _labels(gpu))] == 0.5
    assert got[("dlc_gpu_shares", _labels(other))] == 0
    assert got[("dlc_gpu_compute_allocated_ratio", _labels(other))] == 1.0
