"""Machines for the allocator tests: real ``topo -m`` fixtures and small variants."""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

from dlc.topology.model import P2PStatus, Topology
from dlc.topology.parse_topo import load_topology_text, parse_topo_m

FIXTURE_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "topology"
_BENCH = str(Path(__file__).resolve().parents[3] / "bench")
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)


def complete_fixture_names() -> list[str]:
    """Stems of the complete ``topo -m`` fixtures (no truncated copies, no p2p files)."""
    return sorted(
        p.stem
        for p in FIXTURE_DIR.glob("*.txt")
        if not p.name.endswith((".p2p.txt", "_TRUNCATED.txt"))
    )


@cache
def fixture(stem_prefix: str) -> Topology:
    """The fixture whose file name starts with ``stem_prefix`` (p2p matrix merged if any)."""
    matches = [
        p
        for p in sorted(FIXTURE_DIR.glob(f"{stem_prefix}*.txt"))
        if not p.name.endswith(".p2p.txt")
    ]
    assert len(matches) == 1, f"{stem_prefix!r} matches {matches}"
    path = matches[0]
    p2p = path.with_name(path.stem + ".p2p.txt")
    p2p_text = p2p.read_text() if p2p.exists() else None
    return load_topology_text(path.read_text(), p2p_text)


def generated(name: str) -> Topology:
    """A machine from ``bench/topogen.py``, read by the real parser."""
    return _generated(name)


@cache
def _generated(name: str) -> Topology:
    import topogen  # bench/ is put on sys.path below

    return parse_topo_m(topogen.MACHINES[name]())


def small_generated_names() -> list[str]:
    """Generated machines small enough for exhaustive comparisons (<= 8 GPUs)."""
    import topogen

    return sorted(n for n in topogen.MACHINES if len(_generated(n).gpus) <= 8)


def dgx1_volta() -> Topology:
    """DGX-1 V100 hybrid cube-mesh (NV1/NV2), 2 sockets, one mlx5 NIC."""
    return fixture("dgx1-v100")


def bridge_pairs() -> Topology:
    """8 PCIe A100s, NV12 bridges on 0-2, 1-3, 4-5, 6-7, all else SYS (k8s-dp #546)."""
    return fixture("pcie-8gpu_nv12")


def pcie_8gpu() -> Topology:
    """8 P40s: two PIX quads joined at PXB."""
    return fixture("p40-8gpu")


def rtx4090_all_sys() -> Topology:
    """8 RTX 4090s, every pair SYS, NUMA 0 for GPU0-3 and 1 for GPU4-7."""
    return fixture("rtx4090-8gpu")


def hgx_a100() -> Topology:
    """HGX A100 80GB: NV12 all-to-all, 8 NICs, 2 sockets."""
    return fixture("hgx-a100-80gb")


GNS_BOX_TEXT = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      PHB     SYS     SYS     0-15            0
GPU1    PHB      X      SYS     SYS     0-15            0
GPU2    SYS     SYS      X      NODE    16-31           1
GPU3    SYS     SYS     NODE     X      16-31           1
"""


def geforce_gns_box() -> Topology:
    """4 GPUs: 0-1 share a host bridge but report GNS; 2-3 are NODE with P2P OK."""
    status = {(a, b): P2PStatus.GNS for a in range(4) for b in range(4) if a != b}
    status[(2, 3)] = status[(3, 2)] = P2PStatus.OK
    return parse_topo_m(GNS_BOX_TEXT).with_p2p(status)


def with_hardware(topo: Topology, models: list[str], memory_mib: list[int]) -> Topology:
    """A copy of ``topo`` whose GPUs carry models and memory sizes."""
    gpus = tuple(
        replace(g, model=m, memory_mib=mem)
        for g, m, mem in zip(topo.gpus, models, memory_mib, strict=True)
    )
    return replace(topo, gpus=gpus)
