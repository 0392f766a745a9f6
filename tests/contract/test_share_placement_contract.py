"""Contract: DLC's share placement and TaskInfos, accepted and accounted by both masters.

The scheduler's own decisions (:func:`dlc.scheduler.placement.placer.place`) and resources
(:func:`dlc.mesos.task_info.build_task_info`) go to the emulator AND the real Mesos 1.11
master: two 4 GiB shares land on ONE GPU, a whole-GPU job then takes another GPU with its
whole blocks, and ``/master/state`` shows exactly that consumed, nothing given twice.
"""

from __future__ import annotations

from typing import Any

from dlc.mesos.task_info import build_task_info
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.topology.gpu_shares import GPU_CORE, GPU_MEM, STRIDE, normalise, parse_ranges_text
from tests.contract.conftest import GPU_MEM_MIB
from tests.contract.test_emulator_contract import NO_FILTER, new_id
from tests.contract.test_gpu_shares_contract import _states, _used
from tests.scheduler.helpers import place


def _job(job_id: str, **spec: Any) -> Job:
    body = {"image": "busybox", "cpus": 0.1, "mem_mib": 32, **spec}
    return Job(job_id, "alice", JobSpec.from_dict(body))


def _as_command_task(job: Job, launch) -> dict[str, Any]:
    """DLC's TaskInfo with a plain command instead of DLC's executor (same resources)."""
    info = build_task_info(job, launch)
    for key in ("executor", "data"):
        info.pop(key)
    info["command"] = {"value": "sleep 60"}
    return info


def test_two_shares_on_one_gpu_then_a_whole_gpu_elsewhere(harness, mesos_master) -> None:
    framework = harness()
    offer = framework.offer()
    jobs = [
        _job(new_id("share-a"), gpu_memory="4G"),
        _job(new_id("share-b"), gpu_memory="4G"),
    ]
    result = place([offer], jobs)
    assert len(result.launches) == 2
    (gpu,) = {launch.share.gpu_index for launch in result.launches}
    tasks = [_as_command_task(j, x) for j, x in zip(jobs, result.launches, strict=True)]
    assert all(r["name"] not in ("gpus", "gpu_ids") for t in tasks for r in t["resources"])
    framework.driver.launchTasks(offer["id"], tasks, NO_FILTER)
    ids = [t["task_id"]["value"] for t in tasks]
    assert _states(framework, ids) == dict.fromkeys(ids, "TASK_RUNNING")

    whole_job = _job(new_id("whole"), gpus=1)
    for _ in range(5):  # the rest of the agent may come in more than one offer
        offer = framework.offer()
        placed = place([offer], [whole_job])
        if placed.launches:
            break
        framework.driver.declineOffer(offer["id"], NO_FILTER)
    (whole,) = placed.launches
    assert whole.gpu_ids != (gpu,) and len(whole.gpu_ids) == 1
    (other,) = whole.gpu_ids
    framework.driver.launchTasks(offer["id"], [_as_command_task(whole_job, whole)], NO_FILTER)
    assert framework.update(whole.task_id)["state"] == "TASK_RUNNING"

    used = _used(mesos_master)
    assert used["gpus"] == 1 and used["gpu_ids"].strip("{} ") == str(other)
    shared = (gpu * STRIDE, gpu * STRIDE + 8191)
    block = (other * STRIDE, other * STRIDE + GPU_MEM_MIB - 1)
    assert parse_ranges_text(used[GPU_MEM]) == normalise([shared, block])
    assert parse_ranges_text(used[GPU_CORE]) == ((other * STRIDE, other * STRIDE + 999),)
    everything = [*ids, whole.task_id]
    for task_id in everything:
        framework.driver.killTask({"value": task_id})
    assert _states(framework, everything) == dict.fromkeys(everything, "TASK_KILLED")
