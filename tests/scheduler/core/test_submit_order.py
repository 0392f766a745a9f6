"""Jobs submitted at one clock instant run in submit order, whatever their (random) ids: two
identical simulations through the core place the same jobs on the same GPUs."""

from __future__ import annotations

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.memory import MemoryJobStore

from ..helpers import offer

#: (GPUs, cpus) of the batch, in submit order: more than the two agents' 12 GPUs
BATCH = [(1, 1), (2, 2), (1, 1), (4, 2), (1, 3), (2, 1), (1, 1), (3, 2), (1, 1), (2, 2),
         (1, 2), (4, 1), (1, 1), (2, 1), (1, 1), (1, 1)]  # fmt: skip


def _simulate() -> tuple[list[int], dict[int, tuple[str, tuple[int, ...]]]]:
    """One round over a batch submitted at one virtual instant, on a store with random job
    ids (as the SQLite store has): (submit indices placed, index -> (agent, GPU ids))."""
    clock = lambda: 1000.0  # noqa: E731 - a virtual clock that does not move
    store = MemoryJobStore(clock=clock)
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    core = SchedulerCore(store, config, lambda spec: (spec.image, None), clock=clock)
    offers = [offer("o1", "a1", list(range(8))), offer("o2", "a2", list(range(4)))]
    core.on_offers([])  # nothing known yet: the batch is admitted against no agent
    index = {}
    for k, (gpus, cpus) in enumerate(BATCH):
        spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": cpus})
        index[core.submit(f"user{k % 3}", spec).job_id] = k
    actions = core.on_offers(offers)
    placed = {}
    for _, infos in actions.accepts:
        for info in infos:
            job_id = info["task_id"]["value"].split(".")[0]
            gpus = next(r for r in info["resources"] if r["name"] == "gpu_ids")
            placed[index[job_id]] = (info["agent_id"]["value"], tuple(sorted(gpus["set"]["item"])))
    return sorted(placed), placed


def test_a_batch_at_one_instant_runs_in_submit_order():
    order, _ = _simulate()
    # submit order, first come first placed while GPUs last (backfill after the first miss)
    assert order[:5] == [0, 1, 2, 3, 4]
    assert len(order) < len(BATCH)  # the batch does not all fit: the order decides


def test_identical_simulations_place_identically():
    runs = [_simulate()[1] for _ in range(3)]
    assert runs[0] and runs[0] == runs[1] == runs[2]
