"""The offer round's agent indexes (share room arrays, free whole GPUs) against a full scan,
after random changes to the agents (issue 26: an index that drifts from what the agents
hold would place on the wrong agent, or on none)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dlc.mesos.offers import offer_view
from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.placement import share_index
from dlc.scheduler.placement.agent_facts import default_topology_of
from dlc.scheduler.placement.share_placement import _slot_amounts, choose_share, share_room
from dlc.scheduler.placement.slots import Slot
from dlc.scheduler.placement.whole_score import FreeGpus, WholeScore, demand_mix
from dlc.topology import gpu_shares
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job


def _slots(rng: random.Random, agents: int) -> list[Slot]:
    slots = []
    for n in range(agents):
        used = {i: (rng.randrange(0, 30) * 1024, rng.randrange(0, 1000))
                for i in range(8) if rng.random() < 0.5}  # fmt: skip
        taken = tuple(i for i in range(8) if i not in used and rng.random() < 0.2)
        body = ranged_offer(f"o{n}", f"a{n:03d}", gpus=rng.choice([4, 8]),
                            mem_gib=rng.choice([16, 32]), used=used, whole_taken=taken)  # fmt: skip
        body["resources"][0]["scalar"]["value"] = rng.choice([0.5, 2.0, 8.0])  # cpus
        slots.append(Slot([offer_view(body)]))
    return slots


def _change(rng: random.Random, slot: Slot) -> None:
    """A random change of one agent, through the slot's own methods (as placement makes)."""
    roll = rng.random()
    if roll < 0.4 and slot.gpu_core:
        blocks = gpu_shares.per_gpu(slot.gpu_core)
        index = rng.choice(sorted(blocks))
        mem_left = sum(e - b + 1 for b, e in gpu_shares.per_gpu(slot.gpu_mem).get(index, ()))
        core_left = sum(e - b + 1 for b, e in blocks[index])
        core = 0 if rng.random() < 0.3 else rng.randrange(0, core_left + 1)  # memory-only
        take = gpu_shares.share_take(
            index, rng.randrange(0, mem_left + 1), core, slot.gpu_mem, slot.gpu_core
        )
        slot.take_ranges(take)
        if rng.random() < 0.3:
            slot.give_ranges(take)  # a gang that did not fit gives its ranges back
    elif roll < 0.7 and slot.free:
        ids = tuple(sorted(rng.sample(sorted(slot.free), rng.randrange(1, len(slot.free) + 1))))
        slot.take(0.1, 64, 0, ids, +1)
        slot.take_ranges(slot.whole_take(ids))
    else:
        slot.take(rng.choice([0.1, 0.5]), rng.choice([64, 1024]), 0, (), +1)


def _room(slot: Slot) -> int:
    return max(gpu_shares.amounts(slot.gpu_core).values())


def _rows(room: share_index.ShareRoom, slots: list[Slot]) -> None:
    """Every row of ``room`` equals a fresh read of its slot."""
    for k, slot in enumerate(slots):
        assert (room.cpus[k], room.mem[k], room.disk[k]) == (slot.cpus, slot.mem, slot.disk)
        assert room.has_core[k] == bool(slot.gpu_core)
        free_mem, free_core, totals = _slot_amounts(slot, None) if slot.gpu_core else ({}, {}, {})
        present = {int(i) for i in room.present[k].nonzero()[0]}
        assert present == set(free_core)
        for i in free_core:
            assert room.free_core[k, i] == free_core[i]
            assert room.free_mem[k, i] == free_mem.get(i, 0)
            assert room.total[k, i] == totals[i]


@pytest.mark.parametrize("seed", range(6))
def test_the_share_room_agrees_with_a_full_scan_after_random_changes(seed):
    rng = random.Random(seed)
    slots = _slots(rng, 40)
    room = share_room(slots, default_topology_of)
    for slot in slots:
        slot.share_room = room
    for _ in range(150):
        _change(rng, rng.choice(slots))
        milli = rng.randrange(0, 1001)
        brute = [s for s in slots if s.gpu_core and _room(s) >= milli]
        assert room.at_least(milli) == brute
    _rows(room, slots)


def _hold(barred: set[tuple[str, int]]):
    def hold(milli: int):
        return (lambda agent_id, gpu: (agent_id, gpu) in barred), "held"

    return hold


