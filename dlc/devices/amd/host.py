"""Which DRM nodes belong to which AMD GPU on this host (``/sys/class/drm``).

Each ``/sys/class/drm/card<n>`` and ``renderD<n>`` has a ``device`` link to its PCI
device; GPUs are indexed by PCI bus order, as ``amd-smi`` lists them. Parsing is pure on
(name, bus id) pairs; reading is a thin wrapper tests point at a temp directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_NODE_RE = re.compile(r"(card|renderD)([0-9]{1,4})")
#: PCI vendor id of AMD/ATI in sysfs ``vendor`` files
AMD_PCI_VENDOR = "0x1002"


@dataclass(frozen=True)
class AmdHostGpu:
    """One AMD GPU's DRM nodes: ``/dev/dri/card<card>`` and ``/dev/dri/renderD<render>``."""

    bus_id: str
    card: int
    render: int


def pair_nodes(nodes: list[tuple[str, str]]) -> list[AmdHostGpu]:
    """GPUs from ``(node name, PCI bus id)`` pairs, in PCI bus order (the SMI index order).

    A bus id with a card but no render node (a display-only function) is left out.
    """
    cards: dict[str, int] = {}
    renders: dict[str, int] = {}
    for name, bus in nodes:
        match = _NODE_RE.fullmatch(name)
        if match:
            (cards if match.group(1) == "card" else renders)[bus.lower()] = int(match.group(2))
    return [AmdHostGpu(bus, cards[bus], renders[bus]) for bus in sorted(cards) if bus in renders]


class SysfsDrm:
    """Reads ``/sys/class/drm`` (adapter; ``root`` is a temp directory in tests)."""

    def __init__(self, root: str | Path = "/sys/class/drm"):
        self.root = Path(root)

    def gpus(self) -> list[AmdHostGpu]:
        """This host's AMD GPUs with their DRM nodes (empty when none)."""
        found = []
        for node in sorted(self.root.glob("*")):
            device = node / "device"
            try:
                vendor = (device / "vendor").read_text().strip()
                bus = os.path.basename(os.path.realpath(device))
            except OSError:
                continue
            if vendor == AMD_PCI_VENDOR:
                found.append((node.name, bus))
        return pair_nodes(found)
