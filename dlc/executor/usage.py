"""Allocated versus used, node side: sample the GPUs of running tasks and report them.

While a task runs, :class:`UsageSampler` reads each of its GPUs every ``interval_s`` through
NVML (:func:`~dlc.executor.gpu_usage.sample_gpus`: utilisation and device memory;
:func:`~dlc.executor.gpu_usage.process_gpu_memory` mapped to the task's container: what the
task itself holds) into a small window (:class:`UsageWindow`, pure), and every
``report_every`` samples sends one report for all its tasks through ``send`` (the executor
driver's framework message; the format is :func:`dlc.scheduler.tasks.usage.encode_report`).

A host without NVML (a CPU agent, no driver, simulated GPUs) samples nothing and raises
nothing: the first failure to load NVML is logged once and the sampler stays off.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dlc.executor.gpu_usage import GpuSample, process_gpu_memory, sample_gpus
from dlc.executor.periodic import Ticker
from dlc.scheduler.tasks.usage import GpuUsage, encode_report

log = logging.getLogger(__name__)

#: seconds between samples (``dlc executor --gpu-sample-interval``, ``DLC_GPU_SAMPLE_S``)
DEFAULT_INTERVAL_S = 10.0
#: samples kept per GPU: the window the mean and the maximum are taken over (1 minute)
DEFAULT_WINDOW = 6
#: samples between two reports (one report per 30 s at the default interval)
DEFAULT_REPORT_EVERY = 3


@dataclass(frozen=True)
class _Reading:
    util: int | None
    used_mib: int
    total_mib: int
    task_mib: int | None
    at: float


class UsageWindow:
    """The last ``size`` readings of each (task, GPU) and their summary (pure, no NVML)."""

    def __init__(self, size: int = DEFAULT_WINDOW) -> None:
        self.size = max(1, size)
        self._readings: dict[str, dict[int, collections.deque[_Reading]]] = {}

    def add(
        self,
        task_id: str,
        samples: Iterable[GpuSample],
        task_mib: dict[int, int] | None,
        at: float,
    ) -> None:
        """One sample of a task's GPUs (``task_mib``: GPU -> MiB its processes hold, ``None``
        when the processes could not be mapped to the container)."""
        gpus = self._readings.setdefault(task_id, {})
        for s in samples:
            mine = None if task_mib is None else task_mib.get(s.gpu_index, 0)
            reading = _Reading(s.util_percent, s.memory_used_mib, s.memory_total_mib, mine, at)
            gpus.setdefault(s.gpu_index, collections.deque(maxlen=self.size)).append(reading)

    def forget(self, task_id: str) -> None:
        """The task ended."""
        self._readings.pop(task_id, None)

    def summary(self, task_id: str) -> list[GpuUsage]:
        """Mean and peak utilisation over the window, memory at the last sample, per GPU."""
        found = []
        for index, readings in sorted(self._readings.get(task_id, {}).items()):
            utils = [r.util for r in readings if r.util is not None]
            last = readings[-1]
            found.append(
                GpuUsage(
                    gpu_index=index,
                    util_pct=round(sum(utils) / len(utils), 1) if utils else None,
                    util_max_pct=max(utils) if utils else None,
                    mem_used_mib=last.used_mib,
                    mem_total_mib=last.total_mib,
                    task_mem_mib=last.task_mib,
                    samples=len(readings),
                    sampled_at=last.at,
                )
            )
        return found

    def tasks(self) -> list[str]:
        """Tasks with readings."""
        return sorted(self._readings)


def task_memory(readings, pids: set[int], gpu_indices: Iterable[int]) -> dict[int, int]:
    """GPU -> MiB the processes ``pids`` hold on it (NVML's per-process readings)."""
    wanted = set(gpu_indices)
    held: dict[int, int] = {index: 0 for index in wanted}
    for r in readings:
        if r.pid in pids and r.gpu_index in wanted:
            held[r.gpu_index] += r.used_mib or 0
    return held


@dataclass
class _Running:
    container_id: str
    gpus: tuple[int, ...]


@dataclass
class UsageSampler:
    """Samples the GPUs of this executor's running tasks and sends reports (one thread).

    Args:
        nvml_factory: returns an initialised NVML binding (pynvml or a fake); called once,
            lazily; an exception means "no NVML here": nothing is sampled.
        send: takes a report (base64 text) and delivers it (the driver's framework message).
        pids_of: container id -> its host pids (``None``: task memory is not reported).
        interval_s: seconds between samples.
        window: samples kept per GPU.
        report_every: samples between reports.
        clock: wall-clock seconds (reports carry it; the scheduler shows its age).
    """

    nvml_factory: Callable[[], Any]
    send: Callable[[str], None] | None = None
    pids_of: Callable[[str], Iterable[int]] | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    window: int = DEFAULT_WINDOW
    report_every: int = DEFAULT_REPORT_EVERY
    clock: Callable[[], float] = time.time
    _nvml: Any = None
    _disabled: bool = False
    _running: dict[str, _Running] = field(default_factory=dict)
    _window: UsageWindow | None = None
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ticker: Ticker | None = None

    def bind(
        self, pids_of: Callable[[str], Iterable[int]], send: Callable[[str], None] | None
    ) -> None:
        """Fill in what the runner knows (its container pids, its sink's framework message)
        where the caller gave nothing."""
        if self.pids_of is None:
            self.pids_of = pids_of
        if self.send is None:
            self.send = send

    def started(self, task_id: str, container_id: str, gpus: Iterable[int]) -> None:
        """A task's container runs on ``gpus``: sample them until :meth:`finished`."""
        gpus = tuple(sorted(set(gpus)))
        if not gpus or self.interval_s <= 0 or self.nvml() is None:
            return
        with self._lock:
            self._running[task_id] = _Running(container_id, gpus)
        self._start_thread()

    def finished(self, task_id: str) -> None:
        """The task ended: stop sampling it and forget its window."""
        with self._lock:
            self._running.pop(task_id, None)
            if self._window is not None:
                self._window.forget(task_id)

    def nvml(self) -> Any:
        """The NVML binding, or ``None`` on a host without one (tried once)."""
        with self._lock:
            if self._nvml is None and not self._disabled:
                try:
                    self._nvml = self.nvml_factory()
                except Exception as exc:  # no driver, no library: a CPU agent
                    log.info("GPU usage sampling off: no NVML here (%s)", exc)
                    self._disabled = True
            return self._nvml

    def sample_once(self) -> None:
        """Read every running task's GPUs once into the window."""
        nvml = self.nvml()
        with self._lock:
            running = dict(self._running)
            if self._window is None:
                self._window = UsageWindow(self.window)
            window = self._window
        if nvml is None or not running:
            return
        at = self.clock()
        processes = None
        if self.pids_of is not None:
            try:
                processes = process_gpu_memory(nvml)
            except nvml.NVMLError as exc:
                log.debug("per-process GPU memory unreadable: %s", exc)
        for task_id, task in running.items():
            samples = sample_gpus(nvml, task.gpus)
            mine = None
            if processes is not None and self.pids_of is not None:
                try:
                    pids = set(self.pids_of(task.container_id))
                    mine = task_memory(processes, pids, task.gpus)
                except Exception as exc:  # the container ended meanwhile
                    log.debug("pids of %s unreadable: %s", task.container_id, exc)
            with self._lock:
                if task_id in self._running:
                    window.add(task_id, samples, mine, at)

    def report(self) -> str | None:
        """The report of every running task's window (``None`` when nothing was read)."""
        with self._lock:
            if self._window is None:
                return None
            found = {t: self._window.summary(t) for t in self._running}
        found = {t: gpus for t, gpus in found.items() if gpus}
        return encode_report(found) if found else None

    def tick(self) -> str | None:
        """One period of the thread: sample, and send a report every ``report_every``
        samples (the first right away, so a new task shows its use within one interval)."""
        self.sample_once()
        self._count += 1
        if (self._count - 1) % max(1, self.report_every):
            return None
        data = self.report()
        if data is not None and self.send is not None:
            try:
                self.send(data)
            except Exception as exc:  # not connected: the next report will do
                log.debug("usage report not sent: %s", exc)
        return data

    def _start_thread(self) -> None:
        with self._lock:
            if self._ticker is None:
                self._ticker = Ticker(self.interval_s, self.tick, "gpu-usage")
        self._ticker.start()

    def stop(self) -> None:
        """Stop the sampling thread."""
        if self._ticker is not None:
            self._ticker.stop()


def load_nvml() -> Any:
    """pynvml, initialised (raises on a host without the NVIDIA driver or library)."""
    import pynvml  # noqa: PLC0415 - only GPU agents need it

    pynvml.nvmlInit()
    return pynvml
