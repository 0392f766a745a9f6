"""Pure builder of the Mesos v1 ``TaskInfo`` JSON for one placed task.

The task consumes ``cpus``/``mem`` (and ``disk`` when asked), ``gpus:k`` and
exactly the ``gpu_ids`` items the allocator chose. It runs under DLC's own
executor, started with the scheduler's Python (``<sys.executable> -m dlc
executor``) so that the executor sees the same installed ``dlc``. What the
container must run travels in ``data`` as a :class:`~dlc.scheduler.launch_spec.LaunchSpec`.

Facts a person wants in the Mesos UI go into the task name (the only free-text
column the UI shows): ``dlc <job> <framework> gpus 0,2``; everything else goes
into labels, which ``/master/state`` carries.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import shlex
import sys
from dataclasses import dataclass, replace
from typing import Any

from dlc.scheduler.elastic import TORCHRUN_DEFAULTS, elastic_env
from dlc.scheduler.jobs import Job
from dlc.scheduler.launch_spec import LaunchSpec, TaskPolicy, Volume
from dlc.scheduler.placement import Launch, PlacementConfig
from dlc.scheduler.rendezvous import gang_env, ports_resource


@dataclass(frozen=True)
class ExecutorConfig:
    """How task executors are started.

    Attributes:
        python: interpreter that runs ``-m dlc executor`` (default: this one).
        cpus, mem_mib: resources of each executor; the core sets them from
            :class:`~dlc.scheduler.placement.PlacementConfig` (``executor_cpus``,
            ``executor_mem_mib``), the one source of the overhead.
        env: extra environment for the executor process.
        command: a whole executor command line replacing ``<python> -m dlc executor``
            (tests use a stand-in executor; sites may wrap it).
        policy: the operator's security settings every task carries to its agent
            (allowed volume prefixes, container user, root, registries).
        api_url: the scheduler API as agents reach it (the executor fetches ``--workdir``
            snapshots from there).
        job_key: the scheduler's secret from which each job's secret is derived
            (:func:`job_secret`); empty: jobs get no secret.
    """

    python: str = sys.executable
    cpus: float = PlacementConfig.executor_cpus
    mem_mib: float = PlacementConfig.executor_mem_mib
    env: tuple[tuple[str, str], ...] = ()
    command: str | None = None
    policy: TaskPolicy = TaskPolicy()
    api_url: str = ""
    job_key: str = ""


def job_secret(job_key: str, job_id: str) -> str:
    """The per-job secret (HMAC-SHA256 of the job id under the scheduler's key): the API
    recomputes it to check the executor's requests, so it is never stored."""
    return hmac.new(job_key.encode(), job_id.encode(), hashlib.sha256).hexdigest()


#: the port an environment's server listens on inside the container (JupyterLab's default)
ENV_PORT = 8888
#: what an interactive job without a command runs (the catalog's images carry JupyterLab)
JUPYTER_COMMAND = (
    "sh", "-c",
    'exec jupyter lab --ip=0.0.0.0 --port="$DLC_ENV_PORT" --no-browser '
    '--ServerApp.token="$JUPYTER_TOKEN" --ServerApp.root_dir="${PWD:-/}"',
)  # fmt: skip


def env_secret(job_key: str, job_id: str) -> str:
    """The token of an environment's URL (a different derivation from :func:`job_secret`, so
    the URL, which a user may share, never opens the executor's routes)."""
    return job_secret(job_key, "env:" + job_id)


def workdir_url(api_url: str, job_id: str) -> str:
    """Where the executor fetches the job's snapshot (outside ``/v1``: no user token)."""
    return f"{api_url.rstrip('/')}/agent/v1/jobs/{job_id}/workdir"


def scalar(name: str, value: float) -> dict[str, Any]:
    """A v1 SCALAR ``Resource``."""
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}}


def gpu_ids_set(ids: tuple[int, ...]) -> dict[str, Any]:
    """The ``gpu_ids`` SET ``Resource`` holding exactly ``ids`` (items are strings)."""
    return {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in sorted(ids)]}}


