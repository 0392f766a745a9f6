"""Failed shapes carried from one offer round to the next until an agent grows (issue 26).

At openb scale a steady round tried the same 2,000 failing shapes on the same 1,213 agents
every round. :class:`~dlc.scheduler.placement.shape_cache.CarriedFailures` keeps a round's failures
and tries them next round only on the agents that grew. These tests count placement
attempts (``placement._place_job`` calls) and check that nothing that fits is kept waiting.
"""

from __future__ import annotations

import pytest

from dlc.mesos.codec import MesosCodec
from dlc.mesos.offers import offer_view
from dlc.scheduler.core.offer_views import OfferParser
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement import placer as placement
from dlc.scheduler.placement.decide import DecideRequest, Decision, decide
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import OfferView, PlacementConfig
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.shape_cache import ShapeBudget

from ..helpers import offer
from .test_share_placement import ranged_offer, share_job

CONFIG = PlacementConfig("first-fit")


@pytest.fixture
def attempts(monkeypatch) -> list[tuple[str, tuple[str, ...]]]:
    """``(job id, agent ids it was tried on)`` in the order placement tried them."""
    tried: list[tuple[str, tuple[str, ...]]] = []
    real = placement._place_job

    def counting(job, slots, *args, **kwargs):
        tried.append((job.job_id, tuple(s.agent_id for s in slots)))
        return real(job, slots, *args, **kwargs)

    monkeypatch.setattr(placement, "_place_job", counting)
    return tried


def views(cpus: dict[str, float], gpus: dict[str, list[int]] | None = None) -> list[OfferView]:
    gpus = gpus or {}
    return [
        offer_view(offer(f"o-{agent}", agent, gpus.get(agent), cpus=c)) for agent, c in cpus.items()
    ]


def _round(
    queue: list[Job],
    offers: list[OfferView],
    *,
    now: float,
    config: PlacementConfig = CONFIG,
    inventory: Inventory | None = None,
    **fields,
) -> Decision:
    """One :func:`decide` round; ``fields`` are the request's other fields, by name."""
    return decide(DecideRequest(queue=queue, inventory=inventory or Inventory(), offers=offers,
                                config=config, now=now, **fields))  # fmt: skip


def cpu_job(job_id: str, cpus: float, gpus: int = 1, nodes: int = 1, user: str = "ann") -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": cpus, "nodes": nodes})
    return Job(job_id, user, spec)


def test_a_failed_shape_is_not_tried_again_until_an_agent_grows(attempts):
    budget = ShapeBudget()
    queue = [cpu_job("big", 8.0)]
    small = {"a1": 4.0, "a2": 4.0, "a3": 4.0}
    first = _round(queue, views(small), now=0.0, budget=budget)
    assert not first.placed_jobs and attempts == [("big", ("a1", "a2", "a3"))]
    attempts.clear()
    second = _round(queue, views(small), now=1.0, budget=budget)
    assert attempts == []  # nothing grew: last round's answer stands, at no cost
    assert second.waiting["big"] == first.waiting["big"]  # the reason is still there
    attempts.clear()
    third = _round(queue, views({**small, "a2": 16.0}), now=2.0, budget=budget)
    assert attempts == [("big", ("a2",))]  # tried on the agent that grew, and only there
    assert third.placed_jobs == ["big"] and third.launches[0].agent_id == "a2"


def test_a_new_agent_counts_as_grown(attempts):
    budget = ShapeBudget()
    queue = [cpu_job("big", 8.0)]
    _round(queue, views({"a1": 4.0}), now=0.0, budget=budget)
    attempts.clear()
    out = _round(queue, views({"a1": 4.0, "a9": 32.0}), now=1.0, budget=budget)
    assert out.placed_jobs == ["big"] and attempts == [("big", ("a9",))]


def test_freed_gpus_count_as_growth(attempts):
    budget = ShapeBudget()
    queue = [cpu_job("four", 1.0, gpus=4)]
    two = {"a1": [0, 1]}
    _round(queue, views({"a1": 16.0}, two), now=0.0, budget=budget)
    attempts.clear()
    out = _round(queue, views({"a1": 16.0}, {"a1": [0, 1, 2, 3]}), now=1.0, budget=budget)
    assert out.placed_jobs == ["four"]


def test_a_gang_is_tried_on_every_agent_each_round(attempts):
    """A gang fails when too few agents fit together: one that fit alone counts again
    next round beside one that grew, so gangs are not carried."""
    budget = ShapeBudget()
    queue = [cpu_job("gang", 8.0, nodes=2)]
    _round(queue, views({"a1": 16.0, "a2": 4.0}), now=0.0, budget=budget)
    out = _round(queue, views({"a1": 16.0, "a2": 16.0}), now=1.0, budget=budget)
    assert out.placed_jobs == ["gang"]
    assert sorted(x.agent_id for x in out.launches) == ["a1", "a2"]


