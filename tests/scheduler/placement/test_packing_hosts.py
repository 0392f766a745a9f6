"""Host keep's packing hosts (``ScoreParams.host_keep_pair``): the half of a node beside one pod
of a 4-GPU shape is kept for a second one, as FGD pairs the 4-GPU 60-core 313 GiB pods of
``multigpu40`` on its 128-core 8-GPU G3 nodes (docs/simulator.md, "multigpu40: the packing
hosts"). Through :func:`dlc.scheduler.placement.placer.place`, the engine the offer round and
both replays call."""

from __future__ import annotations

import numpy as np

from dlc.scheduler.allocator import fragscore, host_keep
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.whole_score import counted_mix
from tests.scheduler.helpers import job, offer, place

#: the replays' settings: first fit within an agent, no executor overhead
CONFIG = PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0)
#: 1-GPU 8-core pods, and 4-GPU 60-core pods too rare for FGD's measure to split a tie
MIX = counted_mix({(8000, 1000, 1): 998, (60000, 1000, 4): 2})
#: a0: the half of a 128-core node beside a 4-GPU 60-core pod (4 GPUs, 68 cores left), the
#: only agent a 4-GPU 60-core pod packs; a1-a9: 8 GPUs and 96 cores free (listed after it)
OFFERS = [offer("o0", "a0", [0, 1, 2, 3], cpus=68, mem=400_000)] + [
    offer(f"o{k}", f"a{k}", list(range(8)), cpus=96, mem=400_000) for k in range(1, 10)
]


def _where(name: str, gpus: int, cpus: float) -> str:
    result = place(OFFERS, [job(name, gpus=gpus, cpus=cpus, mem_mib=1024)], CONFIG, mix=MIX)
    assert len(result.launches) == 1, result.waiting
    return result.launches[0].agent_id


def test_a_small_pod_leaves_the_packing_host_to_the_shape_that_packs_it():
    # the growth of FGD's measure is within one bucket everywhere, so best fit took a0 (the
    # fewest free GPUs), and the next 4-GPU pod broke an 8-GPU agent
    assert _where("small", 1, 8.0) == "a1"


def test_the_shape_that_packs_it_still_goes_there():
    assert _where("pair", 4, 60.0) == "a0"


def test_the_term_charges_only_the_packing_host():
    assert MIX is not None
    guarded = host_keep.guarded_of(MIX)
    assert guarded is not None
    cpu = np.array([68_000] + [96_000] * 9)
    gpu = np.array([[1000] * 4 + [0] * 4] + [[1000] * 8] * 9)
    pod = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1)
    spread = fragscore.DEFAULT_PARAMS.host_keep_spread
    on = host_keep.host_loss(pod, cpu, np.full(10, 10**6), gpu, guarded, spread, pair=1.0)
    off = host_keep.host_loss(pod, cpu, np.full(10, 10**6), gpu, guarded, spread, pair=0.0)
    # ten agents have 4 GPUs free, one is packed by the 4-GPU pod: 9 times concentrated; its
    # weight is on the scale of the mix's shapes (the 1-GPU pods: too rare to be one of them)
    assert np.allclose(on[0], 2 / 998 * 4000 * 9) and not on[1:].any()
    assert not off.any()
