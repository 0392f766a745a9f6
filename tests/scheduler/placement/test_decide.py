"""The pure decision function: same inputs, same decision; nothing written, nothing mutated."""

from __future__ import annotations

import dataclasses

import pytest

from dlc.mesos.offers import offer_view
from dlc.scheduler.placement.decide import DecideRequest, decide
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import PlacementConfig

from ..helpers import job, offer


def _inventory(views):
    inventory = Inventory()
    inventory.note_offers(views, at=0.0)
    return inventory


def test_decide_launches_declines_and_explains_without_side_effects():
    views = [
        offer_view(offer("o1", "a1", [0, 1])),
        offer_view(offer("o2", "a2", [])),
    ]
    inventory = _inventory(views)
    version = inventory.version
    queue = [job("j1", gpus=2), job("j2", gpus=1), job("j3", gpus=4)]
    request = DecideRequest(
        queue=queue, inventory=inventory, offers=views, config=PlacementConfig(), now=100.0
    )
    first, again = decide(request), decide(request)
    assert first.placed_jobs == ["j1"] and [x.gpu_ids for x in first.launches] == [(0, 1)]
    assert first.declines == ["o2"]
    assert set(first.waiting) == {"j2", "j3"}
    assert first.impossible == {"j3": first.waiting["j3"]}
    assert "impossible on the current agents" in first.waiting["j3"]
    assert (first.launches, first.declines, first.waiting) == (
        again.launches, again.declines, again.waiting,
    )  # fmt: skip
    assert inventory.version == version and queue[0].tasks == ()


def test_reserved_agents_take_only_their_holder():
    views = [offer_view(offer("o1", "a1", [0, 1]))]
    request = DecideRequest(
        queue=[job("small", gpus=1), job("big", gpus=2)],
        inventory=_inventory(views),
        offers=views,
        config=PlacementConfig(),
        now=0.0,
        reserved={"a1": "big"},
    )
    decision = decide(request)
    assert decision.placed_jobs == ["big"] and "small" in decision.waiting


