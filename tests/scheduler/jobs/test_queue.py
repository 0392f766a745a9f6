"""Queue order and bounded reservations (no job ever blocks the whole queue)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.scheduler.jobs.job import JobState
from dlc.scheduler.jobs.queue import Reservations, queue_order
from dlc.scheduler.placement.model import PlacementConfig
from tests.scheduler.helpers import place

from ..helpers import job, offer


def test_order_priority_then_time_then_id():
    jobs = [
        job("c", priority=0, at=1),
        job("b", priority=5, at=3),
        job("a", priority=0, at=1),
        job("d", priority=5, at=2),
        replace(job("e", priority=9), state=JobState.RUNNING),
        replace(job("f", priority=9), kill_requested=True),
    ]
    assert [j.job_id for j in queue_order(jobs)] == ["d", "b", "a", "c"]


def _simulate(reserve_after: int, rounds: int = 30):
    """Two 2-GPU agents; 1-GPU jobs of two rounds keep arriving so that a GPU frees on
    each agent every round. A 2-GPU job heads the queue.

    Returns ``(round the big job is placed or None, small jobs placed on the OTHER agent
    while the big job's agent was reserved)``.
    """
    res = Reservations(reserve_after, hold_s=1e9)
    queue = [job("big", gpus=2, at=0)] + [job(f"s{i:02d}", gpus=1, at=1 + i) for i in range(80)]
    busy = {("a", 0): 1, ("b", 0): 1}  # (agent, GPU) -> rounds left
    backfilled = 0
    for round_no in range(rounds):
        offers = [
            offer(f"o{agent}", agent, [g for g in (0, 1) if (agent, g) not in busy])
            for agent in ("a", "b")
        ]
        held = res.held()
        result = place(offers, queue_order(queue), PlacementConfig("first-fit"), reserved=held)
        res.record_round(result.placed_jobs, result.waiting)
        if "big" in result.placed_jobs:
            return round_no, backfilled
        backfilled += sum(1 for x in result.launches if held and x.agent_id not in held)
        if res.may_reserve("big", round_no):
            res.reserve("big", ["a"], round_no)
        for launch in result.launches:
            busy.update({(launch.agent_id, g): 2 for g in launch.gpu_ids})
        queue = [j for j in queue if j.job_id not in result.placed_jobs]
        busy = {k: left - 1 for k, left in busy.items() if left > 1}
    return None, backfilled


@pytest.mark.parametrize(
    "reserve_after, placed_in, backfill",
    [
        pytest.param(3, 4, True, id="reserves-after-3-skips-agent-drains-others-backfill"),
        pytest.param(0, 2, True, id="reserves-at-once"),
        pytest.param(1000, None, False, id="pure-backfill-starves-the-big-job"),
    ],
)
def test_big_job_gets_its_gpus_while_others_keep_running(reserve_after, placed_in, backfill):
    placed, backfilled = _simulate(reserve_after)
    assert placed == placed_in
    assert (backfilled > 0) is backfill


@pytest.mark.parametrize(
    "events, active_after",
    [
        pytest.param([("skip", 3), ("reserve", 0)], "j", id="reserves-after-max-skips"),
        pytest.param([("skip", 2)], None, id="not-due-yet"),
        pytest.param([("skip", 3), ("reserve", 0), ("placed", 1)], None, id="placed-ends-it"),
        pytest.param([("skip", 3), ("reserve", 0), ("forget", 1)], None, id="killed-ends-it"),
        pytest.param([("skip", 3), ("reserve", 0), ("at", 99)], "j", id="held-within-bound"),
        pytest.param(
            [("skip", 3), ("reserve", 0), ("expire", 100), ("skip", 3), ("reserve", 150)],
            None,
            id="expired-then-cools-down",
        ),
        pytest.param(
            [("skip", 3), ("reserve", 0), ("expire", 100), ("skip", 3), ("reserve", 201)],
            "j",
            id="reserves-again-after-cooling",
        ),
    ],
)
def test_reservation_lifecycle(events, active_after):
    res = Reservations(reserve_after=3, hold_s=100)
    for kind, value in events:
        if kind == "skip":
            for _ in range(value):
                res.record_round([], ["j"])
        elif kind == "reserve" and res.may_reserve("j", value):
            res.reserve("j", ["a1"], value)
        elif kind == "placed":
            res.record_round(["j"], [])
        elif kind == "forget":
            res.forget("j")
        elif kind == "expire":
            assert res.expired(value) is not None
            res.release("j", value)
        elif kind == "at":
            assert res.expired(value) is None
    assert (res.active.job_id if res.active else None) == active_after


def test_only_one_reservation_at_a_time():
    res = Reservations(reserve_after=0, hold_s=10)
    res.reserve("j1", ["a1"], 0)
    assert not res.may_reserve("j2", 0)
    assert res.held() == {"a1": "j1"}


def test_reservation_describes_itself():
    res = Reservations(reserve_after=0, hold_s=1800)
    held = res.reserve("j1", ["a1"], 0)
    assert (
        held.describe(60, "5 of 8 GPUs free")
        == "reserving agent a1: 5 of 8 GPUs free (29 min left)"
    )
