"""The AMD (ROCm) backend: SMI discovery, DRM-node rendering, SMI sampling, no shares."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dlc.devices.amd.render import ROCM_GROUPS, device_paths, render_rocm
from dlc.devices.base import GpuContainerArgs, GpuReservation, GpuSample, SharingSupport
from dlc.topology.model import AMD, Topology

#: why shares are refused on AMD GPUs (docs/sharing.md, "AMD GPUs")
NO_SHARE_REASON = (
    "GPU shares are not offered on AMD GPUs: ROCm has no MPS-like per-process compute or "
    "memory limit that DLC can enforce; ask for whole GPUs (--gpus N)"
)


class AmdBackend:
    """``amd-smi`` (else ``rocm-smi``) facts; ``/dev/kfd`` + render nodes; no shares."""

    vendor = AMD

    def fingerprint(self, from_file: str | Path | None = None) -> Topology:
        """This host's AMD GPUs from ``amd-smi`` or ``rocm-smi``, or a saved output file.

        Raises:
            DiscoveryError: neither tool is on PATH or both fail.
            TopologyParseError: the tool's output is malformed.
        """
        from dlc.topology.discovery.amd_smi import topology_from_amd_smi
        from dlc.topology.discovery.discover import discover

        if from_file is not None:
            return discover(from_file=from_file)
        return topology_from_amd_smi()

    def render(
        self, reservation: GpuReservation, style: Any = None, device_root: str = "/dev"
    ) -> GpuContainerArgs:
        """``/dev/kfd``, the GPUs' ``renderD``/``card`` nodes, and the groups owning them."""
        if not reservation.indices:
            return render_rocm(reservation, device_root)
        paths = [f"{device_root.rstrip('/')}/{p}" for p in device_paths(reservation)]
        return render_rocm(reservation, device_root, node_groups(paths))

    def stats(self, source: Any, indices: tuple[int, ...]) -> list[GpuSample]:
        """Samples from ``rocm-smi --showuse --showmeminfo vram --json`` (``source``: its text)."""
        return parse_rocm_usage(source, indices)

    def sharing(self) -> SharingSupport:
        """None: see :data:`NO_SHARE_REASON`."""
        return SharingSupport(modes=(), refusal=NO_SHARE_REASON)


def node_groups(paths: list[str]) -> tuple[str, ...]:
    """The numeric group ids owning ``paths`` (the host's ``video``/``render``), in order.

    Numeric ids need no entry in the image's ``/etc/group``; a node that cannot be read
    falls back to the group names, which is what ROCm's own docs pass to ``docker run``.
    Group 0 is never passed: it would give the job the root group (every root-group file it
    can see); a node owned by it opens only if it is open to all, which needs no group.
    """
    gids: list[str] = []
    for path in paths:
        try:
            gid = str(os.stat(path).st_gid)
        except OSError:
            return ROCM_GROUPS
        if gid != "0" and gid not in gids:
            gids.append(gid)
    return tuple(gids)


def parse_rocm_usage(text: str, indices: tuple[int, ...]) -> list[GpuSample]:
    """GPU use and VRAM of ``indices`` from ``rocm-smi --showuse --showmeminfo vram --json``.

    A card missing from the output or with unreadable numbers is left out of the sample.
    """
    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return []
    found = []
    for index in indices:
        card = doc.get(f"card{index}") if isinstance(doc, dict) else None
        if not isinstance(card, dict):
            continue
        try:
            total = int(card["VRAM Total Memory (B)"]) >> 20
            used = int(card["VRAM Total Used Memory (B)"]) >> 20
        except (KeyError, ValueError):
            continue
        util = card.get("GPU use (%)")
        found.append(GpuSample(index, int(str(util)) if str(util).isdigit() else None, used, total))
    return found


BACKEND = AmdBackend()
