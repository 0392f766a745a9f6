"""Estimated unidirectional P2P bandwidth of a GPU pair, in GB/s.

Measured figures from the native probe replace these estimates (see
:meth:`dlc.topology.model.Topology.with_measured`). The estimates are nominal
per-direction link rates, derated for PCIe protocol overhead:

* NVLink per link and direction: NVLink 1 (P100) 20 GB/s; NVLink 2 (V100) 25;
  NVLink 3 (A100) 25; NVLink 3 bridge on GeForce RTX 3090 14.06 (``nvidia-smi
  nvlink -s``); NVLink 4 (H100/H200/H20) 25 (18 links, 450 GB/s per direction).
* PCIe: a Gen3 x16 path delivers ~13 GB/s P2P through a single switch and less
  the more bridges it crosses; through the CPU's host bridge ~10, between host
  bridges of one socket ~9, and P2P across the socket interconnect is usually not
  possible at all, so traffic is staged through host memory (~6).
* Pairs without P2P support copy through host memory: the staged estimate.
"""

from __future__ import annotations

from dlc.topology.model import PairLink, PcieLevel

#: GB/s per NVLink and direction, by substring of the GPU model name.
NVLINK_GBPS_BY_MODEL: tuple[tuple[str, float], ...] = (
    ("P100", 20.0),
    ("V100", 25.0),
    ("A100", 25.0),
    ("A800", 25.0),
    ("RTX 3090", 14.06),
    ("H100", 25.0),
    ("H200", 25.0),
    ("H800", 25.0),
    ("H20", 25.0),
    ("B200", 50.0),
    # AMD Infinity Fabric (XGMI), per link and direction: MI200 links 50 GB/s (OLCF
    # Frontier guide: 4 links, 200 GB/s, between the two GCDs of an MI250X); MI300
    # links 64 GB/s (128 GB/s bidirectional per link, AMD MI300X platform data sheet).
    ("MI250", 50.0),
    ("MI210", 50.0),
    ("MI300", 64.0),
    ("MI308", 64.0),
    ("MI325", 64.0),
)
#: per-link rate when the model is unknown (NVLink 2 to 4 all run 25 GB/s).
DEFAULT_NVLINK_GBPS = 25.0

#: P2P copy rate over PCIe by common-ancestor level (GB/s, one direction).
PCIE_P2P_GBPS: dict[PcieLevel, float] = {
    PcieLevel.PIX: 13.0,
    PcieLevel.PXB: 12.0,
    PcieLevel.PHB: 10.0,
    PcieLevel.NODE: 9.0,
    PcieLevel.SYS: 7.0,
}
#: copy staged through host memory (no P2P): what the pair gets without P2P.
STAGED_GBPS = 6.0


def nvlink_gbps(model: str | None) -> float:
    """Per-link, per-direction NVLink rate for a GPU model name."""
    if model:
        upper = model.upper()
        for needle, rate in NVLINK_GBPS_BY_MODEL:
            if needle.upper() in upper:
                return rate
    return DEFAULT_NVLINK_GBPS


def estimate_gbps(link: PairLink, model: str | None = None) -> float:
    """Bandwidth of ``link``: the measured figure if any, else the estimate.

    Args:
        link: the pair.
        model: GPU model name of the pair, to pick the NVLink generation.
    """
    if link.measured_gbps is not None:
        return link.measured_gbps
    if link.nvlinks:
        return link.nvlinks * nvlink_gbps(model)
    if not link.p2p_capable or link.pcie_level is None:
        return STAGED_GBPS
    return PCIE_P2P_GBPS[link.pcie_level]
