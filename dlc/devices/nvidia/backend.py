"""The NVIDIA backend: wraps the existing discovery, rendering, sampling and sharing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlc.devices.base import GpuContainerArgs, GpuReservation, GpuSample, SharingSupport
from dlc.devices.nvidia.render import GpuStyle, render
from dlc.devices.nvidia.stats import sample_gpus
from dlc.topology.model import NVIDIA, Topology


class NvidiaBackend:
    """NVML (or ``nvidia-smi``) facts; toolkit/legacy devices; MPS, watchdog or MIG shares."""

    vendor = NVIDIA

    def fingerprint(self, from_file: str | Path | None = None) -> Topology:
        """This host's NVIDIA GPUs (NVML, then ``nvidia-smi``), or a saved ``topo -m``."""
        from dlc.topology.discovery.discover import discover

        return discover(from_file=from_file)

    def render(
        self, reservation: GpuReservation, style: Any, device_root: str = "/dev"
    ) -> GpuContainerArgs:
        """Toolkit ``DeviceRequest`` or legacy ``/dev/nvidia*`` + driver volume."""
        return render(reservation, GpuStyle(style), device_root)

    def stats(self, source: Any, indices: tuple[int, ...]) -> list[GpuSample]:
        """NVML utilisation and memory (``source`` is an initialised NVML binding)."""
        return sample_gpus(source, indices)

    def sharing(self) -> SharingSupport:
        """MPS limits, the NVML memory watchdog, existing MIG instances, or time-slicing."""
        return SharingSupport(modes=("mps", "watchdog", "mig", "none"))


BACKEND = NvidiaBackend()
