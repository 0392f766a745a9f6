"""Contract: GPU shares as RANGES, on the emulator AND the real Mesos 1.11 master.

Two shares take parts of GPU 0's ``gpu_mem``/``gpu_core`` blocks, the next offer holds exactly
the rest, a whole-GPU task takes ``gpus:1``, ``gpu_ids:{1}`` and GPU 1's whole blocks,
``/master/state`` shows all of it used, and a task asking more than is left is refused with
TASK_ERROR (what the real master does). The ranges come from :mod:`dlc.topology.gpu_shares`,
the helpers the scheduler uses.
"""

from __future__ import annotations

import json
import queue
import time
import urllib.request
from typing import Any

from dlc.topology.gpu_shares import (
    GPU_CORE,
    GPU_MEM,
    GpuRanges,
    amounts,
    normalise,
    parse_ranges_text,
    per_gpu,
    ranges_from_resources,
    share_take,
    subtract,
    whole_gpu_take,
)
from tests.contract.conftest import EVENT_TIMEOUT, GPU_MEM_MIB
from tests.contract.test_emulator_contract import NO_FILTER, new_id, task_info


def _ranges(offer: dict[str, Any]) -> tuple:
    resources = offer["resources"]
    return ranges_from_resources(resources, GPU_MEM), ranges_from_resources(resources, GPU_CORE)


def _with(info: dict[str, Any], take: GpuRanges) -> dict[str, Any]:
    info["resources"] += take.resources_json()
    return info


def _used(master: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{master}/master/state", timeout=10) as response:
        (agent,) = json.load(response)["slaves"]
    return agent["used_resources"]


def _states(framework, task_ids: list[str]) -> dict[str, str]:
    """The next state of each task, whatever order the updates arrive in."""
    states: dict[str, str] = {}
    deadline = time.monotonic() + EVENT_TIMEOUT
    while len(states) < len(task_ids) and time.monotonic() < deadline:
        try:
            status = framework.recorder.updates.get(timeout=0.5)
        except queue.Empty:
            continue
        task_id = status["task_id"]["value"]
        if task_id in task_ids and task_id not in states:
            states[task_id] = status["state"]
    return states


def _next_offer_with(framework, want_mem, want_core):
    """Offers until one holds exactly the given ranges (a launch's rest may come split)."""
    for _ in range(5):
        offer = framework.offer()
        if _ranges(offer) == (want_mem, want_core):
            return offer
        framework.driver.declineOffer(offer["id"], NO_FILTER)
    raise AssertionError(f"no offer with gpu_mem {want_mem} and gpu_core {want_core}")


def test_shares_and_a_whole_gpu_are_accounted_by_the_master(harness, mesos_master) -> None:
    framework = harness()
    offer = framework.offer()
    mem, core = _ranges(offer)
    assert amounts(mem) == dict.fromkeys(range(4), GPU_MEM_MIB)
    assert amounts(core) == dict.fromkeys(range(4), 1000)

    first = share_take(0, 4096, 250, mem, core)
    after_first = (subtract(mem, first.mem), subtract(core, first.core))
    second = share_take(0, 4096, 250, *after_first)
    ids = [new_id("share-a"), new_id("share-b")]
    tasks = [
        _with(task_info(offer, ids[0], command="sleep 60"), first),
        _with(task_info(offer, ids[1], command="sleep 60"), second),
    ]
    framework.driver.launchTasks(offer["id"], tasks, NO_FILTER)
    assert _states(framework, ids) == dict.fromkeys(ids, "TASK_RUNNING")

    rest_mem = subtract(after_first[0], second.mem)
    rest_core = subtract(after_first[1], second.core)
    assert per_gpu(rest_mem)[0] == ((8192, GPU_MEM_MIB - 1),)
    assert per_gpu(rest_core)[0] == ((500, 999),)
    offer = _next_offer_with(framework, rest_mem, rest_core)

    whole = whole_gpu_take([1], rest_mem, rest_core)
    whole_id = new_id("whole")
    info = task_info(offer, whole_id, command="sleep 60", gpus=1, gpu_ids=["1"])
    framework.driver.launchTasks(offer["id"], [_with(info, whole)], NO_FILTER)
    assert framework.update(whole_id)["state"] == "TASK_RUNNING"

    used = _used(mesos_master)
    assert used["gpus"] == 1 and used["gpu_ids"].strip("{} ") == "1"
    assert parse_ranges_text(used[GPU_MEM]) == normalise(first.mem + second.mem + whole.mem)
    assert parse_ranges_text(used[GPU_CORE]) == ((0, 499), *whole.core)

    left_mem, left_core = subtract(rest_mem, whole.mem), subtract(rest_core, whole.core)
    offer = _next_offer_with(framework, left_mem, left_core)
    assert 1 not in per_gpu(left_mem) and amounts(left_mem)[0] == GPU_MEM_MIB - 8192

    # 10 GiB more on GPU 0, where 8 GiB are left: the master refuses the task.
    over_id = new_id("over")
    over = GpuRanges(((8192, 8192 + 10240 - 1),), ((500, 599),))
    framework.driver.launchTasks(offer["id"], [_with(task_info(offer, over_id), over)], NO_FILTER)
    status = framework.update(over_id)
    assert (status["state"], status["reason"]) == ("TASK_ERROR", "REASON_TASK_INVALID")
    assert status["source"] == "SOURCE_MASTER" and "more than available" in status["message"]
    # Nothing of the refused task was consumed.
    offer = _next_offer_with(framework, left_mem, left_core)
    for task_id in [*ids, whole_id]:
        framework.driver.killTask({"value": task_id})
    assert _states(framework, [*ids, whole_id]) == dict.fromkeys([*ids, whole_id], "TASK_KILLED")