def test_a_share_that_failed_is_placed_once_its_gpu_has_room(attempts):
    budget = ShapeBudget()
    queue = [share_job("s", gpu_fraction=0.5)]
    full = {i: (0, 800) for i in range(2)}  # 0.2 of each GPU's compute left
    busy = [offer_view(ranged_offer("o1", "a1", gpus=2, used=full, sharing="shim"))]
    first = _round(queue, busy, now=0.0, config=PlacementConfig(), budget=budget)
    assert not first.placed_jobs
    attempts.clear()
    _round(queue, busy, now=1.0, config=PlacementConfig(), budget=budget)
    assert attempts == []
    freed = {0: (0, 400), 1: (0, 800)}
    room = [offer_view(ranged_offer("o1", "a1", gpus=2, used=freed, sharing="shim"))]
    out = _round(queue, room, now=2.0, config=PlacementConfig(), budget=budget)
    assert out.placed_jobs == ["s"] and out.launches[0].share.gpu_index == 0


def test_a_round_cut_into_pools_carries_nothing(attempts):
    budget = ShapeBudget()
    queue = [cpu_job("big", 8.0)]
    small = views({"a1": 4.0, "a2": 4.0})

    def halves(offers, jobs):
        return [(list(offers[:1]), list(jobs)), (list(offers[1:]), [])]

    _round(queue, small, now=0.0, split=halves, budget=budget)
    attempts.clear()
    _round(queue, small, now=1.0, budget=budget)
    assert attempts == [("big", ("a1", "a2"))]  # tried in full: the pool round kept nothing


def _shares_of(users: list[str], exclusive: str | None = None) -> list[Job]:
    body = {"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpu_fraction": 0.5}
    if exclusive:
        body["exclusive_per"] = exclusive
    return [Job(f"s-{u}", u, JobSpec.from_dict(body)) for u in users]


def test_look_alike_shares_of_many_users_cost_one_attempt(attempts):
    """Where nobody is exclusive and no agent runs MPS every GPU is open to every user, so
    one user's failed share answers for the same share of every other user."""
    full = {i: (0, 800) for i in range(2)}
    busy = [offer_view(ranged_offer("o1", "a1", gpus=2, used=full, sharing="shim"))]
    out = _round(
        _shares_of(["u1", "u2", "u3"]),
        busy,
        now=0.0,
        config=PlacementConfig(),
        budget=ShapeBudget(),
    )
    assert len(attempts) == 1 and len(out.waiting) == 3


def test_exclusive_shares_are_tried_per_user(attempts):
    full = {i: (0, 800) for i in range(2)}
    busy = [offer_view(ranged_offer("o1", "a1", gpus=2, used=full, sharing="shim"))]
    _round(
        _shares_of(["u1", "u2"], exclusive="user"),
        busy,
        now=0.0,
        config=PlacementConfig(),
        budget=ShapeBudget(),
    )
    assert len(attempts) == 2


@pytest.mark.parametrize("seed", range(6))
def test_carrying_decides_what_trying_everything_decides(seed):
    """Random rounds over agents that grow and shrink: the same jobs placed on the same
    agents with the same GPUs, and the same jobs deferred, with and without carrying."""
    import random

    rng = random.Random(seed)
    queue = [cpu_job(f"j{n:02d}", rng.choice([1.0, 3.0, 6.0, 9.0, 12.0]),
                     gpus=rng.choice([1, 2, 4]), user=f"u{n % 3}")
             for n in range(40)]  # fmt: skip
    budgets = {True: ShapeBudget(2), False: ShapeBudget(2)}
    left = {True: list(queue), False: list(queue)}
    cpus = {f"a{a}": rng.choice([2.0, 4.0, 8.0, 16.0]) for a in range(4)}
    gpus = {a: sorted(rng.sample(range(8), rng.randint(0, 8))) for a in cpus}
    for rnd in range(8):
        if rnd:  # one agent changes a round (grows or shrinks), the others offer the same
            agent = rng.choice(sorted(cpus))
            cpus[agent] = rng.choice([2.0, 4.0, 8.0, 16.0])
            gpus[agent] = sorted(rng.sample(range(8), rng.randint(0, 8)))
        seen = {}
        for carry in (True, False):
            budget = budgets[carry]
            budget.start()
            ordered = budget.ordered(left[carry])
            out = placement.place(views(cpus, gpus), ordered, CONFIG, budget=budget, carry=carry)
            deferred = {j for j, r in out.waiting.items() if r.startswith("not tried")}
            launches = [(x.job_id, x.agent_id, x.gpu_ids) for x in out.launches]
            seen[carry] = (launches, deferred)
            placed = set(out.placed_jobs)
            left[carry] = [j for j in left[carry] if j.job_id not in placed]
        assert seen[True] == seen[False], f"round {rnd}"


