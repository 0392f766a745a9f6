"""Pure rendering of an NVIDIA GPU reservation into container arguments (both styles).

Nothing here talks to Docker or the GPU: the functions take plain data and return plain data,
which :mod:`dlc.executor.runtime` hands to the docker SDK.

Numbering inside the container: both styles expose the reserved GPUs to the container, where
the CUDA runtime (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) numbers them by PCI bus order, i.e. by
ascending host index. ``CUDA_VISIBLE_DEVICES`` then lists those container ordinals in the
allocator's order, so the job's ``cuda:0`` is the allocator's first GPU, ``cuda:1`` its second,
and so on - numbered from 0 whatever the host indices are.

Every style sets ``NVIDIA_VISIBLE_DEVICES``: with the toolkit it selects the GPUs; otherwise it
is ``void``, because an image such as ``nvidia/cuda`` sets ``NVIDIA_VISIBLE_DEVICES=all`` and an
engine whose default runtime is ``nvidia`` would otherwise hand the container every GPU.
"""

from __future__ import annotations

import enum

from dlc.devices.base import GpuContainerArgs, GpuReservation
from dlc.errors import DlcError

#: where the nvidia-docker v1 driver volume is mounted (what CUDA images expect)
DRIVER_MOUNT = "/usr/local/nvidia"
#: control devices every legacy-style GPU container needs, besides its /dev/nvidia<minor>
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
#: what the driver volume adds to PATH and LD_LIBRARY_PATH (nvidia-docker v1 layout)
DRIVER_BIN = (f"{DRIVER_MOUNT}/bin",)
DRIVER_LIBS = (f"{DRIVER_MOUNT}/lib", f"{DRIVER_MOUNT}/lib64")
#: the drivers' procfs: ``nvidia`` holds its version, and per GPU of the host the model, UUID,
#: bus location and device minor; ``nvidia-uvm/gpus`` a link named by the UUID of each GPU used
#: since the module loaded, with an ``info`` file naming it. The container toolkit replaces
#: ``nvidia`` in a GPU container with a tmpfs holding only that container's GPUs; a container
#: without GPUs gets nothing from any of it but other tenants' inventory (red-team findings 58
#: and 60, docs/security.md), so the whole folder is masked there
PROC_DRIVER = "/proc/driver"
#: ``/proc/irq/N/`` names each interrupt line's handler as a folder (``nvidia`` per GPU), what
#: ``/proc/interrupts`` (masked among the engine's defaults) lists (finding 60)
PROC_IRQ = "/proc/irq"


class GpuStyle(enum.StrEnum):
    """How a container gets its GPUs."""

    AUTO = "auto"  #: pick from what the engine supports (:func:`pick_style`)
    TOOLKIT = "toolkit"  #: NVIDIA container toolkit: a DeviceRequest with the GPU ids
    LEGACY = "legacy"  #: nvidia-docker v1: driver volume + /dev/nvidia* devices
    NONE = "none"  #: no GPU access at all (CPU jobs, machines without GPUs)


def driver_volume_name(driver_version: str) -> str:
    """``nvidia_driver_<version>``, the volume nvidia-docker v1 created per driver."""
    return f"nvidia_driver_{driver_version}"


def container_ordinals(indices: tuple[int, ...]) -> tuple[int, ...]:
    """``CUDA_VISIBLE_DEVICES`` entries putting ``indices`` first-to-last as cuda:0..k-1.

    Inside the container the GPUs are numbered by ascending host index; the result lists,
    for each GPU in allocator order, its ordinal there. ``(3, 1)`` -> ``(1, 0)``.
    """
    rank = {index: pos for pos, index in enumerate(sorted(indices))}
    return tuple(rank[i] for i in indices)


def _numbering_env(reservation: GpuReservation) -> dict[str, str]:
    ordinals = container_ordinals(reservation.indices)
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(str(o) for o in ordinals),
        "DLC_GPU_HOST_IDS": ",".join(str(i) for i in reservation.indices),
    }