def test_a_request_is_named_and_frozen():
    views = [offer_view(offer("o1", "a1", [0, 1]))]
    with pytest.raises(TypeError):  # keywords only: no caller counts positions
        DecideRequest([], _inventory(views), views, PlacementConfig(), 0.0)  # type: ignore[misc]
    request = DecideRequest(
        queue=[], inventory=_inventory(views), offers=views, config=PlacementConfig(), now=0.0
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.now = 1.0  # type: ignore[misc]
    assert decide(request).declines == ["o1"]


def _assert_as_step_by_step(got, queue, why_of, cap, reserved):
    """``_runnable``'s answer equals asking each job in turn: the same runnable jobs, reasons
    (in order) and skipped ids."""
    want = _runnable_step_by_step(queue, why_of, cap, reserved)
    assert [j.job_id for j in got[0]] == [j.job_id for j in want[0]]
    assert list(got[1].items()) == list(want[1].items())
    assert got[2] == want[2]


def _runnable_step_by_step(queue, why_of, cap, reserved):
    """What :func:`decide` hands placement, as first written (a step of Python per job):
    the passes in C must give the same jobs, reasons and skipped ids, in the same order."""
    runnable, impossible = [], {}
    for j in queue:
        why = why_of(j.spec)
        if why is None:
            runnable.append(j)
        else:
            impossible[j.job_id] = f"impossible on the current agents: {why}"
    chosen = cap.choose(runnable, set(reserved.values())) if cap is not None else runnable
    ids = {j.job_id for j in chosen}
    return chosen, impossible, [j.job_id for j in runnable if j.job_id not in ids]


@pytest.mark.parametrize("seed", range(4))
def test_the_runnable_jobs_reasons_and_skipped_ids_equal_the_step_by_step_ones(seed):
    import random

    from dlc.scheduler.placement.decide import _runnable
    from dlc.scheduler.placement.round_cap import RoundCap
    from dlc.scheduler.placement.round_memo import RoundMemo

    rng = random.Random(seed)
    queue = [job(f"j{n:03d}", gpus=1 + n % 3) for n in range(rng.randrange(1, 120))]
    bad = {id(j.spec) for j in queue if rng.random() < 0.2}
    asked = []

    def why_of(spec):
        asked.append(spec)
        return "no agent has 3 GPUs" if id(spec) in bad else None

    memo, caps = RoundMemo(), (RoundCap(8), RoundCap(8))
    for n in range(6):
        reserved = {"a1": rng.choice(queue).job_id} if n % 2 else {}
        request = DecideRequest(
            queue=queue, inventory=Inventory(), offers=[], config=PlacementConfig("first-fit"),
            now=0.0, reserved=reserved, impossible_of=why_of, cap=caps[0], memo=memo,
        )  # fmt: skip
        asked.clear()
        got = _runnable(request)
        if n:  # the memo answers for every job asked in an earlier round
            assert len(asked) == 1
        _assert_as_step_by_step(got, queue, why_of, caps[1], reserved)
        queue = queue[3:] + [job(f"k{seed}{n}", gpus=2)]  # launches and one submit


@pytest.mark.parametrize("seed", range(4))
def test_the_runnable_jobs_read_from_the_ids_equal_the_step_by_step_ones(seed):
    """With the queue's ids (the core's rounds) the memo's answers are read by id and the
    impossible jobs are the few it lists: the same jobs, reasons and skipped ids as asking
    each job, across inventory versions that turn jobs impossible and possible again."""
    import random

    from dlc.scheduler.placement.decide import _runnable
    from dlc.scheduler.placement.round_cap import RoundCap
    from dlc.scheduler.placement.round_memo import RoundMemo

    rng = random.Random(seed)
    queue = [job(f"j{n:03d}", gpus=1 + n % 3) for n in range(rng.randrange(1, 120))]
    memo, caps = RoundMemo(), (RoundCap(8), RoundCap(8))
    inventory = Inventory()
    inventory.version = -1
    bad: set[int] = set()
    asked = []

    def why_of(spec):
        asked.append(spec)
        return "no agent has 3 GPUs" if id(spec) in bad else None

    for n in range(10):
        if n % 3 == 0:  # a new inventory version: other jobs are impossible now (or none)
            inventory.version += 1
            bad = {id(j.spec) for j in queue if rng.random() < (0.2 if n % 2 else 0.0)}
        reserved = {"a1": rng.choice(queue).job_id} if n % 2 else {}
        request = DecideRequest(
            queue=queue, queue_ids=[j.job_id for j in queue], inventory=inventory, offers=[],
            config=PlacementConfig("first-fit"), now=0.0, reserved=reserved,
            impossible_of=why_of, cap=caps[0], memo=memo,
        )  # fmt: skip
        asked.clear()
        got = _runnable(request)
        if n % 3:  # the memo answers for every job asked in an earlier round
            assert len(asked) == 1
        _assert_as_step_by_step(got, queue, why_of, caps[1], reserved)
        queue = queue[3:] + [job(f"k{seed}{n}", gpus=2)]  # launches and one submit


@pytest.mark.parametrize("seed", range(3))
def test_the_round_after_a_pinned_one_asks_only_the_jobs_that_entered(seed):
    """With the queue's changes since the pin before (the core's rounds), the memo's
    answers cover the queue pinned before, so only jobs that entered are asked: the same
    jobs, reasons and skipped ids as asking each job, through a pin no round decided on, a
    new inventory version and a queue so much shorter that the memo starts again."""
    import random

    from dlc.scheduler.placement.decide import QueueChanges, _runnable
    from dlc.scheduler.placement.round_cap import RoundCap
    from dlc.scheduler.placement.round_memo import RoundMemo

    rng = random.Random(seed)
    every = [job(f"j{n:04d}", gpus=1 + n % 3) for n in range(1400)]
    bad = {id(j.spec) for j in every if rng.random() < 0.1}
    asked = []

    def why_of(spec):
        asked.append(spec)
        return "no agent has 3 GPUs" if id(spec) in bad else None

    memo, caps = RoundMemo(), (RoundCap(8), RoundCap(8))
    inventory = Inventory()
    queue, changed = every[:1200], [j.job_id for j in every[:1200]]
    for pin in range(1, 12):
        if pin == 6:  # an idle round: pinned, not decided on (its changes are lost)
            changed = []
            continue
        if pin == 8:
            inventory.version += 1
        jobs = {j.job_id: j for j in queue}
        request = DecideRequest(
            queue=queue, queue_ids=list(jobs), inventory=inventory, offers=[],
            config=PlacementConfig("first-fit"), now=0.0, impossible_of=why_of, cap=caps[0],
            memo=memo, queue_changes=QueueChanges(pin, changed, jobs),
        )  # fmt: skip
        asked.clear()
        got = _runnable(request)
        fresh = {j.job_id for j in queue} & set(changed)
        if pin in (2, 3, 4, 5, 9, 11):  # the rounds after one decided on the pin before
            assert len(asked) == len(fresh) < 20
        _assert_as_step_by_step(got, queue, why_of, caps[1], {})
        left = queue[:3] if pin != 9 else queue[: len(queue) - 20]  # launches; most killed
        entered = [every[1200 + 10 * pin + k] for k in range(1 + pin % 3)]
        queue = queue[len(left) :] + entered
        changed = [j.job_id for j in left] + [j.job_id for j in entered]
