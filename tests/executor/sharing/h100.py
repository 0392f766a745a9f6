"""A fake NVML built from what the real H100 reported (tests/topology/data/h100-x1/,
docs/gpu-check.md): its UUID, 81,559 MiB, MIG disabled, and per-process memory as measured
(a client holding 1,024 MiB reads 1,542 MiB; under MPS a client 1,540 MiB and the server 66)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

DATA = Path(__file__).parents[2] / "topology" / "data" / "h100-x1"
_MIB = 1 << 20
#: NVML's reading of a process holding 1,024 MiB of allocations (its CUDA context included)
CLIENT_1GIB_MIB = 1542
#: the same under MPS, for the client, and the MPS server's own memory
MPS_CLIENT_1GIB_MIB = 1540
MPS_SERVER_MIB = 66


class NvmlError(Exception):
    """The fake's ``NVMLError``."""


def h100_gpu() -> dict:
    """The H100's NVML document entry (uuid, memory, MIG mode)."""
    return json.loads((DATA / "topology_NVML.json").read_text())["gpus"][0]


class FakeH100Nvml(SimpleNamespace):
    """One H100 whose process list the test sets: ``procs`` = [(pid, MiB)], ``mps`` = pids."""

    NVMLError = NvmlError

    def __init__(self) -> None:
        gpu = h100_gpu()
        super().__init__(uuid=gpu["uuid"], memory_mib=gpu["memory_mib"], mig=gpu["mig_mode"])
        self.procs: list[tuple[int, int | None]] = []
        self.mps: set[int] = set()
        self.calls: list[str] = []

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - pynvml's names
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        return f"gpu{index}"

    def nvmlDeviceGetUUID(self, handle: str) -> bytes:  # noqa: N802
        return self.uuid.encode()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list:  # noqa: N802
        self.calls.append("procs")
        return [SimpleNamespace(pid=p, usedGpuMemory=m * _MIB if m else m) for p, m in self.procs]

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: str) -> list:  # noqa: N802
        return [
            SimpleNamespace(pid=p, usedGpuMemory=m * _MIB) for p, m in self.procs if p in self.mps
        ]

    def nvmlDeviceGetMigMode(self, handle: str) -> tuple[int, int]:  # noqa: N802
        return (1, 1) if self.mig == "enabled" else (0, 0)
