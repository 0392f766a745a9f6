"""The host keep term (fragscore.host_keep): a node that is the only fit for a big shape of the
mix is kept whole while another node can take the small pod (docs/simulator.md)."""

from __future__ import annotations

import numpy as np

from dlc.mesos.offers import offer_view
from dlc.scheduler.allocator import fragscore, host_keep
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.placement.slots import Slot
from dlc.scheduler.placement.whole_score import WholeScore, counted_mix
from tests.scheduler.placement.test_share_placement import ranged_offer

ON = fragscore.ScoreParams(host_keep=1.0)
OFF = fragscore.ScoreParams(host_keep=0.0)

#: the ``multigpu40`` case in small: an 8-GPU pod asking 120 cores fits only a 128-core node;
#: 1-GPU pods asking 8 cores and half-GPU shares asking 4 are the mix, the 8-GPU pod is too rare
#: to be in it (FGD's measure does not see it) and is guarded
MIX = counted_mix({(8000, 1000, 1): 600, (4000, 500, 1): 300, (120000, 1000, 8): 1})
#: agent 0: 8 GPUs and 128 cores, the only host of the 120-core pod; agents 1-9: 8 GPUs and 96
#: cores (listed after it: ties go to the first agent)
CORES = (128,) + (96,) * 9


def _views() -> list[fgd.AgentView]:
    return [
        fgd.AgentView(f"a{k}", c * 1000, 10**6, "gpu", (1000,) * 8) for k, c in enumerate(CORES)
    ]


def test_the_mix_guards_rare_whole_gpu_shapes():
    mix = counted_mix({(8000, 1000, 1): 900, (120000, 1000, 8): 1, (4000, 300, 1): 99})
    assert mix is not None
    assert [s.cpu_milli for s in mix.shapes] == [8000, 4000]  # the 8-GPU pod is too rare
    assert [(s.cpu_milli, s.num_gpus) for s in mix.guarded] == [(8000, 1), (120000, 8)]
    guarded = host_keep.guarded_of(mix)
    assert guarded is not None and np.allclose(guarded.weight, [900 / 999, 1 / 999])


def test_only_the_only_host_loses_anything():
    guarded = host_keep.guarded_of(MIX)
    assert guarded is not None
    n = len(CORES)
    cpu = np.array([c * 1000 for c in CORES])
    gpu = np.full((n, 8), 1000)
    pod = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1)
    lost = host_keep.host_loss(pod, cpu, np.full(n, 10**6), gpu, guarded)
    # ten agents have the 8 GPUs free, one has the cores: its hosts are 10 times concentrated
    assert np.allclose(lost[0], 1 / 900 * 8000 * 9) and not lost[1:].any()
    share = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1, gpu_milli=500)
    gpu[0, 3] = 500  # agent 0 has 7 whole GPUs left: it hosts no 8-GPU pod any more
    lost = host_keep.host_loss(share, cpu, np.full(n, 10**6), gpu, guarded)
    assert not lost.any()  # agent 0 no longer hosts the 8-GPU pod: nothing left to keep


def test_a_shape_every_node_with_the_gpus_hosts_costs_nothing_extra():
    mix = counted_mix({(8000, 1000, 1): 60, (64000, 1000, 8): 3})
    assert mix is not None
    guarded = host_keep.guarded_of(mix)
    assert guarded is not None
    n = len(CORES)
    cpu = np.array([c * 1000 for c in CORES])
    pod = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1)
    lost = host_keep.host_loss(pod, cpu, np.full(n, 10**6), np.full((n, 8), 1000), guarded)
    assert not lost.any()


def test_the_small_pod_goes_to_a_node_the_big_shape_does_not_need():
    pod = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1)
    share = fgd.ShareRequest(cpu_milli=4000, mem_mib=0, num_gpus=1, gpu_milli=500)
    for request in (pod, share):
        # without the term every node looks the same for the mix: the first, the only host
        assert fragscore.place(request, _views(), MIX, OFF).agent == 0
        assert fragscore.place(request, _views(), MIX, ON).agent == 1
    # when the only host is the only node the pod fits, it still goes there
    assert fragscore.place(pod, _views()[:1], MIX, ON).agent == 0


def test_the_offer_round_keeps_the_only_host_whole():
    bodies = [ranged_offer(f"o{k}", f"a{k}", gpus=8) for k in range(len(CORES))]
    for body, cores in zip(bodies, CORES, strict=True):
        body["resources"][0]["scalar"]["value"] = float(cores)  # cpus
    slots = [Slot([offer_view(body)]) for body in bodies]
    assert MIX is not None
    first = [s.agent_id for s in WholeScore(slots, MIX, params=OFF).order(slots, 1, 8.0, 64.0)]
    kept = [s.agent_id for s in WholeScore(slots, MIX, params=ON).order(slots, 1, 8.0, 64.0)]
    assert first[0] == "a0" and kept[-1] == "a0"
    # the 8-GPU pod itself: every candidate is a host of its shape, the only host it fits
    big = WholeScore(slots, MIX, params=ON).order(slots, 8, 120.0, 64.0)
    assert big[0].agent_id == "a0"


def test_hosts_counted_against_the_agents_the_pod_fits_on():
    # one agent with 8 GPUs free, nine with 2: every agent with the 8 GPUs hosts the 8-GPU
    # shape (no concentration by "gpus"), but the 1-GPU pod fits on ten agents, one of them a
    # host: ten times concentrated among its candidates
    mix = counted_mix({(8000, 1000, 1): 600, (64000, 1000, 8): 6})
    assert mix is not None
    guarded = host_keep.guarded_of(mix)
    assert guarded is not None
    n = 10
    cpu = np.full(n, 96_000)
    gpu = np.zeros((n, 8), dtype=np.int64)
    gpu[0] = 1000
    gpu[1:, :2] = 1000
    pod = fgd.ShareRequest(cpu_milli=8000, mem_mib=0, num_gpus=1)
    mem = np.full(n, 10**6)
    assert not host_keep.host_loss(pod, cpu, mem, gpu, guarded, 4.0, among="gpus").any()
    lost = host_keep.host_loss(pod, cpu, mem, gpu, guarded, 4.0, among="candidates")
    assert np.allclose(lost[0], 6 / 606 * 8000 * 9) and not lost[1:].any()
    # where the pod fits on fewer than five agents per host, nothing is counted
    few = host_keep.host_loss(pod, cpu[:4], mem[:4], gpu[:4], guarded, 4.0, among="candidates")
    assert not few.any()