def task_name(job: Job, gpu_ids: tuple[int, ...], rank: int = 0) -> str:
    """``dlc <job> <framework> gpus 0,2`` (+ ``node r/n`` for multi-node jobs)."""
    ids = ",".join(str(i) for i in gpu_ids)
    name = f"dlc {job.job_id} {job.spec.label} gpus {ids}"
    if job.spec.is_gang:
        name += f" node {rank + 1}/{job.spec.nodes_text}"
    return name


def launch_spec(
    job: Job, launch: Launch, policy: TaskPolicy | None = None, config: ExecutorConfig | None = None
) -> LaunchSpec:
    """The executor's instructions for one task of ``job`` (under the operator's ``policy``)."""
    spec = job.spec
    config = config or ExecutorConfig()
    env = dict(spec.env)
    # The host GPU ids, for logs and people; CUDA itself sees the GPUs renumbered from 0.
    env["DLC_GPU_IDS"] = ",".join(str(i) for i in launch.gpu_ids)
    if spec.nodes_max is not None:
        # An elastic gang: torchrun's c10d rendezvous at node 0, which is never given back.
        env["DLC_NODE_RANK"] = str(launch.rank)
        if launch.peers:
            rdzv_id = f"{job.job_id}.{job.attempt}"
            env.update(elastic_env(launch.rank, spec.gpus, launch.peers[0], spec.nodes,
                                   spec.nodes_max, rdzv_id))  # fmt: skip
            # restarts after a member leaves; a rendezvous a joining node can complete
            for key, value in TORCHRUN_DEFAULTS.items():
                env.setdefault(key, value)
    elif spec.nodes > 1:
        # Distributed jobs find their place in the gang from these.
        env.update({"DLC_NODE_RANK": str(launch.rank), "DLC_NUM_NODES": str(spec.nodes)})
        if launch.peers:
            env.update(gang_env(launch.rank, spec.gpus, launch.peers))
    if launch.ports:
        env["DLC_PORTS"] = ",".join(str(p) for p in launch.ports)
    publish: tuple[tuple[int, int], ...] = ()
    command = spec.command
    if spec.interactive and launch.ports:
        publish = ((ENV_PORT, launch.ports[-1]),)
        # without the scheduler's key (an in-memory DB) the token is random: never empty,
        # which would leave the server open to anyone who finds the port
        token = env_secret(config.job_key, job.job_id) if config.job_key else secrets.token_hex(32)
        env.update({"DLC_ENV_PORT": str(ENV_PORT), "JUPYTER_TOKEN": token})
        # a catalog framework runs JupyterLab; an --image of one's own serves by its own CMD
        command = command or (JUPYTER_COMMAND if spec.framework else ())
    policy = policy or TaskPolicy()
    if spec.container_user and policy.allow_job_user:
        # the job's choice (checked at submit); the agent still refuses root unless allowed
        policy = replace(policy, container_user=spec.container_user)
    return LaunchSpec(
        job_id=job.job_id,
        image=spec.image or "",
        framework=spec.framework,
        command=command,
        env=env,
        gpu_ids=launch.gpu_ids,
        gpu_uuids=launch.gpu_uuids,
        gpu_minors=launch.gpu_minors,
        driver_version=launch.driver_version,
        cpus=spec.cpus,
        mem_mib=spec.mem_mib,
        volumes=tuple(Volume(v.host_path, v.container_path, v.read_only) for v in spec.volumes),
        user=job.user,
        cuda_version=spec.cuda_version,
        policy=policy,
        # gang nodes share the host's network: the rendezvous port and NCCL/gloo's own
        # connections must be reachable from the peers' hosts
        network="host" if spec.is_gang else "",
        ports=launch.ports,
        workdir="/workspace" if spec.workdir else None,
        workdir_url=workdir_url(config.api_url, job.job_id) if spec.workdir else "",
        job_secret=job_secret(config.job_key, job.job_id) if config.job_key else "",
        publish=publish,
        idle_timeout_s=float(spec.idle_timeout_s) if spec.interactive else 0.0,
        share=launch.share,
    )


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
    if launch.share is None:
        resources += [scalar("gpus", float(len(launch.gpu_ids))), gpu_ids_set(launch.gpu_ids)]
    # a share consumes sub-ranges of one GPU's blocks and no gpus/gpu_ids; a whole-GPU task
    # also the whole blocks of its GPUs where the agent advertises them (Mesos accounts both)
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
