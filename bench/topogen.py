"""Generate ``nvidia-smi topo -m`` text for machines no fixture covers.

Each machine is described by where its GPUs sit (socket, host bridge, upstream
switch, switch) and which pairs are NVLinked; the PCIe level of every pair follows
from the first place their paths differ, exactly as ``nvidia-smi`` derives it. The
output uses the current driver's layout (tab-separated cells, ``CPU Affinity`` and
``NUMA Affinity`` columns, legend) so that DLC's real parser reads it.

Usage: ``python bench/topogen.py NAME`` prints one machine; ``--list`` lists names.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

LEGEND = "\n".join(
    [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes"
        " (e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges"
        " within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host"
        " Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "",
    ]
)
_LEVELS = ("SYS", "NODE", "PHB", "PXB", "PIX")
CORES_PER_SOCKET = 24


@dataclass
class Layout:
    """A machine: one PCIe path per device and the NVLinks between GPUs.

    Attributes:
        gpus: per GPU ``(socket, host_bridge, upstream_switch, switch)``.
        nics: NIC name -> its path, same shape.
        nvlinks: ``(a, b)`` -> number of NVLinks.
    """

    gpus: list[tuple[int, int, int, int]]
    nics: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    nvlinks: dict[tuple[int, int], int] = field(default_factory=dict)


def level(path_a: tuple[int, ...], path_b: tuple[int, ...]) -> str:
    """``topo -m`` level of two device paths: where they first differ."""
    for depth, (a, b) in enumerate(zip(path_a, path_b, strict=True)):
        if a != b:
            return _LEVELS[depth]
    return "PIX"


def render(layout: Layout) -> str:
    """The ``topo -m`` text of a layout."""
    names = [f"GPU{i}" for i in range(len(layout.gpus))] + list(layout.nics)
    paths = list(layout.gpus) + list(layout.nics.values())
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i, name in enumerate(names):
        cells = []
        for j in range(len(names)):
            nv = layout.nvlinks.get((min(i, j), max(i, j)), 0)
            if i == j:
                cells.append(" X ")
            elif nv and i < len(layout.gpus) and j < len(layout.gpus):
                cells.append(f"NV{nv}")
            else:
                cells.append(level(paths[i], paths[j]))
        row = f"{name}\t" + "\t".join(cells)
        if i < len(layout.gpus):
            socket = paths[i][0]
            first = socket * CORES_PER_SOCKET
            row += f"\t{first}-{first + CORES_PER_SOCKET - 1}\t{socket}"
        lines.append(row)
    return "\n".join(lines) + "\n" + LEGEND


def dgx2_nvswitch() -> str:
    """16 GPUs on NVSwitch (NV6 every pair), 2 sockets, a NIC per GPU pair (PIX)."""
    gpus = [(g // 8, (g // 4) % 2, (g // 2) % 2, 0) for g in range(16)]
    nics = {f"mlx5_{k}": (k // 4, (k // 2) % 2, k % 2, 0) for k in range(8)}
    nvlinks = {(a, b): 6 for a in range(16) for b in range(a + 1, 16)}
    return render(Layout(gpus, nics, nvlinks))


def pcie_tree_16() -> str:
    """16 PCIe GPUs: 2 sockets x 2 switches x 4 GPUs.

    Socket 0's switches hang off one upstream switch (PXB between them); socket 1's
    sit on two root ports of one host bridge (PHB). A NIC on socket 0's second host
    bridge is NODE to that socket's GPUs.
    """
    gpus = [(0, 0, 0, g // 4) for g in range(8)] + [(1, 0, g // 4, 0) for g in range(8)]
    return render(Layout(gpus, {"mlx5_0": (0, 1, 0, 0)}))


def bridge_pairs_interleaved() -> str:
    """8 PCIe GPUs, even indices on socket 0; NV4 bridges on 0-4, 2-6, 1-5, 3-7."""
    gpus = [(g % 2, g // 2, 0, 0) for g in range(8)]
    return render(Layout(gpus, nvlinks={(0, 4): 4, (2, 6): 4, (1, 5): 4, (3, 7): 4}))


#: DGX-1 V100 hybrid cube-mesh NVLinks (as in the oneflow fixture)
DGX1_NVLINKS = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2,
    (5, 7): 1, (6, 7): 2,
}  # fmt: skip


def dgx1_missing_gpu() -> str:
    """DGX-1-like cube-mesh with GPU5 gone (failed/removed): 7 GPUs, renumbered."""
    keep = [0, 1, 2, 3, 4, 6, 7]
    new = {old: i for i, old in enumerate(keep)}
    gpus = [(old // 4, (old // 2) % 2, 0, 0) for old in keep]
    nvlinks = {(new[a], new[b]): n for (a, b), n in DGX1_NVLINKS.items() if a in new and b in new}
    return render(Layout(gpus, {"mlx5_0": (0, 1, 0, 0)}, nvlinks))


def mixed_pix_pxb() -> str:
    """8 PCIe GPUs, irregular: a PIX triple and a PIX pair under one PXB switch,
    a PIX pair and a lone GPU on socket 1."""
    gpus = [
        (0, 0, 0, 0),
        (0, 0, 0, 0),
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 0, 0, 1),
        (1, 0, 0, 0),
        (1, 0, 0, 0),
        (1, 1, 0, 0),
    ]
    return render(Layout(gpus, {"mlx5_0": (1, 1, 0, 0)}))


MACHINES: dict[str, Callable[[], str]] = {
    "gen-dgx2-nvswitch-16": dgx2_nvswitch,
    "gen-pcie-tree-16": pcie_tree_16,
    "gen-bridge-pairs-interleaved-8": bridge_pairs_interleaved,
    "gen-dgx1-missing-gpu-7": dgx1_missing_gpu,
    "gen-mixed-pix-pxb-8": mixed_pix_pxb,
}


def main(argv: list[str] | None = None) -> int:
    """Print one generated machine's ``topo -m`` text."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", choices=sorted(MACHINES))
    parser.add_argument("--list", action="store_true", help="list machine names")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        print("\n".join(sorted(MACHINES)))
        return 0
    sys.stdout.write(MACHINES[args.name]())
    return 0


if __name__ == "__main__":
    sys.exit(main())
