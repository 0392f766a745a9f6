"""Pure assembly of one task's container configuration (docker SDK ``containers.create`` kwargs).

Security defaults (why): DLC containers never run privileged; their only devices are the GPU
and driver devices that :mod:`dlc.executor.gpu_render` lists. They run as the policy's non-root
``UID:GID`` (``65534:65534`` unless the operator says otherwise), with every capability dropped
and only the few a training process started as root might need added back (changing file
ownership and permissions in its own files, switching users inside the image, signalling its
own processes); ``no-new-privileges`` stops set-uid escalation. A container without GPUs also
has the drivers' ``/proc/driver`` (the host's GPU list and UUIDs) and ``/proc/irq`` (each GPU's
interrupt handler) masked, on top of the engine's own masks (:data:`ENGINE_MASKED_PATHS`). Job
volumes are ``type=bind`` mounts: unlike ``-v``/``Binds``, the engine refuses a missing source
instead of creating it on the host, and :mod:`dlc.executor.host_paths` has already resolved
every source. ``memlock_unlimited`` lifts the locked-memory limit that NCCL over RDMA needs; it
is off by default because the engine must hold CAP_SYS_RESOURCE to raise it (it fails in
unprivileged sandboxes such as CI's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dlc.executor.gpu_render import GpuContainerArgs, merge_search_path
from dlc.scheduler.jobs.launch_spec import LaunchSpec

#: label keys on every DLC container (``dlc cleanup`` and orphan removal select on them)
LABEL_FRAMEWORK = "dlc.framework_id"
LABEL_JOB = "dlc.job"
LABEL_TASK = "dlc.task"
LABEL_EXECUTOR = "dlc.executor"
LABEL_USER = "dlc.user"
#: every capability goes ...
CAP_DROP = ("ALL",)
#: ... and these come back: they matter only to a root process (``--allow-root``) managing its
#: own files and processes inside the container; a non-root process has no effective caps anyway
CAP_ADD = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class TaskIdentity:
    """Which Mesos task a container belongs to."""

    framework_id: str
    executor_id: str
    task_id: str
    job_id: str

    def labels(self, user: str = "anonymous") -> dict[str, str]:
        """The container labels for this task."""
        return {
            LABEL_FRAMEWORK: self.framework_id,
            LABEL_EXECUTOR: self.executor_id,
            LABEL_TASK: self.task_id,
            LABEL_JOB: self.job_id,
            LABEL_USER: user,
        }

    def container_name(self) -> str:
        """A readable, unique container name (Docker allows ``[a-zA-Z0-9][a-zA-Z0-9_.-]``)."""
        safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in self.task_id)
        return f"dlc-{safe}"[:200]


#: device variables an engine runtime other than DLC's rendering would act on, set so that it
#: adds no GPU: the AMD container runtime (an engine's default after ``amd-ctk runtime
#: configure --amd-set-as-default``) gives a container every GPU its ``AMD_VISIBLE_DEVICES``
#: names (``all``: all of them, with ``/dev/kfd``), and adds none for a value naming no GPU.
#: DLC maps an AMD task's devices itself (red-team finding 54, docs/security.md); NVIDIA's
#: ``NVIDIA_VISIBLE_DEVICES`` is each rendering's own (``void`` where DLC maps the devices).
NO_RUNTIME_PICK = {"AMD_VISIBLE_DEVICES": "none"}
#: Docker swarm's generic-resource variables (``DOCKER_RESOURCE_GPU``): the NVIDIA runtime,
#: with ``swarm-resource`` set in its config, takes the GPUs they name over
#: ``NVIDIA_VISIBLE_DEVICES``
SWARM_RESOURCE_PREFIX = "DOCKER_RESOURCE_"

#: what the engine masks in an unprivileged container whose create call names no masked paths
#: (moby ``oci/defaults.go`` of Docker 20.10, plus ``/proc/interrupts``, where a GPU host lists
#: each GPU's interrupt lines, and ``/sys/devices/virtual/powercap``, which later engines mask):
#: naming masks replaces the engine's list instead of adding to it, so a container that needs
#: one more (:attr:`GpuContainerArgs.masked_paths`) names these too
ENGINE_MASKED_PATHS = (
    "/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
)  # fmt: skip

#: most processes (threads count) one task's container may hold
PIDS_LIMIT = 4096
#: the engine's json-file log of a task: at most two 64 MiB files
ENGINE_LOG = (("max-size", "64m"), ("max-file", "2"))


def container_env(
    spec: LaunchSpec, gpu: GpuContainerArgs, image_env: Mapping[str, str]
) -> dict[str, str]:
    """The job's environment with the GPU settings on top (GPU variables always win), and
    :data:`NO_RUNTIME_PICK` over both (the image's too, which the container's own replace)."""
    env = dict(spec.env)
    env.update(gpu.env)
    env.update(NO_RUNTIME_PICK)
    # The NVIDIA runtime's swarm-resource variables win over NVIDIA_VISIBLE_DEVICES where its
    # config names them: any the job or its image carries says what the rendering says.
    visible = env.get("NVIDIA_VISIBLE_DEVICES", "void")
    for key in [k for k in (*env, *image_env) if k.startswith(SWARM_RESOURCE_PREFIX)]:
        env[key] = visible
    if gpu.path_prepend:
        current = env.get("PATH", image_env.get("PATH"))
        env["PATH"] = merge_search_path(gpu.path_prepend, current, DEFAULT_PATH)
    if gpu.ld_library_path_prepend:
        current = env.get("LD_LIBRARY_PATH", image_env.get("LD_LIBRARY_PATH"))
        env["LD_LIBRARY_PATH"] = merge_search_path(gpu.ld_library_path_prepend, current)
    env["DLC_JOB_ID"] = spec.job_id
    return env


def create_kwargs(
    spec: LaunchSpec,
    identity: TaskIdentity,
    gpu: GpuContainerArgs,
    image_env: Mapping[str, str] | None = None,
    network_mode: str = "bridge",
    memlock_unlimited: bool = False,
    folders: Sequence[tuple[str, str]] = (),
) -> dict:
    """Keyword arguments for ``docker.client.containers.create`` (device requests as dicts).

    Args:
        spec: what to run.
        identity: the task (labels, name).
        gpu: rendered GPU arguments.
        image_env: the image's own environment (to extend its ``PATH``).
        network_mode: Docker network mode (``bridge``, ``host`` or ``none``) unless the task
            names its own (``spec.network``: ``host`` for multi-node gangs).
        memlock_unlimited: set ``ulimit -l unlimited`` (RDMA hosts).
        folders: ``(sandbox path, container path)`` read-write job folders the executor made
            (``/workspace``, ``/outputs``: :mod:`dlc.executor.workdir`).
    """
    volumes = dict(gpu.volumes)  # named driver volumes only; host paths go through mounts
    shm_mib = max(64, spec.mem_mib // 4)  # DataLoader workers share tensors through /dev/shm
    kwargs = {
        "image": spec.image,
        "command": list(spec.command) or None,
        "environment": container_env(spec, gpu, image_env or {}),
        "working_dir": spec.workdir,
        "labels": identity.labels(spec.user),
        "name": identity.container_name(),
        "nano_cpus": int(round(spec.cpus * 1e9)),
        "mem_limit": f"{spec.mem_mib}m",
        "memswap_limit": f"{spec.mem_mib}m",  # no swap beyond the limit: OOM is reported
        "shm_size": f"{shm_mib}m",
        "volumes": volumes or None,
        "mounts": bind_mounts(spec) + folder_mounts(folders) or None,
        "user": spec.policy.container_user,
        "devices": list(gpu.devices),
        "device_requests": [dict(r) for r in gpu.device_requests],
        "group_add": list(gpu.group_add) or None,  # ROCm: video/render own /dev/kfd, /dev/dri
        "privileged": False,
        # only where the rendering masks something: otherwise the engine's own list applies
        "masked_paths": [*ENGINE_MASKED_PATHS, *gpu.masked_paths] if gpu.masked_paths else None,
        "cap_drop": list(CAP_DROP),
        "cap_add": list(CAP_ADD),
        "security_opt": ["no-new-privileges"],
        "ulimits": [{"Name": "memlock", "Soft": -1, "Hard": -1}] if memlock_unlimited else None,
        # A fork bomb in one job must not exhaust the host's pids (red-team: 1,504 processes).
        "pids_limit": PIDS_LIMIT,
        # The engine's own copy of the output is bounded too (the sandbox copy has its cap).
        "log_config": {"Type": "json-file", "Config": dict(ENGINE_LOG)},
        "network_mode": spec.network or network_mode,
        # an environment's server, on the host port the task took from its offer
        "ports": {f"{c}/tcp": h for c, h in spec.publish} or None,
        "detach": True,
    }
    return {k: v for k, v in kwargs.items() if v is not None}


def folder_mounts(folders: Sequence[tuple[str, str]]) -> list[dict]:
    """Read-write ``type=bind`` mounts of the executor's own sandbox folders."""
    return [
        {"Type": "bind", "Source": src, "Target": dst, "ReadOnly": False,
         "BindOptions": {"Propagation": "rprivate"}}
        for src, dst in folders
    ]  # fmt: skip


def bind_mounts(spec: LaunchSpec) -> list[dict]:
    """Engine ``Mounts`` entries for the job's volumes: ``type=bind``, read-only unless ``rw``.

    ``CreateMountpoint`` stays false and, with ``type=bind``, the engine fails on a missing
    source (``bind source path does not exist``) instead of creating it as ``-v`` would.
    """
    return [
        {
            "Type": "bind",
            "Source": v.host_path,
            "Target": v.container_path,
            "ReadOnly": v.read_only,
            "BindOptions": {"Propagation": "rprivate"},
        }
        for v in spec.volumes
    ]
