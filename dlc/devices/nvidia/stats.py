"""What each process really uses on each GPU, read through NVML (node side, no Docker).

The building block of the memory watchdog and of allocated-versus-used reporting
(:mod:`dlc.executor.usage`): the executor maps the pids to its containers and compares with
each task's share, or reports them.

Facts from a real H100 (driver 580.159.04, see docs/gpu-check.md) that shape this code:

* ``nvmlDeviceGetComputeRunningProcesses`` lists MPS clients *and* the MPS server, each with
  its own memory (the server held 66 MiB, a client 1,540 MiB);
* ``nvmlDeviceGetMPSComputeRunningProcesses`` lists only the MPS clients;
* ``nvidia-smi --query-compute-apps`` shows only the MPS server, never the clients, so a
  watchdog built on nvidia-smi would see no tenant at all under MPS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlc.devices.base import GpuSample
from dlc.topology.discovery.nvml import call_optional

__all__ = ["GpuSample", "ProcessGpuMemory", "process_gpu_memory", "sample_gpus"]

_MIB = 1 << 20


@dataclass(frozen=True)
class ProcessGpuMemory:
    """One process's memory on one GPU.

    Attributes:
        gpu_index: NVML index of the GPU.
        gpu_uuid: its UUID (``GPU-...``), or ``None`` when NVML did not say.
        pid: host pid of the process.
        used_mib: device memory it holds, or ``None`` when NVML cannot tell (some
            drivers hide it in containers without the right capabilities).
        mps_client: the process reaches the GPU through an MPS server.
    """

    gpu_index: int
    gpu_uuid: str | None
    pid: int
    used_mib: int | None
    mps_client: bool = False


def process_gpu_memory(nvml: Any) -> list[ProcessGpuMemory]:
    """Every compute process on every GPU with its memory (``nvml`` is initialised).

    An NVML call that fails for one GPU (lost GPU, permissions) leaves that GPU out
    rather than failing the whole reading: the watchdog acts on what it can see.
    """
    found: list[ProcessGpuMemory] = []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError:
            continue
        uuid = call_optional(nvml, "nvmlDeviceGetUUID", handle)
        if isinstance(uuid, bytes):
            uuid = uuid.decode(errors="replace")
        mps = {
            p.pid
            for p in (call_optional(nvml, "nvmlDeviceGetMPSComputeRunningProcesses", handle) or ())
        }
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            found.append(
                ProcessGpuMemory(
                    index, uuid, int(proc.pid), int(used) // _MIB if used else None, proc.pid in mps
                )
            )
    return found


def sample_gpus(nvml: Any, indices: list[int] | tuple[int, ...]) -> list[GpuSample]:
    """Read utilisation and memory of the GPUs ``indices`` (``nvml`` is initialised).

    A GPU NVML cannot read (lost, no permission) is left out of this sample; a binding
    without utilisation rates gives ``util_percent=None`` rather than no sample.
    """
    found = []
    for index in indices:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError:
            continue
        rates = call_optional(nvml, "nvmlDeviceGetUtilizationRates", handle)
        util = int(rates.gpu) if rates is not None else None
        found.append(GpuSample(index, util, int(memory.used) // _MIB, int(memory.total) // _MIB))
    return found
