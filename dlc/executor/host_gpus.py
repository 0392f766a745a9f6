"""What the NVIDIA kernel driver says about this host's GPUs (``/proc/driver/nvidia``).

The executor needs two facts the scheduler may not have sent: each GPU's device minor number
(``/dev/nvidia<minor>``, which need not equal its index) and the driver version (it names the
legacy driver volume). The kernel driver publishes both under ``/proc/driver/nvidia`` without
NVML; parsing is pure and tested on text, reading is a thin wrapper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dlc.errors import DlcError

_VERSION_RE = re.compile(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class HostGpu:
    """One GPU as ``/proc/driver/nvidia/gpus/<bus>/information`` describes it."""

    bus_id: str
    minor: int
    uuid: str | None


def parse_information(text: str) -> HostGpu:
    """Parse one ``information`` file.

    Raises:
        DlcError: the ``Bus Location`` or ``Device Minor`` line is missing or malformed.
    """
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        minor = int(fields["Device Minor"])
        bus_id = fields["Bus Location"].lower()
    except (KeyError, ValueError):
        raise DlcError(
            "/proc/driver/nvidia: GPU information lacks Bus Location/Device Minor"
        ) from None
    uuid = fields.get("GPU UUID") or None
    return HostGpu(bus_id=bus_id, minor=minor, uuid=uuid)


def parse_driver_version(text: str) -> str:
    """The driver version in ``/proc/driver/nvidia/version`` (``... Kernel Module  535.104.05``).

    Raises:
        DlcError: no version in the text.
    """
    match = _VERSION_RE.search(text)
    if not match:
        raise DlcError("/proc/driver/nvidia/version: no 'Kernel Module <version>' line")
    return match.group(1)


def index_minors(gpus: list[HostGpu]) -> dict[int, int]:
    """GPU index -> minor; indices follow PCI bus order, as ``nvidia-smi`` numbers them."""
    ordered = sorted(gpus, key=lambda g: g.bus_id)
    return {index: gpu.minor for index, gpu in enumerate(ordered)}


class ProcDriverInfo:
    """Reads the driver facts of this host (adapter; tests use a temp directory as root)."""

    def __init__(self, root: str | Path = "/proc/driver/nvidia"):
        self.root = Path(root)

    def driver_version(self) -> str | None:
        """The driver version, or ``None`` when no NVIDIA driver is loaded."""
        try:
            return parse_driver_version((self.root / "version").read_text())
        except OSError:
            return None

    def minors(self) -> dict[int, int]:
        """GPU index -> device minor (empty when no NVIDIA driver is loaded)."""
        gpus = [
            parse_information(info.read_text())
            for info in sorted((self.root / "gpus").glob("*/information"))
        ]
        return index_minors(gpus)