def test_a_carried_failure_is_forgotten_every_few_rounds_whatever_the_agents_show():
    # a safety bound: a cause the agents' snapshots miss can delay a job, never strand it
    from types import SimpleNamespace

    from dlc.scheduler.placement.shape_cache import FULL_RETRY_ROUNDS, CarriedFailures

    slot = SimpleNamespace(agent_id="a1", cpus=1.0, mem=1.0, disk=0.0, gpus=0.0,
                           free=frozenset(), gpu_mem=(), gpu_core=(), port_ranges=(),
                           ports_taken=(), attributes={})  # fmt: skip
    carried = CarriedFailures()
    kind, demand = ("shape",), (1.0, 1.0, 0.0)
    trusted = []
    for _ in range(FULL_RETRY_ROUNDS + 1):
        carried.start([slot])
        before = carried.known_before(kind, demand)
        trusted.append(before is not None)
        if before is None:
            carried.add(kind, demand, "no room", True)  # tried on every agent
        else:
            assert before[1] == []  # the agent did not grow: nothing is tried
            carried.add(kind, demand, before[0], True)
        carried.finish([slot])
    # found in round 1, trusted in rounds 2..N although nothing grew, tried in full after N
    assert trusted == [False] + [True] * (FULL_RETRY_ROUNDS - 1) + [False]


def test_a_failure_is_kept_over_rounds_in_which_its_shape_is_not_tried(attempts):
    # the round cap considers other jobs in turns; a job whose turn comes again finds its
    # shape's failure still standing while no agent grew (one round was all it was kept)
    from dlc.scheduler.placement.round_cap import RoundCap

    budget, cap = ShapeBudget(), RoundCap(2)  # the head's job and one other, in turns
    queue = [cpu_job("head", 8.0), cpu_job("two", 8.0, gpus=2), cpu_job("three", 8.0, gpus=3)]
    small = {"a1": 4.0, "a2": 4.0}
    tried = []
    for rnd in range(3):
        attempts.clear()
        out = _round(queue, views(small), now=float(rnd), budget=budget, cap=cap)
        assert not out.placed_jobs
        tried.append(sorted(j for j, _ in attempts))
    # round 3 is "two"'s second turn: nothing grew since its first, so nothing is tried
    assert tried == [["head", "two"], ["three"], []]
    assert out.waiting["two"].startswith("no offer")


def _kept_round(parser, memo, budget, queue, gpus: list[int], round_: int):
    """One round of agent a1 offering ``gpus``, parsed as the core parses (an unchanged
    offer keeps its objects, so its slot starts from the memo's kept state)."""
    views, _ = parser.parse([offer(f"o{round_}", "a1", gpus, cpus=16.0)])
    return placement.place(views, queue, CONFIG, budget=budget, memo=memo)


def test_an_agent_whose_kept_offer_changed_counts_as_grown(attempts):
    """The starting snapshot kept per kept slot state is dropped when the agent's offer
    changes (a new state): the grown agent is tried again."""
    parser, memo, budget = OfferParser(MesosCodec()), RoundMemo(), ShapeBudget()
    queue = [cpu_job("four", 1.0, gpus=4)]
    _kept_round(parser, memo, budget, queue, [0, 1], 0)
    attempts.clear()
    _kept_round(parser, memo, budget, queue, [0, 1], 1)
    assert attempts == []  # the same offer: not grown, known by the kept snapshot
    out = _kept_round(parser, memo, budget, queue, [0, 1, 2, 3], 2)
    assert out.placed_jobs == ["four"] and attempts == [("four", ("a1",))]


def test_an_agent_that_took_a_task_is_compared_with_what_it_had_left(attempts):
    """An agent that ends a round with less than it started is not taken for unchanged:
    next round it offers its GPUs again and counts as grown."""
    parser, memo, budget = OfferParser(MesosCodec()), RoundMemo(), ShapeBudget()
    first = _kept_round(
        parser, memo, budget, [cpu_job("two", 1.0, gpus=2), cpu_job("three", 1.0, gpus=3)],
        [0, 1, 2, 3], 0,
    )  # fmt: skip
    assert first.placed_jobs == ["two"] and "three" in first.waiting
    attempts.clear()
    out = _kept_round(parser, memo, budget, [cpu_job("three", 1.0, gpus=3)], [0, 1, 2, 3], 1)
    assert out.placed_jobs == ["three"] and attempts == [("three", ("a1",))]
