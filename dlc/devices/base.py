"""The device seam: what every GPU vendor's backend provides, as plain data and a Protocol.

A backend (one folder per vendor under :mod:`dlc.devices`, registered in
:mod:`dlc.devices.registry`) answers four questions, in the shape of Nomad's device
plugins (fingerprint, reserve, stats):

* ``fingerprint``: what GPUs this host has, as a :class:`~dlc.topology.model.Topology`;
* ``render``: a reservation of some of them -> container arguments (devices, env, groups);
* ``stats``: how busy and full each GPU is;
* ``sharing``: which GPU-share enforcement the vendor offers, or why none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dlc.errors import DlcError
from dlc.topology.model import Topology


@dataclass(frozen=True)
class GpuReservation:
    """The GPUs one task holds on this agent.

    Attributes:
        indices: host GPU indices in allocator order (the container numbers them in this order).
        minors: ``/dev/nvidia<minor>`` numbers of the same GPUs (may differ from indices).
        uuids: the same GPUs' UUIDs, or empty when unknown.
        driver_version: host NVIDIA driver version (names the legacy driver volume).
        vendor: whose GPUs (``"nvidia"``/``"amd"``): picks the backend that renders them.
        cards: AMD only: ``/dev/dri/card<n>`` numbers of the same GPUs (``minors`` then
            hold their ``/dev/dri/renderD<n>`` numbers).
    """

    indices: tuple[int, ...] = ()
    minors: tuple[int, ...] = ()
    uuids: tuple[str, ...] = ()
    driver_version: str | None = None
    vendor: str = "nvidia"
    cards: tuple[int, ...] = ()

    def __post_init__(self):
        if len(set(self.indices)) != len(self.indices):
            raise DlcError(f"gpu_ids: duplicate GPU index in {list(self.indices)}")
        if self.minors and len(self.minors) != len(self.indices):
            raise DlcError("gpu_minors: need one minor number per GPU index")
        if self.uuids and len(self.uuids) != len(self.indices):
            raise DlcError("gpu_uuids: need one UUID per GPU index")


@dataclass(frozen=True)
class GpuContainerArgs:
    """Container arguments for one reservation (docker SDK vocabulary, plain data).

    Attributes:
        devices: ``host_path:container_path:permissions`` strings.
        volumes: named volume -> ``{"bind": path, "mode": "ro"}``.
        device_requests: ``DeviceRequest`` bodies (``Driver``, ``DeviceIDs``, ``Capabilities``).
        env: environment the container must get (wins over the job's own).
        path_prepend: entries to put in front of the image's ``PATH``.
        ld_library_path_prepend: entries to put in front of the image's ``LD_LIBRARY_PATH``.
        group_add: supplementary groups of the container's process (``video``/``render``
            on AMD, which own ``/dev/kfd`` and the DRM nodes).
        masked_paths: host files the container must not read, on top of the engine's own
            masks (the engine hides a masked directory behind an empty read-only tmpfs).
    """

    devices: tuple[str, ...] = ()
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    device_requests: tuple[dict, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    path_prepend: tuple[str, ...] = ()
    ld_library_path_prepend: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    masked_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU: how busy it was and how much memory it held.

    Attributes:
        gpu_index: the vendor tool's index.
        util_percent: percent of the last sample period a kernel ran (``None``: not told).
        memory_used_mib, memory_total_mib: device memory in use and in all.
    """

    gpu_index: int
    util_percent: int | None
    memory_used_mib: int
    memory_total_mib: int


@dataclass(frozen=True)
class SharingSupport:
    """What GPU sharing a vendor can enforce on a node.

    Attributes:
        modes: enforcement modes available (``mps``, ``watchdog``, ``mig``, ``none``);
            empty when shares must be refused.
        refusal: the one-line reason a share is refused, when ``modes`` is empty.
    """

    modes: tuple[str, ...]
    refusal: str = ""

    @property
    def allowed(self) -> bool:
        """Whether a share may be placed on this vendor's GPUs at all."""
        return bool(self.modes)


class DeviceBackend(Protocol):
    """One GPU vendor behind the seam (see the module docstring)."""

    vendor: str

    def fingerprint(self, from_file: str | Path | None = None) -> Topology:
        """This host's GPUs (or those a saved tool output describes)."""
        ...

    def render(
        self, reservation: GpuReservation, style: Any, device_root: str = "/dev"
    ) -> GpuContainerArgs:
        """Container arguments giving a container exactly the reserved GPUs."""
        ...

    def stats(self, source: Any, indices: tuple[int, ...]) -> list[GpuSample]:
        """Utilisation and memory of the GPUs ``indices`` read from ``source``."""
        ...

    def sharing(self) -> SharingSupport:
        """Which share enforcement this vendor offers."""
        ...


def merge_search_path(prepend: tuple[str, ...], current: str | None, default: str = "") -> str:
    """``prepend`` entries in front of ``current`` (or ``default``), without duplicates."""
    rest = [p for p in (current if current is not None else default).split(":") if p]
    out: list[str] = []
    for entry in (*prepend, *rest):
        if entry not in out:
            out.append(entry)
    return ":".join(out)
