"""Pure assembly of one task's container configuration (docker SDK ``containers.create`` kwargs).

Security defaults (why): DLC containers never run privileged; their only devices are the GPU
and driver devices that :mod:`dlc.executor.gpu_render` lists. They run as the policy's
non-root ``UID:GID`` (``65534:65534`` unless the operator says otherwise), with every
capability dropped and only the few a training process started as root might need added back
(changing file ownership and permissions in its own files, switching users inside the image,
signalling its own processes); ``no-new-privileges`` stops set-uid escalation. Job volumes are
``type=bind`` mounts: unlike ``-v``/``Binds``, the engine refuses a missing source instead of
creating it on the host, and :mod:`dlc.executor.host_paths` has already resolved every source.
``memlock_unlimited`` lifts the locked-memory limit that NCCL over RDMA needs; it is off by
default because the engine must hold CAP_SYS_RESOURCE to raise it (it fails in unprivileged
sandboxes such as CI's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dlc.executor.gpu_render import GpuContainerArgs, merge_search_path
from dlc.scheduler.launch_spec import LaunchSpec

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


def container_env(
    spec: LaunchSpec, gpu: GpuContainerArgs, image_env: Mapping[str, str]
) -> dict[str, str]:
    """The job's environment with the GPU settings on top (GPU variables always win)."""
    env = dict(spec.env)
    env.update(gpu.env)
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
) -> dict:
    """Keyword arguments for ``docker.client.containers.create`` (device requests as dicts).

    Args:
        spec: what to run.
        identity: the task (labels, name).
        gpu: rendered GPU arguments.
        image_env: the image's own environment (to extend its ``PATH``).
        network_mode: Docker network mode (``bridge``, ``host`` or ``none``).
        memlock_unlimited: set ``ulimit -l unlimited`` (RDMA hosts).
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
        "mounts": bind_mounts(spec) or None,
        "user": spec.policy.container_user,
        "devices": list(gpu.devices),
        "device_requests": [dict(r) for r in gpu.device_requests],
        "privileged": False,
        "cap_drop": list(CAP_DROP),
        "cap_add": list(CAP_ADD),
        "security_opt": ["no-new-privileges"],
        "ulimits": [{"Name": "memlock", "Soft": -1, "Hard": -1}] if memlock_unlimited else None,
        "network_mode": network_mode,
        "detach": True,
    }
    return {k: v for k, v in kwargs.items() if v is not None}


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
