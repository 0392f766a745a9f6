"""What the core hands an engine to start one placed task (engine-neutral, pure).

An offer round decides placements (:class:`~dlc.scheduler.placement.model.Launch`); to start
one the core makes a :class:`TaskLaunch` (the job, its launch, the executor settings and
the kill grace) and passes it to the :class:`~dlc.scheduler.core.ports.EngineCodec` it was built
with, which turns it into the engine's own message. The Mesos one,
:class:`dlc.mesos.codec.MesosCodec`, builds the v1 ``TaskInfo`` JSON; the core never builds
it itself and never imports :mod:`dlc.mesos` (the contracts in ``.importlinter``), so a
second engine is one more codec.

What any engine's executor needs is here too: :class:`ExecutorConfig` (how executors start),
:func:`launch_spec` (the container's instructions, a
:class:`~dlc.scheduler.jobs.launch_spec.LaunchSpec`) and the per-job secrets the API checks.

Which codec a core gets: the one passed to :class:`~dlc.scheduler.core.facade.SchedulerCore`
(``codec=``; the service, the simulator and the benchmarks pass the Mesos one), else the
process default an engine adapter registered (:func:`~dlc.scheduler.core.ports.set_default_codec`;
importing :mod:`dlc.mesos.codec` registers the Mesos codec, and the test suite's
``conftest`` does). Why a default at all: some hundred cores are built in tests, and none of
them needs to name the engine; the core's imports stay honest, for nothing in
:mod:`dlc.scheduler` names :mod:`dlc.mesos`, and a core built with neither fails at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sys
from dataclasses import dataclass, replace

from dlc.scheduler.gangs.elastic import TORCHRUN_DEFAULTS, elastic_env
from dlc.scheduler.gangs.rendezvous import gang_env
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume
from dlc.scheduler.placement.model import Launch, PlacementConfig


@dataclass(frozen=True)
class ExecutorConfig:
    """How task executors are started.

    Attributes:
        python: interpreter that runs ``-m dlc executor`` (default: this one).
        cpus, mem_mib: resources of each executor; the core sets them from
            :class:`~dlc.scheduler.placement.model.PlacementConfig` (``executor_cpus``,
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


@dataclass(frozen=True, slots=True)
class TaskLaunch:
    """One placed task to start, as the core hands it to its engine's codec.

    Attributes:
        job: the job (its spec carries the resolved ``image``).
        launch: where, on which GPUs (or share), with which ports and rank the task runs.
        framework_id: the scheduler's id with the engine (``None`` before it registered).
        executor: how the task's executor is started (the core's :class:`ExecutorConfig`,
            its overhead set from the placement config).
        kill_grace_s: SIGTERM -> SIGKILL grace of every kill of this task (``None``: the
            executor's own ``--grace``).
    """

    job: Job
    launch: Launch
    framework_id: str | None
    executor: ExecutorConfig
    kill_grace_s: float | None = None


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


def _procs(gpus: int) -> int:
    """Processes per node a gang's launcher starts: one per GPU, one on a CPU-only node
    (torchrun refuses ``--nproc-per-node 0``)."""
    return max(gpus, 1)


def launch_spec(
    job: Job, launch: Launch, policy: TaskPolicy | None = None, config: ExecutorConfig | None = None
) -> LaunchSpec:
    """The executor's instructions for one task of ``job`` (under the operator's ``policy``)."""
    spec = job.spec
    config = config or ExecutorConfig()
    env = dict(spec.env)
    # The host GPU ids, for logs and people; CUDA itself sees the GPUs renumbered from 0.
    # A CPU-only task's are empty (the executor hides every GPU from its container).
    env["DLC_GPU_IDS"] = ",".join(str(i) for i in launch.gpu_ids)
    if spec.nodes_max is not None:
        # An elastic gang: torchrun's c10d rendezvous at node 0, which is never given back.
        env["DLC_NODE_RANK"] = str(launch.rank)
        if launch.peers:
            rdzv_id = f"{job.job_id}.{job.attempt}"
            env.update(elastic_env(launch.rank, _procs(spec.gpus), launch.peers[0],
                                   spec.nodes, spec.nodes_max, rdzv_id))  # fmt: skip
            # restarts after a member leaves; a rendezvous a joining node can complete
            for key, value in TORCHRUN_DEFAULTS.items():
                env.setdefault(key, value)
    elif spec.nodes > 1:
        # Distributed jobs find their place in the gang from these.
        env.update({"DLC_NODE_RANK": str(launch.rank), "DLC_NUM_NODES": str(spec.nodes)})
        if launch.peers:
            env.update(gang_env(launch.rank, _procs(spec.gpus), launch.peers))
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
