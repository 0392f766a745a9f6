"""The fragmentation values a core keeps across rounds (frag_state): the same answers as a
fresh measure while the mix holds, a changed agent measured again, a drifted mix replaced."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from dlc.mesos.codec import MesosCodec
from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.core.offer_views import OfferParser
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.frag_state import FragCache, drift
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.whole_score import WholeScore
from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer

FIRST_FIT = PlacementConfig("first-fit")


def _mix(*weights: float) -> fgd.WorkloadMix:
    """Singles, pairs, fours and half-GPU shares, weighted as given."""
    shapes = (
        fgd.ShareRequest(cpu_milli=2000, mem_mib=0, num_gpus=1, gpu_milli=1000),
        fgd.ShareRequest(cpu_milli=4000, mem_mib=0, num_gpus=2, gpu_milli=1000),
        fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=4, gpu_milli=1000),
        fgd.ShareRequest(cpu_milli=1000, mem_mib=0, num_gpus=1, gpu_milli=500),
    )
    return fgd.WorkloadMix(shapes[: len(weights)], tuple(weights))


def _states(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    gpu = rng.choice([0, 300, 500, 1000], size=(n, 8))
    cpu = rng.integers(0, 64, size=n) * 1000
    mem = rng.integers(0, 256, size=n) * 1024
    return np.zeros(n, dtype=np.int64), cpu, mem, gpu


def test_cached_values_are_the_fresh_measure_and_are_kept():
    cache = FragCache()
    arrays = cache.adopt(_mix(5, 3, 1, 4))
    model, cpu, mem, gpu = _states(np.random.default_rng(1), 200)
    first = cache.frag(model, cpu, mem, gpu)
    assert np.array_equal(first, fragscore.frag_of(arrays, model, cpu, mem, gpu))
    measured = cache.measured
    again = cache.frag(model, cpu, mem, gpu[:, ::-1])  # GPU order does not matter
    assert np.array_equal(again, first) and cache.measured == measured


def test_an_agent_whose_state_changed_is_measured_again():
    cache = FragCache()
    arrays = cache.adopt(_mix(5, 3, 1, 4))
    model, cpu, mem = np.zeros(1, dtype=np.int64), np.array([32000]), np.array([65536])
    before = np.array([[1000, 1000, 1000, 1000, 0, 0, 0, 0]])
    cache.frag(model, cpu, mem, before)
    after = np.array([[1000, 1000, 1000, 500, 0, 0, 0, 0]])  # a share took half a GPU
    value = cache.frag(model, cpu, mem, after)
    assert value[0] == fragscore.frag_of(arrays, model, cpu, mem, after)[0]
    assert value[0] != fragscore.frag_of(arrays, model, cpu, mem, before)[0]


def _slot(agent: str, free: set[int], cpus: float = 32.0) -> SimpleNamespace:
    return SimpleNamespace(agent_id=agent, cpus=cpus, mem=65536.0, free=frozenset(free),
                           gpu_core=())  # fmt: skip


def test_whole_score_with_a_kept_cache_orders_as_a_fresh_one_after_agents_change():
    # one cache over three rounds; between rounds agents' free GPUs change (new slots, as
    # each round builds them), and within a round a placement changes one (changed())
    cache, rng = FragCache(), random.Random(3)
    mix = _mix(5, 3, 1, 4)
    free = {f"a{n}": set(range(rng.randrange(1, 9))) for n in range(10)}
    for _ in range(4):
        slots = [_slot(agent, ids) for agent, ids in sorted(free.items())]
        kept = WholeScore(slots, mix, cache=cache)
        for gpus in (1, 2, 1, 4, 1, 2, 1, 1, 2, 1):
            candidates = [s for s in slots if len(s.free) >= gpus]
            order = kept.order(candidates, gpus, 2.0, 64)
            # a score built now reads every slot as it is: no cache, nothing kept
            assert order == WholeScore(slots, mix).order(candidates, gpus, 2.0, 64)
            if order:  # place it on the best agent: its state changes within the round
                best = order[0]
                best.free = frozenset(sorted(best.free)[gpus:])
                best.cpus -= 2 * gpus
                kept.changed(best)
        for agent in rng.sample(sorted(free), 4):  # the next round: some agents changed
            free[agent] = set(range(rng.randrange(0, 9)))


def test_a_small_drift_keeps_the_held_mix_and_a_large_one_replaces_it():
    cache = FragCache(max_drift=0.01)
    held = cache.adopt(_mix(500, 300, 100, 100))
    model, cpu, mem, gpu = _states(np.random.default_rng(2), 50)
    values = cache.frag(model, cpu, mem, gpu)
    measured = cache.measured
    # two jobs came: weights move by 0.004 in L1; the held values stand
    near = _mix(501, 300, 100, 101)
    assert 0 < drift(held_mix := cache.mix, near) <= 0.01 and held_mix is not None
    assert cache.adopt(near) is held and cache.epoch == 1
    assert np.array_equal(cache.frag(model, cpu, mem, gpu), values)
    assert cache.measured == measured
    # many pairs came: the mix is replaced and every state measured again under it
    far = _mix(500, 400, 100, 100)
    assert drift(cache.mix, far) > 0.01
    arrays = cache.adopt(far)
    assert arrays is not held and cache.epoch == 2
    again = cache.frag(model, cpu, mem, gpu)
    assert np.array_equal(again, fragscore.frag_of(arrays, model, cpu, mem, gpu))
    assert cache.measured == 2 * measured  # every state measured again
    assert not np.array_equal(again, values)


def test_drift_counts_shapes_that_come_or_go_and_zero_adopts_any_change():
    assert drift(_mix(1, 1), _mix(1, 1)) == 0
    assert abs(drift(_mix(1, 1), _mix(1, 1, 2)) - 1.0) < 1e-9  # halves move by 0.25 each, +0.5
    cache = FragCache(max_drift=0)
    first = cache.adopt(_mix(500, 300, 100, 100))
    assert cache.adopt(_mix(500, 300, 100, 100)) is first  # equal: kept
    assert cache.adopt(_mix(501, 300, 100, 100)) is not first and cache.epoch == 2


def _job(job_id: str, spec: dict) -> Job:
    return Job(job_id, "alice", JobSpec.from_dict({"image": "busybox", "mem_mib": 64, **spec}))


def test_the_core_memo_places_as_a_fresh_read_under_one_mix_over_random_rounds():
    # whole-GPU jobs and shares, through place() with the core's memo (its FragCache) and
    # without; the mix is the same every round, so every decision must be the same
    rng = random.Random(11)
    memo, parser = RoundMemo(), OfferParser(MesosCodec())
    mix = _mix(5, 3, 1, 4)
    # fault-isolated agents: shares of any tenant mix, so shares take the array path
    bodies = {f"a{n}": ranged_offer(f"o{n}", f"a{n}", sharing="none") for n in range(12)}
    for round_ in range(12):
        for agent in rng.sample(sorted(bodies), 3):
            used = {i: (rng.randrange(0, 16) * 1024, rng.randrange(0, 900))
                    for i in range(8) if rng.random() < 0.4}  # fmt: skip
            whole = tuple(i for i in range(8) if i not in used and rng.random() < 0.3)
            bodies[agent] = ranged_offer("x", agent, used=used, whole_taken=whole, sharing="none")
        offers = [{**body, "id": {"value": f"r{round_}-{n}"}}
                  for n, (_, body) in enumerate(sorted(bodies.items()))]  # fmt: skip
        queue = [_job(f"w{round_}-{k}", {"cpus": 1, "gpus": rng.choice([1, 2, 4])})
                 for k in range(3)] + [
            _job(f"s{round_}-{k}", {"cpus": 0.1, "gpus": rng.choice([0.3, 0.5, 0.6])})
            for k in range(4)
        ]  # fmt: skip
        views, _ = parser.parse(offers)
        kept = place(views, queue, FIRST_FIT, mix=mix, memo=memo)
        fresh_views = OfferParser(MesosCodec()).parse(offers)[0]
        fresh = place(fresh_views, queue, FIRST_FIT, mix=mix)
        assert kept.launches == fresh.launches
        assert kept.waiting == fresh.waiting
    assert memo.frag.epoch == 1 and memo.frag.hits > 0
    assert memo.frag._shares  # noqa: SLF001 - the shares went through the kept cost rows
