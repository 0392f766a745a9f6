"""Allocated versus used: what a task's GPUs really did, as its executor measured it (pure).

The executor samples each GPU of its running tasks through NVML every few seconds and sends
one small *usage report* per reporting period as a Mesos framework message
(``dlc/executor/usage.py``; docs/executor.md says why a framework message and not a status
update). This module is the contract both sides share (:func:`encode_report` /
:func:`decode_report`), the core's table of the latest reading per task
(:class:`UsageBook`), and the aggregations the metrics, API and dashboard show
(:func:`job_usage`, :func:`rollup`, :func:`is_idle`).

The book lives in memory only: a reading is stale within a minute, a scheduler restart
loses at most one reporting period (the executors keep sending to the same framework id),
and writing it to the store would cost a write per task per period for nothing durable.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: version of the report format (a newer executor may add fields; unknown ones are ignored)
REPORT_VERSION = 1
#: longest report accepted (bytes of base64): 8 tasks x 8 GPUs fit in about 6 KiB
MAX_REPORT_BYTES = 64 * 1024
#: a GPU whose busiest sample of the window stayed below this is idle
IDLE_UTIL_PCT = 5
#: readings needed before a GPU may be called idle (one report is not enough evidence)
IDLE_MIN_SAMPLES = 3


@dataclass(frozen=True)
class GpuUsage:
    """One GPU of one task over the executor's window (the last few samples).

    Attributes:
        gpu_index: the GPU's index on its agent (as the task was given it).
        util_pct: mean of NVML's utilisation over the window (``None``: NVML did not say).
        util_max_pct: the busiest sample of the window.
        mem_used_mib: device memory in use at the last sample (every process on the GPU).
        mem_total_mib: device memory in all.
        task_mem_mib: what the task's own processes held at the last sample (``None`` when
            the executor could not map processes to its container).
        samples: readings in the window.
        sampled_at: wall-clock time of the last reading (the executor's clock).
    """

    gpu_index: int
    util_pct: float | None
    util_max_pct: int | None
    mem_used_mib: int
    mem_total_mib: int
    task_mem_mib: int | None
    samples: int
    sampled_at: float


@dataclass(frozen=True)
class TaskUsage:
    """The latest reading of one task's GPUs."""

    task_id: str
    agent_id: str
    gpus: tuple[GpuUsage, ...]

    @property
    def sampled_at(self) -> float:
        """When the oldest of its GPUs' last readings was taken."""
        return min((g.sampled_at for g in self.gpus), default=0.0)


@dataclass(frozen=True)
class JobUsage:
    """A job's GPUs together: what the API, the CLI and the dashboard show.

    Attributes:
        util_pct: mean utilisation over its sampled GPUs (``None``: none told).
        mem_used_mib: memory its processes held (device memory in use where the executor
            could not map processes).
        mem_total_mib: memory of its GPUs in all.
        gpus: GPUs with a reading.
        idle: every GPU stayed under :data:`IDLE_UTIL_PCT` for the whole window.
        sampled_at: the oldest of the readings.
    """

    util_pct: float | None
    mem_used_mib: int
    mem_total_mib: int
    gpus: int
    idle: bool
    sampled_at: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the API's job ``usage`` field)."""
        return {
            "util_pct": self.util_pct,
            "mem_used_mib": self.mem_used_mib,
            "mem_total_mib": self.mem_total_mib,
            "gpus": self.gpus,
            "idle": self.idle,
            "sampled_at": self.sampled_at,
        }


# -- the report: executor -> scheduler ------------------------------------------------------


def encode_report(tasks: Mapping[str, Iterable[GpuUsage]]) -> str:
    """Base64 JSON of every task's GPU readings (a framework message's ``data``)."""
    body = {
        "v": REPORT_VERSION,
        "tasks": {
            task_id: [
                {
                    "i": g.gpu_index,
                    "util": g.util_pct,
                    "max": g.util_max_pct,
                    "mem": g.mem_used_mib,
                    "total": g.mem_total_mib,
                    "task_mem": g.task_mem_mib,
                    "n": g.samples,
                    "at": g.sampled_at,
                }
                for g in gpus
            ]
            for task_id, gpus in tasks.items()
        },
    }
    return base64.b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()


def decode_report(data: str | bytes, agent_id: str) -> list[TaskUsage]:
    """The tasks of one report; a report this scheduler cannot read gives ``[]`` and a GPU
    entry it cannot read is skipped (an older or newer executor must not break it)."""
    if not data or len(data) > MAX_REPORT_BYTES:
        return []
    try:
        body = json.loads(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return []
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if not isinstance(tasks, dict):
        return []
    found = []
    for task_id, gpus in tasks.items():
        if not isinstance(gpus, list):
            continue
        parsed = tuple(g for g in map(_gpu_entry, gpus) if g is not None)
        if parsed:
            found.append(TaskUsage(str(task_id), agent_id, parsed))
    return found


def _gpu_entry(raw: object) -> GpuUsage | None:
    if not isinstance(raw, dict):
        return None
    try:
        util = raw.get("util")
        top = raw.get("max")
        task_mem = raw.get("task_mem")
        return GpuUsage(
            gpu_index=int(raw["i"]),
            util_pct=None if util is None else round(float(util), 1),
            util_max_pct=None if top is None else int(top),
            mem_used_mib=int(raw["mem"]),
            mem_total_mib=int(raw["total"]),
            task_mem_mib=None if task_mem is None else int(task_mem),
            samples=int(raw.get("n", 1)),
            sampled_at=float(raw["at"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


# -- aggregation ------------------------------------------------------------------------


def is_idle(gpus: Iterable[GpuUsage], threshold_pct: int = IDLE_UTIL_PCT) -> bool:
    """Allocated but idle: every GPU read often enough, and none reached ``threshold_pct``
    in any sample of its window (a GPU whose utilisation NVML does not tell is not idle)."""
    gpus = list(gpus)
    return bool(gpus) and all(
        g.util_max_pct is not None
        and g.samples >= IDLE_MIN_SAMPLES
        and g.util_max_pct < threshold_pct
        for g in gpus
    )


def job_usage(tasks: Iterable[TaskUsage]) -> JobUsage | None:
    """One job's reading from its tasks' (``None`` when none has reported yet)."""
    gpus = [g for t in tasks for g in t.gpus]
    if not gpus:
        return None
    utils = [g.util_pct for g in gpus if g.util_pct is not None]
    return JobUsage(
        util_pct=round(sum(utils) / len(utils), 1) if utils else None,
        mem_used_mib=sum(
            g.mem_used_mib if g.task_mem_mib is None else g.task_mem_mib for g in gpus
        ),  # fmt: skip
        mem_total_mib=sum(g.mem_total_mib for g in gpus),
        gpus=len(gpus),
        idle=is_idle(gpus),
        sampled_at=min(g.sampled_at for g in gpus),
    )


@dataclass(frozen=True)
class UsageRollup:
    """Allocated and used GPUs of one user or group (or job).

    Attributes:
        key: the user, group or job.
        gpus_allocated: GPUs its running tasks hold (a share: its part of a GPU, charged as
            quotas charge it, so three 4 GiB shares of 32 GiB GPUs are 0.375).
        gpus_sampled: of those, GPUs with a reading.
        gpus_idle: of those, GPUs allocated but idle (:func:`is_idle` per GPU).
        util_pct: mean utilisation over the sampled GPUs (``None``: none).
        mem_used_mib: memory its processes held.
    """

    key: str
    gpus_allocated: float
    gpus_sampled: int
    gpus_idle: int
    util_pct: float | None
    mem_used_mib: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``GET /v1/usage``)."""
        return {
            "key": self.key,
            "gpus_allocated": self.gpus_allocated,
            "gpus_sampled": self.gpus_sampled,
            "gpus_idle": self.gpus_idle,
            "util_pct": self.util_pct,
            "mem_used_mib": self.mem_used_mib,
        }


def rollup(
    held: Iterable[tuple[str, float, TaskUsage | None]], key_of: Callable[[str], str]
) -> list[UsageRollup]:
    """Group ``(owner, GPUs allocated, reading or None)`` of running tasks by ``key_of(owner)``
    (the user itself, the user's group, ...), sorted by key."""
    groups: dict[str, list[tuple[float, TaskUsage | None]]] = {}
    for owner, allocated, usage in held:
        groups.setdefault(key_of(owner), []).append((allocated, usage))
    found = []
    for key in sorted(groups):
        gpus = [g for _, usage in groups[key] if usage is not None for g in usage.gpus]
        utils = [g.util_pct for g in gpus if g.util_pct is not None]
        found.append(
            UsageRollup(
                key=key,
                gpus_allocated=round(sum(n for n, _ in groups[key]), 3),
                gpus_sampled=len(gpus),
                gpus_idle=sum(1 for g in gpus if is_idle([g])),
                util_pct=round(sum(utils) / len(utils), 1) if utils else None,
                mem_used_mib=sum(
                    g.mem_used_mib if g.task_mem_mib is None else g.task_mem_mib for g in gpus
                ),  # fmt: skip
            )
        )
    return found


# -- the core's table ----------------------------------------------------------------------


class UsageBook:
    """The latest reading per task (not thread-safe: the core calls it under its lock)."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskUsage] = {}

    def record(self, readings: Iterable[TaskUsage], live: Callable[[str, str], bool]) -> int:
        """Keep the readings of tasks ``live(task_id, agent_id)`` accepts (a report of an
        ended or unknown task, or from another agent, is dropped); returns how many."""
        kept = 0
        for reading in readings:
            if live(reading.task_id, reading.agent_id):
                self._tasks[reading.task_id] = reading
                kept += 1
        return kept

    def prune(self, live: Callable[[str], bool]) -> None:
        """Forget tasks that ``live`` no longer accepts (ended, requeued)."""
        for task_id in [t for t in self._tasks if not live(t)]:
            del self._tasks[task_id]

    def of(self, task_id: str) -> TaskUsage | None:
        """The latest reading of one task, if any."""
        return self._tasks.get(task_id)

    def tasks(self) -> list[TaskUsage]:
        """Every kept reading."""
        return list(self._tasks.values())
