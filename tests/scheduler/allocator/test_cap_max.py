"""``ScoreParams.cap_max``: a share's growth is at least the growth without the CPU cap, so a
CPU-heavy share does not take a CPU-poor agent's last cores (docs/simulator.md, "gpushare100
and multigpu40 against FGD")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd


def _share(milli: int, cpu_milli: int) -> fgd.ShareRequest:
    return fgd.ShareRequest(cpu_milli=cpu_milli, mem_mib=0, num_gpus=1, gpu_milli=milli)


#: gpushare100's most frequent share shapes, weighted by their pods in the trace
MIX = fgd.WorkloadMix(
    (
        _share(810, 3152), _share(470, 11908), _share(470, 8000), _share(320, 4000),
        _share(650, 11908), _share(230, 4000), _share(460, 6000),
    ),
    (2373.0, 879.0, 833.0, 559.0, 532.0, 283.0, 281.0),
)  # fmt: skip


def _views() -> list[fgd.AgentView]:
    """A 2-GPU, 16-core node holding one 810 share (12.85 cores and 190 + 1000 left), and an
    empty 8-GPU, 96-core node (openb's P100 and G2 nodes, as in seed 42 at 0.4% of demand)."""
    return [
        fgd.AgentView("p100", 12848, 100_000, "gpu", (190, 1000)),
        fgd.AgentView("g2", 96000, 400_000, "gpu", (1000,) * 8),
    ]


def test_cap_alone_sends_the_heavy_share_to_the_cpu_poor_node():
    """With the cap alone (``cap_max="none"``) the P100 node's second GPU counts as mostly
    fragmented already (its 12.85 cores host one 11.9-core share), so the 650 share's growth
    is lowest there, and it takes the node's last cores: 190 + 350 thousandths stay with 0.94
    cores."""
    params = replace(fragscore.DEFAULT_PARAMS, cap_max="none")
    placed = fragscore.place(_share(650, 11908), _views(), MIX, params)
    assert placed is not None and placed.agent == 0


@pytest.mark.parametrize("which", ["heavy", "shares", "all"])
def test_cap_max_keeps_the_heavy_share_off_the_cpu_poor_node(which):
    """The 650 share asks 18.3 cores a GPU, more than the mix's tasks (10.4): it is heavy."""
    params = replace(fragscore.DEFAULT_PARAMS, cap_max=which)
    placed = fragscore.place(_share(650, 11908), _views(), MIX, params)
    assert placed is not None and placed.agent == 1


def test_cap_max_still_puts_a_cpu_light_share_on_the_cpu_poor_node():
    """An 810 share of 3.15 cores fits the P100 node's whole GPU and leaves cores for
    another: both measures agree there (no CPU stranded)."""
    params = replace(fragscore.DEFAULT_PARAMS, cap_max="shares")
    placed = fragscore.place(_share(810, 3152), _views(), MIX, params)
    assert placed is not None and placed.agent == 0


def test_heavy_is_judged_against_the_mix():
    """Which shares count as heavy: more cores per GPU thousandth than the mix's GPU tasks
    (weighted by their GPU thousandths); whole-GPU and CPU-only tasks never."""
    mix = fragscore.mix_arrays(MIX, ["gpu"])
    params = replace(fragscore.DEFAULT_PARAMS, cap_max="heavy")
    assert fragscore._cap_max(_share(650, 11908), mix, params)
    assert fragscore._cap_max(_share(320, 4000), mix, params)
    assert not fragscore._cap_max(_share(810, 3152), mix, params)
    whole = fgd.ShareRequest(cpu_milli=64000, mem_mib=0, num_gpus=1, gpu_milli=1000)
    assert not fragscore._cap_max(whole, mix, params)
    assert not fragscore._cap_max(replace(whole, num_gpus=0, gpu_milli=0), mix, params)
    off = replace(params, cpu_cap="none")
    assert not fragscore._cap_max(_share(650, 11908), mix, off)
