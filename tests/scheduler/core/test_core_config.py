"""One source for the executor's overhead: what placement reserves is what the executor asks."""

from __future__ import annotations

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.memory import MemoryJobStore

from ..helpers import job, offer


def test_executor_info_asks_for_the_overhead_placement_reserved():
    placement = PlacementConfig(executor_cpus=0.5, executor_mem_mib=100.0)
    core = SchedulerCore(
        MemoryJobStore(), CoreConfig(placement=placement), resolver=lambda s: (s.image, None)
    )
    core.submit("alice", job("x").spec)
    (accept,) = core.on_offers([offer("o1", "a1", [0])]).accepts
    (task,) = accept[1]
    resources = {r["name"]: r["scalar"]["value"] for r in task["executor"]["resources"]}
    assert resources == {"cpus": 0.5, "mem": 100.0}
    assert core.config.executor.cpus == 0.5 and core.inventory.overheads.mem_mib == 100.0
