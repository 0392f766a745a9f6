"""Share placement over many agents, some wider than 8 GPUs (the deduplicated path)."""

from __future__ import annotations

from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job


def test_a_share_places_among_64_agents_with_16_gpu_ones():
    # 64+ agents take fragmentation_dedup's path, whose hash once had room for 8 GPUs only
    offers = [ranged_offer(f"o{k}", f"a{k}", gpus=16 if k % 4 == 3 else 8) for k in range(70)]
    result = place(offers, [share_job("j1", gpu_memory="4G")])
    (launch,) = result.launches
    assert launch.share is not None and launch.share.memory_mib == 4096
