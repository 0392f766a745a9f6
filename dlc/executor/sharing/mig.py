"""The MIG instances that exist already, read through NVML. DLC never creates, destroys or
reconfigures MIG: it only offers what the operator made (``nvidia-smi mig -cgi ... -C``).

A MIG device is named in a container by its UUID (``MIG-...``) in ``NVIDIA_VISIBLE_DEVICES``
(toolkit style); :func:`dlc.executor.sharing.render.render_share` does that for a ``mig`` share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_MIB = 1 << 20
#: ``NVIDIA H100 80GB HBM3 MIG 1g.10gb`` -> ``1g.10gb`` (NVML's name of a MIG device)
_PROFILE = re.compile(r"(\d+g\.\d+gb)", re.IGNORECASE)
NVML_DEVICE_MIG_ENABLE = 1


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance of a GPU.

    Attributes:
        gpu_index: the parent GPU's index.
        slot: the MIG device index within the parent (NVML's).
        uuid: ``MIG-...``, what the container is given.
        profile: ``1g.10gb``-style profile, or ``None`` when the name does not carry it.
        memory_mib: the instance's memory.
    """

    gpu_index: int
    slot: int
    uuid: str
    profile: str | None
    memory_mib: int | None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def list_mig_devices(nvml: Any) -> list[MigDevice]:
    """Every existing MIG device on every GPU whose MIG mode is enabled (read-only calls).

    A GPU without MIG support (``NotSupported``) or with MIG disabled has none; an empty
    slot (``NotFound``) is skipped. ``nvml`` is initialised.
    """
    found: list[MigDevice] = []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
            if current != NVML_DEVICE_MIG_ENABLE:
                continue
            slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except nvml.NVMLError:
            continue
        for slot in range(slots):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                uuid = _text(nvml.nvmlDeviceGetUUID(mig))
            except nvml.NVMLError:
                continue
            found.append(MigDevice(index, slot, uuid, _profile(nvml, mig), _memory(nvml, mig)))
    return found


def _profile(nvml: Any, mig: Any) -> str | None:
    try:
        match = _PROFILE.search(_text(nvml.nvmlDeviceGetName(mig)))
    except nvml.NVMLError:
        return None
    return match.group(1).lower() if match else None


def _memory(nvml: Any, mig: Any) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(mig).total) // _MIB
    except nvml.NVMLError:
        return None


def find_mig_device(devices: list[MigDevice], uuid: str) -> MigDevice | None:
    """The MIG device with ``uuid``, if it still exists."""
    return next((d for d in devices if d.uuid == uuid), None)
