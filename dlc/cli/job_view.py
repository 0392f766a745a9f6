"""What the job commands share: how a job reads in a table, its exit code, waiting on it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from dlc.api.client import ApiClient

TERMINAL = ("finished", "failed", "killed", "lost")
STATES = ("queued", "staging", "running", *TERMINAL)


def age(submitted_at: float, now: float | None = None) -> str:
    """``42s``, ``5m``, ``3h``, ``2d`` since ``submitted_at``."""
    seconds = max(0, int((now or time.time()) - submitted_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def placement(job: dict) -> str:
    """``host:0,1 host2:4,5``: where the job's tasks run (a share: ``host:2``; a CPU-only
    task, which holds no GPU: ``host``)."""
    return " ".join(_task_place(t) for t in job["tasks"])


def _task_place(task: dict) -> str:
    if task.get("share_gpu") is not None:
        return f"{task['hostname']}:{task['share_gpu']}"
    if not task["gpu_ids"]:
        return str(task["hostname"])
    return f"{task['hostname']}:" + ",".join(str(i) for i in task["gpu_ids"])


def cpu_only(job: dict) -> bool:
    """Whether the job asks no GPU (``--gpus 0``: CPU and memory only)."""
    return job["gpus"] == 0 and share(job) is None


def share(job: dict) -> str | None:
    """``0.5 of GPU 2``, ``4 GiB of GPU 2`` (placed) or ``4 GiB`` (queued); None: whole GPUs."""
    for task in job.get("tasks") or ():
        if task.get("share_gpu") is not None:
            if task.get("share_core_milli"):
                amount = f"{task['share_core_milli'] / 1000:g}"
            else:
                amount = _mib(task.get("share_memory_mib") or 0)
            return f"{amount} of GPU {task['share_gpu']}"
    if job.get("gpu_fraction") is not None:
        return f"{job['gpu_fraction']:g}"
    if job.get("gpu_memory"):
        return _mib(job["gpu_memory"])
    return None


def _mib(mib: int) -> str:
    return f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib} MiB"


#: what a CPU-only job (``--gpus 0``) shows where others show their GPUs
CPU_ONLY = "CPU only"


def nodes(job: dict) -> str:
    """``2``, or an elastic gang's members over its range: ``3/2:4``."""
    if job.get("nodes_max") is None:
        return str(job["nodes"])
    return f"{job.get('members') or 0}/{job['nodes']}:{job['nodes_max']}"


def gpus(job: dict) -> str:
    """``4`` for one node, ``2x8`` for a gang of two 8-GPU tasks, ``3/2:4x8`` for an elastic
    gang running 3 of its 2 to 4 nodes, ``0.5 of GPU 2``: a share; ``CPU only`` (``2x CPU
    only`` for a gang) for a job of no GPU."""
    shared = share(job)
    if shared is not None:
        return shared
    if job["gpus"] == 0:
        one = job["nodes"] == 1 and job.get("nodes_max") is None
        return CPU_ONLY if one else f"{nodes(job)}x {CPU_ONLY}"
    if job["nodes"] == 1 and job.get("nodes_max") is None:
        return str(job["gpus"])
    return f"{nodes(job)}x{job['gpus']}"


def used(job: dict) -> str:
    """What a running job's GPUs did lately, next to what it was given: ``63% 1.5/160 GiB``,
    ``idle 0% 0.5/80 GiB`` (allocated but idle), ``-`` (not running or no reading yet)."""
    usage = job.get("usage")
    if not usage:
        return "-"
    util = "?%" if usage.get("util_pct") is None else f"{usage['util_pct']:.0f}%"
    memory = f"{usage['mem_used_mib'] / 1024:.1f}/{usage['mem_total_mib'] / 1024:.0f} GiB"
    return f"{'idle ' if usage.get('idle') else ''}{util} {memory}"


def done(job: dict) -> bool:
    """Whether the job has ended (it will not change state again)."""
    return job["state"] in TERMINAL


_EXIT = re.compile(r"\bexit code (\d+)")


def exit_code(job: dict) -> int:
    """The exit code ``dlc submit --wait`` ends with: the container's own where known.

    finished: 0; failed: the code in its message (``exit code 3; ...``), else 1;
    killed: 137 (what a shell shows for SIGKILL); lost: 1.
    """
    if job["state"] == "finished":
        return 0
    if job["state"] == "killed":
        return 137
    match = _EXIT.search(job.get("message") or "")
    code = int(match.group(1)) if match else 1
    return code if 0 < code < 256 else 1


def follow(
    client: ApiClient,
    job_id: str,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    rounds: int | None = None,
) -> Iterator[dict]:
    """Yield the job each time its state or message changes, until it ends."""
    last = None
    count = 0
    while True:
        job = client.show(job_id)
        key = (job["state"], job["message"])
        if key != last:
            last = key
            yield job
        count += 1
        if done(job) or (rounds is not None and count >= rounds):
            return
        sleep(interval)
