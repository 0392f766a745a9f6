"""Pure rendering of a GPU share into container arguments, per enforcement backend.

What every backend sets (framework hints; see docs/sharing.md):

* ``DLC_GPU_SHARING`` (the backend), ``DLC_GPU_MEMORY_MIB`` and ``DLC_GPU_CORE_MILLI`` (the
  share), ``DLC_GPU_ISOLATION`` (what is really enforced, in words);
* ``TF_FORCE_GPU_ALLOW_GROWTH=true``: TensorFlow otherwise maps nearly all GPU memory at start,
  which an MPS limit refuses and the watchdog punishes.

Backends:

* ``mps``: the daemon's pipe directory bind-mounted at the same path, ``CUDA_MPS_PIPE_DIRECTORY``,
  ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M`` (device ordinal 0: the container sees only this
  GPU), ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` from the compute share, ``CUDA_VISIBLE_DEVICES``
  by UUID, and ``ipc_mode=host``. MPS clients and their server exchange memory handles through
  host IPC/shared memory; the trade-off is that the container shares the host's IPC namespace
  (SysV and POSIX shared memory are visible to it), so MPS is for trusted tenants;
* ``watchdog``: the GPU plus hints; memory is enforced by :mod:`.watchdog`, compute is not;
* ``mig``: the MIG device's UUID (``MIG-...``) as the only device (toolkit style only);
* ``none``: the GPU plus hints, labelled as time-slicing with no limits;
* ``shim``: the GPU plus DLC's CUDA driver-API interposer (``native/cuda_shim``), loaded into
  every process through ``/etc/ld.so.preload``; the library, that file and the limit config
  are bind-mounted READ-ONLY (the container runs as a non-root user, so it cannot replace
  them), and the processes' shared accounting lives on a per-container tmpfs. Time-slicing
  otherwise: each process has its own CUDA context, so one tenant's fault stays its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from dlc.errors import DlcError
from dlc.executor.gpu_render import GpuContainerArgs, GpuReservation, GpuStyle, render
from dlc.scheduler.jobs.launch_spec import GpuShare

#: container label with the share (``GPU:MiB:milli:backend``), for ``docker ps`` and cleanup
LABEL_SHARE = "dlc.gpu_share"
#: container label naming the backend
LABEL_SHARING = "dlc.gpu_sharing"

ISOLATION = {
    "mps": "MPS: memory limit per client at allocation, compute capped by active thread %",
    "watchdog": "memory watched through NVML, task ended over its share; compute not limited",
    "mig": "MIG instance: memory, compute and faults isolated by the hardware",
    "none": "time-slicing: no memory or compute limits",
    "shim": "time-slicing; memory refused at allocation by DLC's CUDA shim across the "
    "container's processes (NVML watchdog as backstop); compute not limited",
}

#: where the shim's files appear inside the container (native/cuda_shim/shim.h has the same
#: config path compiled in: the shim reads only that file when it exists)
SHIM_LIBRARY_TARGET = "/usr/lib/dlc/libdlc_cuda_shim.so"
SHIM_CONFIG_TARGET = "/etc/dlc/cuda-shim.conf"
SHIM_PRELOAD_TARGET = "/etc/ld.so.preload"
SHIM_STATE_DIR = "/run/dlc-shim"
#: the CUDA context's footprint the shim counts per process and GPU: the real one is not
#: observable from the driver API (about 300-600 MiB on Hopper with CUDA 12 lazy loading)
DEFAULT_CONTEXT_MIB = 512


@dataclass(frozen=True)
class ShimFiles:
    """Host paths of what a ``shim`` share's container mounts read-only.

    Attributes:
        library: ``libdlc_cuda_shim.so`` (built by ``make setup``).
        config: this task's config (:func:`shim_config_text`).
        preload: this task's ``ld.so.preload`` (:func:`shim_preload_text`).
    """

    library: str
    config: str
    preload: str


@dataclass(frozen=True)
class ShareArgs:
    """Container arguments for one share (docker SDK vocabulary, plain data).

    Attributes:
        gpu: the device and its environment (merged like a whole-GPU reservation's).
        mounts: engine ``Mounts`` entries to add (the MPS pipe directory).
        ipc_mode: Docker IPC mode to use instead of the default, if any.
        labels: labels to add to the container.
    """

    gpu: GpuContainerArgs
    mounts: tuple[dict, ...] = ()
    ipc_mode: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def share_label(share: GpuShare) -> str:
    """``GPU:MiB:milli:backend``, e.g. ``0:4096:250:mps``."""
    return f"{share.gpu_index}:{share.memory_mib}:{share.core_milli}:{share.backend}"


def hint_env(share: GpuShare) -> dict[str, str]:
    """The framework hints every backend sets."""
    return {
        "DLC_GPU_SHARING": share.backend,
        "DLC_GPU_MEMORY_MIB": str(share.memory_mib),
        "DLC_GPU_CORE_MILLI": str(share.core_milli),
        "DLC_GPU_ISOLATION": ISOLATION[share.backend],
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def thread_percentage(core_milli: int) -> int | None:
    """``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` for a compute share (rounded up; None: no cap)."""
    if core_milli <= 0 or core_milli >= 1000:
        return None
    return max(1, math.ceil(core_milli / 10))


def mps_env(share: GpuShare, pipe_dir: str) -> dict[str, str]:
    """The MPS client variables for ``share`` talking to the daemon at ``pipe_dir``."""
    env = {"CUDA_MPS_PIPE_DIRECTORY": pipe_dir}
    if share.memory_mib:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={share.memory_mib}M"
    percent = thread_percentage(share.core_milli)
    if percent is not None:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percent)
    if share.gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = share.gpu_uuid  # indices are remapped under MPS
    return env


def shim_config_text(share: GpuShare, context_mib: int = DEFAULT_CONTEXT_MIB) -> str:
    """The shim's config for ``share``: device 0 (the container sees only its GPU) limited to
    the memory share (none when the share names no memory), the context estimate, and the
    accounting file on the container's tmpfs."""
    lines = [
        "# written by the DLC executor for one GPU share (docs/sharing.md)",
        f"state_file={SHIM_STATE_DIR}/accounting",
        f"context_mib={max(0, int(context_mib))}",
    ]
    if share.memory_mib:
        lines.append(f"limit_mib.0={share.memory_mib}")
    return "\n".join(lines) + "\n"


def shim_preload_text() -> str:
    """``/etc/ld.so.preload`` of a ``shim`` container: the shim, nothing else."""
    return SHIM_LIBRARY_TARGET + "\n"


def shim_mounts(files: ShimFiles) -> tuple[dict, ...]:
    """Engine ``Mounts`` of a ``shim`` share: three read-only files and the accounting tmpfs
    (mode 1777: the container's non-root processes share it; gone with the container)."""

    def read_only(source: str, target: str) -> dict:
        return {"Type": "bind", "Source": source, "Target": target, "ReadOnly": True,
                "BindOptions": {"Propagation": "rprivate"}}  # fmt: skip

    tmpfs = {
        "Type": "tmpfs",
        "Target": SHIM_STATE_DIR,
        "TmpfsOptions": {"SizeBytes": 1 << 20, "Mode": 0o1777},
    }
    return (
        read_only(files.library, SHIM_LIBRARY_TARGET),
        read_only(files.config, SHIM_CONFIG_TARGET),
        read_only(files.preload, SHIM_PRELOAD_TARGET),
        tmpfs,
    )


def _device(share: GpuShare, style: GpuStyle, driver: str | None, device_root: str):
    minors = (share.gpu_minor,) if share.gpu_minor is not None else ()
    uuids = (share.gpu_uuid,) if share.gpu_uuid else ()
    reservation = GpuReservation((share.gpu_index,), minors, uuids, driver)
    return render(reservation, style, device_root)


def render_share(
    share: GpuShare,
    style: GpuStyle,
    driver_version: str | None = None,
    pipe_dir: str | None = None,
    device_root: str = "/dev",
    shim: ShimFiles | None = None,
) -> ShareArgs:
    """Container arguments for ``share`` in GPU ``style`` (resolved, not ``AUTO``).

    Args:
        share: the share and its backend.
        style: how the container gets the GPU (toolkit or legacy; ``none`` for simulated GPUs).
        driver_version: host driver (legacy style).
        pipe_dir: the MPS daemon's pipe directory on the host (``mps`` only).
        device_root: host directory of the ``nvidia*`` device nodes (legacy style).
        shim: the shim's host files (``shim`` only).

    Raises:
        DlcError: ``mps`` without a pipe directory, ``shim`` without its files, ``mig``
            without a MIG UUID or in the legacy style.
    """
    if share.backend == "mig":
        if not (share.gpu_uuid or "").startswith("MIG-"):
            raise DlcError("share.gpu_uuid: a mig share needs the MIG device's UUID (MIG-...)")
        if style is GpuStyle.LEGACY:
            raise DlcError("mig shares need the toolkit GPU style; use --gpu-style toolkit")
    gpu = _device(share, style, driver_version, device_root)
    env = {**gpu.env, **hint_env(share)}
    labels = {LABEL_SHARE: share_label(share), LABEL_SHARING: share.backend}
    if share.backend == "shim":
        if shim is None:
            raise DlcError("shim share: the executor has no CUDA shim files for this task")
        return ShareArgs(replace(gpu, env=env), mounts=shim_mounts(shim), labels=labels)
    if share.backend != "mps":
        return ShareArgs(replace(gpu, env=env), labels=labels)
    if not pipe_dir:
        raise DlcError("mps share: the executor has no MPS pipe directory for this GPU")
    env.update(mps_env(share, pipe_dir))
    mount = {
        "Type": "bind",
        "Source": pipe_dir,
        "Target": pipe_dir,
        "ReadOnly": False,
        "BindOptions": {"Propagation": "rprivate"},
    }
    return ShareArgs(replace(gpu, env=env), mounts=(mount,), ipc_mode="host", labels=labels)


def apply_share(kwargs: dict, args: ShareArgs) -> dict:
    """``containers.create`` kwargs with the share's mounts, IPC mode and labels added."""
    out = dict(kwargs)
    if args.mounts:
        out["mounts"] = [*out.get("mounts", []), *args.mounts]
    if args.ipc_mode:
        out["ipc_mode"] = args.ipc_mode
        out.pop("shm_size", None)  # the host's /dev/shm is used: a size would not apply
    out["labels"] = {**out.get("labels", {}), **args.labels}
    return out
