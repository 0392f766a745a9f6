"""The memory watchdog: per-process GPU memory through NVML, summed per container, checked
against each task's share; a task over its share is ended with a readable message.

Allowance (decided; docs/sharing.md): a share INCLUDES the CUDA context, as an MPS limit does.
On the H100 with driver 580 a context costs about 520 MiB and NVML counts it against the
process (1,024 MiB allocated reads as 1,542 MiB), and MPS's ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``
counts it too. Counting it here keeps one meaning of "a 4 GiB share" on every backend and keeps
the GPU's real memory within what Mesos accounted, so the shares of one GPU never add up to
more than it has. Users are told that a share of S MiB leaves about S - 550 MiB for their data
(``DLC_GPU_MEMORY_MIB`` carries S). Only a sampling tolerance (``slack_mib``) is added, and a
task must be over for ``strikes`` samples in a row, so a brief peak between two samples of an
allocator that frees at once is not fatal.

Processes map to containers through :func:`pids_from_top` (the Docker API's ``top``, host pids)
or :func:`pids_from_cgroups` (``/proc/<pid>/cgroup`` naming the container id).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dlc.executor.gpu_usage import ProcessGpuMemory, process_gpu_memory
from dlc.executor.periodic import Ticker
from dlc.scheduler.jobs.launch_spec import GpuShare

log = logging.getLogger(__name__)

#: rounding and sampling tolerance on top of the share, in MiB
DEFAULT_SLACK_MIB = 64
#: consecutive samples over the share before the task is ended
DEFAULT_STRIKES = 2


def gib_text(mib: float) -> str:
    """``4096`` -> ``4 GiB``, ``5427`` -> ``5.3 GiB``, ``512`` -> ``0.5 GiB``."""
    gib = mib / 1024
    return f"{gib:.0f} GiB" if mib % 1024 == 0 else f"{gib:.1f} GiB"


def exceeded_message(used_mib: int, share: GpuShare) -> str:
    """``used 5.3 GiB of its 4 GiB share on GPU 2`` (+ what counts and how to fix it)."""
    return (
        f"used {gib_text(used_mib)} of its {gib_text(share.memory_mib)} share on GPU "
        f"{share.gpu_index} (NVML, CUDA context included); ask for more with --gpu-memory"
    )


def pids_from_top(top: Mapping[str, Any]) -> set[int]:
    """Host pids from the Docker API's ``GET /containers/{id}/top`` answer."""
    titles = list(top.get("Titles") or [])
    if "PID" not in titles:
        return set()
    column = titles.index("PID")
    return {int(row[column]) for row in top.get("Processes") or [] if str(row[column]).isdigit()}


def pids_from_cgroups(container_id: str, proc_root: str = "/proc") -> set[int]:
    """Host pids whose ``/proc/<pid>/cgroup`` names ``container_id`` (cgroup v1 and v2)."""
    found: set[int] = set()
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "cgroup"), encoding="utf-8") as handle:
                if container_id in handle.read():
                    found.add(int(entry))
        except OSError:
            continue  # the process ended meanwhile
    return found


@dataclass
class _Watched:
    task_id: str
    container_id: str
    share: GpuShare
    strikes: int = 0


@dataclass(frozen=True)
class Violation:
    """A task over its share: its id, what it used and the message to end it with."""

    task_id: str
    container_id: str
    used_mib: int
    message: str


@dataclass
class MemoryWatchdog:
    """Samples GPU memory and reports tasks over their shares (one thread, optional).

    Args:
        nvml: an initialised NVML binding (pynvml or a fake).
        pids_of: container id -> its host pids.
        on_exceeded: called once per violating task, from the sampling thread.
        interval_s: seconds between samples in :meth:`start`'s thread.
        slack_mib, strikes: see the module docstring.
    """

    nvml: Any
    pids_of: Callable[[str], Iterable[int]]
    on_exceeded: Callable[[Violation], None] = lambda v: None
    interval_s: float = 2.0
    slack_mib: int = DEFAULT_SLACK_MIB
    strikes: int = DEFAULT_STRIKES
    _watched: dict[str, _Watched] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ticker: Ticker | None = None

    def watch(self, task_id: str, container_id: str, share: GpuShare) -> None:
        """Start watching a running task's container (shares with no memory are not watched)."""
        if share.memory_mib <= 0:
            return
        with self._lock:
            self._watched[task_id] = _Watched(task_id, container_id, share)

    def unwatch(self, task_id: str) -> None:
        """Stop watching ``task_id`` (it ended)."""
        with self._lock:
            self._watched.pop(task_id, None)

    def watching(self) -> list[str]:
        """Task ids watched now."""
        with self._lock:
            return sorted(self._watched)

    def used_mib(self, readings: list[ProcessGpuMemory], watched: _Watched) -> int:
        """What the container's processes hold on the share's GPU (unknown readings count 0)."""
        pids = set(self.pids_of(watched.container_id))
        share = watched.share
        return sum(
            r.used_mib or 0
            for r in readings
            if r.pid in pids
            and (
                r.gpu_index == share.gpu_index or (share.gpu_uuid and r.gpu_uuid == share.gpu_uuid)
            )
        )

    def check_once(self) -> list[Violation]:
        """Take one sample; report (and stop watching) every task over its share long enough."""
        with self._lock:
            watched = list(self._watched.values())
        if not watched:
            return []
        readings = process_gpu_memory(self.nvml)
        found = []
        for item in watched:
            used = self.used_mib(readings, item)
            if used <= item.share.memory_mib + self.slack_mib:
                item.strikes = 0
                continue
            item.strikes += 1
            if item.strikes >= self.strikes:
                found.append(
                    Violation(
                        item.task_id, item.container_id, used, exceeded_message(used, item.share)
                    )
                )
        for violation in found:
            self.unwatch(violation.task_id)
            self.on_exceeded(violation)
        return found

    def start(self) -> None:
        """Sample every ``interval_s`` on a daemon thread until :meth:`stop`."""
        with self._lock:
            if self._ticker is None:
                self._ticker = Ticker(self.interval_s, self.check_once, "gpu-watchdog")
        self._ticker.start()

    def stop(self) -> None:
        """Stop the sampling thread."""
        if self._ticker is not None:
            self._ticker.stop()
