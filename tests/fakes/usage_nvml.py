"""A fake NVML for allocated-versus-used tests, built from the real H100's readings.

From tests/topology/data/h100-x1/: the UUID, the model and 81,559 MiB in all
(``topology_NVML.json``), idle at 0 % (``smi_q.txt``); idle memory in use is the 480 MiB
``smi_q.txt`` lists as *Reserved*: nvidia-smi shows it apart, but NVML's
``nvmlDeviceGetMemoryInfo`` counts it as used (the real H100 read 480 MiB used when idle,
docs/executor.md, "GPU usage"). From docs/gpu-check.md:
a process that allocated 1,024 MiB reads 1,542 MiB through NVML (its ~520 MiB CUDA context
included). A test starts and stops "processes" on GPUs with a utilisation each; device memory
in use is the sum of the processes' memory, as on the real GPU.

``gpus=n`` clones the H100 ``n`` times (indices 0..n-1, UUIDs derived from the real one),
for 8-GPU agents.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

DATA = Path(__file__).parents[1] / "topology" / "data" / "h100-x1"
MIB = 1 << 20
#: NVML's reading of a process that allocated 1,024 MiB on the H100 (driver 580)
ONE_GIB_PROCESS_MIB = 1542


def h100_facts() -> dict:
    """UUID, model, memory in all, idle utilisation and memory used of the real H100."""
    gpu = json.loads((DATA / "topology_NVML.json").read_text())["gpus"][0]
    smi = (DATA / "smi_q.txt").read_text()
    reserved = int(re.search(r"FB Memory Usage.*?Reserved\s*:\s*(\d+) MiB", smi, re.S).group(1))
    used = int(re.search(r"FB Memory Usage.*?Used\s*:\s*(\d+) MiB", smi, re.S).group(1))
    util = int(re.search(r"Utilization\s*\n\s*GPU\s*:\s*(\d+) %", smi).group(1))
    return {
        "uuid": gpu["uuid"],
        "model": gpu["model"],
        "memory_mib": gpu["memory_mib"],
        "idle_used_mib": reserved + used,  # what NVML's memory info reads on the idle GPU
        "idle_util": util,
    }


class NVMLError(Exception):
    """The fake's ``NVMLError``."""


@dataclass
class _Process:
    pid: int
    gpu: int
    used_mib: int
    util: int


class H100UsageNvml:
    """``gpus`` H100s whose load the test sets with :meth:`run` / :meth:`end`."""

    NVMLError = NVMLError

    def __init__(self, gpus: int = 1, utilization: bool = True) -> None:
        facts = h100_facts()
        self.total_mib = facts["memory_mib"]
        self.idle_used_mib, self.idle_util = facts["idle_used_mib"], facts["idle_util"]
        base = facts["uuid"]
        self.uuids = [base if i == 0 else f"{base[:-2]}{i:02x}" for i in range(gpus)]
        self.model = facts["model"]
        self.processes: list[_Process] = []
        self.lost: set[int] = set()
        self.utilization = utilization
        self.initialised = 0

    # -- what the test does ------------------------------------------------------------
    def run(self, pid: int, gpu: int, used_mib: int = ONE_GIB_PROCESS_MIB, util: int = 0) -> None:
        """A process ``pid`` holds ``used_mib`` on ``gpu`` and keeps it ``util`` % busy."""
        self.processes.append(_Process(pid, gpu, used_mib, util))

    def end(self, pid: int) -> None:
        """The process ended."""
        self.processes = [p for p in self.processes if p.pid != pid]

    # -- pynvml's surface --------------------------------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if not 0 <= index < len(self.uuids) or index in self.lost:
            raise NVMLError("GPU is lost" if index in self.lost else "Invalid Argument")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return self.uuids[handle]

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self.model

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        used = self.idle_used_mib + sum(p.used_mib for p in self.processes if p.gpu == handle)
        total = self.total_mib * MIB
        return SimpleNamespace(total=total, used=used * MIB, free=total - used * MIB)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list:  # noqa: N802
        return [
            SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_mib * MIB)
            for p in self.processes
            if p.gpu == handle
        ]

    def __getattr__(self, name: str):
        # a binding too old for utilisation rates lacks the function (call_optional: None)
        if name == "nvmlDeviceGetUtilizationRates" and self.utilization:
            return self._rates
        raise AttributeError(name)

    def _rates(self, handle: int) -> SimpleNamespace:
        busy = [p.util for p in self.processes if p.gpu == handle]
        return SimpleNamespace(gpu=min(100, sum(busy)) if busy else self.idle_util, memory=0)
