"""The Mesos v1 ``TaskInfo`` JSON of one placed task (the Mesos side of a launch; pure).

The scheduling core decides engine-neutral :class:`~dlc.scheduler.tasks.launch.TaskLaunch`
values and hands each to its :class:`~dlc.scheduler.core.ports.EngineCodec`; the Mesos one,
:class:`~dlc.mesos.codec.MesosCodec`, encodes it with :func:`build_task_info`.

The task consumes ``cpus``/``mem`` (and ``disk`` when asked), ``gpus:k`` and
exactly the ``gpu_ids`` items the allocator chose (a CPU-only job's task: no GPU
resource at all). It runs under DLC's own
executor, started with the scheduler's Python (``<sys.executable> -m dlc
executor``) so that the executor sees the same installed ``dlc``. What the
container must run travels in ``data`` as a :class:`~dlc.scheduler.jobs.launch_spec.LaunchSpec`
(:func:`~dlc.scheduler.tasks.launch.launch_spec`, the same for any engine).

Facts a person wants in the Mesos UI go into the task name (the only free-text
column the UI shows): ``dlc <job> <framework> gpus 0,2``; everything else goes
into labels, which ``/master/state`` carries.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.model import Launch
from dlc.scheduler.tasks.launch import ExecutorConfig, launch_spec


def scalar(name: str, value: float) -> dict[str, Any]:
    """A v1 SCALAR ``Resource``."""
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}}


def gpu_ids_set(ids: tuple[int, ...]) -> dict[str, Any]:
    """The ``gpu_ids`` SET ``Resource`` holding exactly ``ids`` (items are strings)."""
    return {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in sorted(ids)]}}


def ports_resource(ports: Sequence[int]) -> dict[str, Any]:
    """The v1 ``ports`` RANGES ``Resource`` holding exactly ``ports`` (one range each)."""
    return {
        "name": "ports",
        "type": "RANGES",
        "ranges": {"range": [{"begin": p, "end": p} for p in sorted(ports)]},
    }


def task_name(job: Job, gpu_ids: tuple[int, ...], rank: int = 0) -> str:
    """``dlc <job> <framework> gpus 0,2`` (``cpu only`` for a CPU-only job's task; + ``node
    r/n`` for multi-node jobs)."""
    ids = ",".join(str(i) for i in gpu_ids)
    what = "cpu only" if job.spec.is_cpu_only else f"gpus {ids}"
    name = f"dlc {job.job_id} {job.spec.label} {what}"
    if job.spec.is_gang:
        name += f" node {rank + 1}/{job.spec.nodes_text}"
    return name


def labels(job: Job, launch: Launch) -> dict[str, list[dict[str, str]]]:
    """Task labels: job id, user, what runs, GPUs, attempt and rank."""
    pairs = {
        "dlc.job_id": job.job_id,
        "dlc.user": job.user,
        # the ML framework (pytorch:2.3); "framework" alone means the Mesos framework
        "dlc.ml_framework": job.spec.framework or "",
        "dlc.image": job.spec.image or "",
        "dlc.gpu_ids": ",".join(str(i) for i in launch.gpu_ids),
        "dlc.attempt": str(job.attempt),
        "dlc.rank": str(launch.rank),
        "dlc.nodes": job.spec.nodes_text,
    }
    return {"labels": [{"key": k, "value": v} for k, v in pairs.items()]}


def executor_info(
    launch: Launch, framework_id: str | None, config: ExecutorConfig
) -> dict[str, Any]:
    """The ``ExecutorInfo`` running ``<python> -m dlc executor`` for one task."""
    line = config.command or f"{shlex.quote(config.python)} -m dlc executor"
    command: dict[str, Any] = {"value": line}
    if config.env:
        command["environment"] = {"variables": [{"name": k, "value": v} for k, v in config.env]}
    info: dict[str, Any] = {
        "type": "CUSTOM",
        "executor_id": {"value": f"dlc-executor.{launch.task_id}"},
        "name": "dlc-executor",
        "source": "dlc",
        "command": command,
        "resources": [scalar("cpus", config.cpus), scalar("mem", config.mem_mib)],
    }
    if framework_id:
        info["framework_id"] = {"value": framework_id}
    return info


def build_task_info(
    job: Job,
    launch: Launch,
    framework_id: str | None = None,
    config: ExecutorConfig | None = None,
    kill_grace_s: float | None = None,
) -> dict[str, Any]:
    """The v1 ``TaskInfo`` JSON for ``launch`` of ``job``.

    Args:
        job: the job (its spec must carry the resolved ``image``).
        launch: where and with which GPUs the task runs.
        framework_id: our framework id, copied into the ExecutorInfo.
        config: executor command and resources.
        kill_grace_s: SIGTERM -> SIGKILL grace of every kill of this task, sent as the
            TaskInfo's ``kill_policy`` (the executor honours it; ``None``: its ``--grace``).

    Returns:
        A dict ready for ``driver.launchTasks``.
    """
    config = config or ExecutorConfig()
    spec = job.spec
    resources = [scalar("cpus", spec.cpus), scalar("mem", float(spec.mem_mib))]
    if spec.disk_mib:
        resources.append(scalar("disk", float(spec.disk_mib)))
    if launch.share is None and launch.gpu_ids:
        resources += [scalar("gpus", float(len(launch.gpu_ids))), gpu_ids_set(launch.gpu_ids)]
    # a share consumes sub-ranges of one GPU's blocks and no gpus/gpu_ids; a whole-GPU task
    # also the whole blocks of its GPUs where the agent advertises them (Mesos accounts both);
    # a CPU-only task no GPU resource at all (it runs on agents that have none)
    resources += launch.gpu_take.resources_json()
    if launch.ports:
        resources.append(ports_resource(launch.ports))
    info = {
        "name": task_name(job, launch.gpu_ids, launch.rank),
        "task_id": {"value": launch.task_id},
        "agent_id": {"value": launch.agent_id},
        "resources": resources,
        "executor": executor_info(launch, framework_id, config),
        "labels": labels(job, launch),
        "data": launch_spec(job, launch, config.policy, config).encode(),
    }
    if kill_grace_s is not None:
        # TaskInfo.kill_policy (Mesos v1): both masters hand it to the executor in LAUNCH
        info["kill_policy"] = {"grace_period": {"nanoseconds": int(kill_grace_s * 1e9)}}
    return info