def render_toolkit(reservation: GpuReservation) -> GpuContainerArgs:
    """NVIDIA container toolkit style: one ``DeviceRequest`` naming the GPUs.

    UUIDs are used when known (unambiguous across reboots), else host indices.
    """
    if not reservation.indices:
        return render_none()
    ids = reservation.uuids or tuple(str(i) for i in reservation.indices)
    env = _numbering_env(reservation)
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(ids)
    env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
    request = {"Driver": "nvidia", "DeviceIDs": list(ids), "Capabilities": [["gpu"]]}
    return GpuContainerArgs(device_requests=(request,), env=env)


def render_legacy(reservation: GpuReservation, device_root: str = "/dev") -> GpuContainerArgs:
    """nvidia-docker v1 style: driver volume read-only, control devices and one per GPU.

    Args:
        reservation: the GPUs; ``driver_version`` is required.
        device_root: host directory holding the ``nvidia*`` device nodes (``/dev``; tests
            point it at a directory of stand-in nodes). Container paths are always ``/dev``.

    Raises:
        DlcError: the driver version is unknown.
    """
    if not reservation.indices:
        return render_none()
    if not reservation.driver_version:
        raise DlcError(
            "driver_version: the legacy GPU style needs the host's NVIDIA driver version"
        )
    minors = reservation.minors or reservation.indices
    names = CONTROL_DEVICES + tuple(f"nvidia{m}" for m in minors)
    root = device_root.rstrip("/")
    devices = tuple(f"{root}/{name}:/dev/{name}:rwm" for name in names)
    env = _numbering_env(reservation)
    env["NVIDIA_VISIBLE_DEVICES"] = "void"
    return GpuContainerArgs(
        devices=devices,
        volumes={
            driver_volume_name(reservation.driver_version): {"bind": DRIVER_MOUNT, "mode": "ro"}
        },
        env=env,
        path_prepend=DRIVER_BIN,
        ld_library_path_prepend=DRIVER_LIBS,
    )


def render_none() -> GpuContainerArgs:
    """No GPU: hide every GPU even from an engine whose default runtime is ``nvidia``, and
    the drivers' and the interrupt lines' view of the host's GPUs (:data:`PROC_DRIVER`,
    :data:`PROC_IRQ`)."""
    return GpuContainerArgs(
        env={"NVIDIA_VISIBLE_DEVICES": "void", "CUDA_VISIBLE_DEVICES": ""},
        masked_paths=(PROC_DRIVER, PROC_IRQ),
    )


def render(
    reservation: GpuReservation, style: GpuStyle, device_root: str = "/dev"
) -> GpuContainerArgs:
    """Render ``reservation`` in ``style`` (which must be resolved, not ``AUTO``).

    Raises:
        DlcError: ``style`` is ``AUTO``, or the style lacks a fact it needs.
    """
    if style is GpuStyle.TOOLKIT:
        return render_toolkit(reservation)
    if style is GpuStyle.LEGACY:
        return render_legacy(reservation, device_root)
    if style is GpuStyle.NONE:
        return render_none()
    raise DlcError("gpu_style: resolve 'auto' with pick_style() before rendering")


def pick_style(
    configured: GpuStyle, engine_runtimes: frozenset[str], driver_volume_present: bool
) -> GpuStyle:
    """The style to use on this agent.

    Args:
        configured: ``--gpu-style``; anything but ``AUTO`` is taken as is.
        engine_runtimes: runtimes registered with the Docker engine (``docker info``).
        driver_volume_present: whether the ``nvidia_driver_<version>`` volume exists.

    Returns:
        ``TOOLKIT`` when the engine has the ``nvidia`` runtime, else ``LEGACY`` when the
        driver volume exists, else ``NONE``.
    """
    if configured is not GpuStyle.AUTO:
        return configured
    if "nvidia" in engine_runtimes:
        return GpuStyle.TOOLKIT
    if driver_volume_present:
        return GpuStyle.LEGACY
    return GpuStyle.NONE
