"""A round's placement leaves no reference cycles behind (issue 26).

The round's slots and its indexes (free whole GPUs, share room, whole-GPU scoring) point at
each other while the round runs. Left so, every round's 1,213 slots at openb scale, with
their offer views and rows, wait for the cyclic collector; under the scheduler's raised
collector thresholds (dlc/app/interpreter.py) they piled up (+40 MiB peak RSS)."""

from __future__ import annotations

import gc

from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job


def _cyclic_garbage_of(run) -> int:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        result = run()
        found = gc.collect()
    finally:
        if was:
            gc.enable()
    assert result is not None
    return found


def test_a_round_with_whole_gpu_jobs_and_shares_leaves_no_cycles():
    offers = [ranged_offer(f"o{n}", f"a{n}", gpus=8, used={0: (4096, 200)}) for n in range(6)]
    queue = [
        share_job("s1", gpu_memory="4G"),
        share_job("s2", gpus=0.5),
        share_job("w1", gpus=2),
        share_job("w2", gpus=4),
        share_job("big", gpus=64),  # fits nowhere
    ]

    def run():
        result = place(offers, queue)
        assert {launch.job_id for launch in result.launches} == {"s1", "s2", "w1", "w2"}
        return result

    assert _cyclic_garbage_of(run) == 0
