"""Rendering a GPU reservation into container arguments, by vendor, through the device seam.

The pure renderers live with their vendor (:mod:`dlc.devices.nvidia.render`,
:mod:`dlc.devices.amd.render`); this module keeps the names the executor and the sharing
code import, and :func:`render` picks the reservation's vendor backend.
"""

from __future__ import annotations

from dlc.devices.base import GpuContainerArgs, GpuReservation, merge_search_path
from dlc.devices.nvidia import render as _nvidia
from dlc.devices.nvidia.render import (
    CONTROL_DEVICES,
    DRIVER_BIN,
    DRIVER_LIBS,
    DRIVER_MOUNT,
    GpuStyle,
    container_ordinals,
    driver_volume_name,
    pick_style,
    render_legacy,
    render_none,
    render_toolkit,
)
from dlc.devices.registry import backend_for

__all__ = [
    "CONTROL_DEVICES",
    "DRIVER_BIN",
    "DRIVER_LIBS",
    "DRIVER_MOUNT",
    "GpuContainerArgs",
    "GpuReservation",
    "GpuStyle",
    "container_ordinals",
    "driver_volume_name",
    "merge_search_path",
    "pick_style",
    "render",
    "render_legacy",
    "render_none",
    "render_toolkit",
]


def render(
    reservation: GpuReservation, style: GpuStyle, device_root: str = "/dev"
) -> GpuContainerArgs:
    """Render ``reservation`` with its vendor's backend (NVIDIA: in ``style``).

    Raises:
        DlcError: the NVIDIA style is ``AUTO`` or lacks a fact, or the vendor is unknown.
    """
    if reservation.vendor == "nvidia" or style is GpuStyle.NONE or not reservation.indices:
        return _nvidia.render(reservation, style, device_root)
    return backend_for(reservation.vendor).render(reservation, style, device_root)