def _answer(choice):
    if isinstance(choice, str):
        return choice
    return choice.slot.agent_id, choice.gpu_index, choice.memory_mib, choice.core_milli, choice.take


@pytest.mark.parametrize("seed", range(6))
def test_a_share_chosen_on_the_arrays_is_the_full_scans_choice(seed):
    rng = random.Random(100 + seed)
    slots = _slots(rng, 30)
    room = share_room(slots, default_topology_of)
    for slot in slots:
        slot.share_room = room
    model = lambda slot: ""  # noqa: E731
    for n in range(120):
        _change(rng, rng.choice(slots))
        ask = rng.choice([{"gpus": rng.choice([0.05, 0.1, 0.25, 0.5, 0.7, 0.95])},
                          {"gpu_memory": rng.choice(["1G", "4G", "12G", "20G"])},
                          {"gpus": 0.3, "gpu_memory": "6G"}])  # fmt: skip
        spec = share_job(f"s{n}", **ask).spec
        cpus, mem = rng.choice([0.2, 1.0, 4.0]), rng.choice([128.0, 2048.0])
        held = None
        if rng.random() < 0.3:  # the share hold bars some whole GPUs
            held = _hold({(s.agent_id, i) for s in slots for i in range(8) if rng.random() < 0.5})
        arrays = choose_share(spec, slots, cpus, mem, default_topology_of, model, None, held,
                              room)  # fmt: skip
        scan = choose_share(spec, list(slots), cpus, mem, default_topology_of, model, None, held,
                            None)  # fmt: skip
        assert _answer(arrays) == _answer(scan)


@pytest.mark.parametrize("seed", range(6))
def test_free_gpus_agrees_with_a_full_scan_after_random_changes(seed):
    rng = random.Random(200 + seed)
    slots = _slots(rng, 40)
    index = FreeGpus(slots)
    for slot in slots:
        slot.free_index = index
    for _ in range(200):
        slot = rng.choice(slots)
        if slot.free and rng.random() < 0.6:
            ids = tuple(rng.sample(sorted(slot.free), 1))
            slot.take(0.1, 64, 0, ids, +1)
            if rng.random() < 0.3:
                slot.take(0.1, 64, 0, ids, -1)  # given back (a gang that did not fit)
        else:
            _change(rng, slot)
        gpus = rng.randrange(0, 9)
        brute = sorted((s for s in slots if len(s.free) >= gpus),
                       key=lambda s: (len(s.free), s.agent_id))  # fmt: skip
        assert index.at_least(gpus) == brute
        among = rng.sample(slots, rng.randrange(0, len(slots) + 1))  # the agents that grew
        assert index.holds(among)
        assert index.at_least(gpus, among) == [s for s in brute if s in among]
    assert not index.holds([*slots, _slots(rng, 1)[0]])  # a slot of no index


@pytest.mark.parametrize("seed", range(4))
def test_whole_score_orders_as_a_full_sort_after_random_changes(seed):
    rng = random.Random(300 + seed)
    slots = _slots(rng, 40)
    mix = demand_mix([(1000, 1000, 1), (2000, 1000, 2), (500, 300, 1), (4000, 1000, 4)] * 3)
    score = WholeScore(slots, mix)
    for slot in slots:
        slot.whole_score = score
    for _ in range(60):
        _change(rng, rng.choice(slots))
        gpus, cpus = rng.choice([1, 2, 4]), rng.choice([0.5, 2.0])
        candidates = [s for s in slots if len(s.free) >= gpus]
        rng.shuffle(candidates)  # any order in: the answer is the sort's
        ordered = score.order(candidates, gpus, cpus, 1024.0)
        rows = np.array(sorted(score._row[id(s)] for s in candidates), dtype=np.int64)
        request = fgd.ShareRequest(int(cpus * 1000), 0, gpus, 1000)
        cost = score._cost(request, rows).copy()
        # the host keep term counts over these candidates, on top of the cached costs
        extra = fragscore.host_keep_cost(request, score._agents, rows, score._guarded)
        if extra is not None:
            cost[rows] += extra[:, 0]
        keys = {id(s): (cost[score._row[id(s)]], len(s.free), s.agent_id) for s in candidates}
        assert ordered == sorted(candidates, key=lambda s: keys[id(s)])
