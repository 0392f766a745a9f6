"""Queue order and head-of-line protection."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.scheduler.jobs import JobState
from dlc.scheduler.placement import PlacementConfig, place
from dlc.scheduler.queue import HeadOfLine, queue_order

from .helpers import job, offer


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


def _simulate(max_skips: int, rounds: int = 30) -> int | None:
    """One 2-GPU agent; 1-GPU jobs of two rounds arrive so that a GPU frees every round.

    Returns the round the 2-GPU head job is placed in, or None.
    """
    head = HeadOfLine(max_skips)
    queue = [job("big", gpus=2, at=0)] + [job(f"s{i:02d}", gpus=1, at=1 + i) for i in range(40)]
    busy = {0: 1}  # GPU -> rounds left; GPU0 frees after the first round
    for round_no in range(rounds):
        free = [g for g in (0, 1) if g not in busy]
        result = place(
            [offer("o", "a", free)],
            queue_order(queue),
            PlacementConfig("first-fit"),
            blocks=head.blocks,
        )
        head.record_round(result.placed_jobs, result.waiting)
        if "big" in result.placed_jobs:
            return round_no
        for launch in result.launches:
            busy.update({g: 2 for g in launch.gpu_ids})
        queue = [j for j in queue if j.job_id not in result.placed_jobs]
        busy = {g: left - 1 for g, left in busy.items() if left > 1}
    return None


@pytest.mark.parametrize(
    "max_skips, placed_in",
    [
        pytest.param(3, 4, id="blocks-after-3-skips-then-gpus-drain"),
        pytest.param(0, 1, id="strict-fifo-waits-one-drain"),
        pytest.param(1000, None, id="pure-backfill-starves-the-big-job"),
    ],
)
def test_big_job_is_not_starved_forever(max_skips, placed_in):
    assert _simulate(max_skips) == placed_in


@pytest.mark.parametrize("skips, blocks", [(0, False), (2, False), (3, True), (4, True)])
def test_blocks_after_max_skips(skips, blocks):
    head = HeadOfLine(max_skips=3)
    for _ in range(skips):
        head.record_round([], ["j"])
    assert head.blocks("j") is blocks
    head.record_round(["j"], [])
    assert head.skips("j") == 0


def test_zero_max_skips_is_strict_fifo():
    head = HeadOfLine(max_skips=0)
    result = place(
        [offer("o", "a", [0])],
        [job("big", gpus=2), job("small", at=1)],
        PlacementConfig("first-fit"),
        blocks=head.blocks,
    )
    assert result.launches == [] and result.blocked_by == "big"
