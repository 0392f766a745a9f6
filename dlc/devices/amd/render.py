"""Pure rendering of an AMD (ROCm) GPU reservation into container arguments.

A ROCm container needs ``/dev/kfd`` (the compute queue interface every process opens)
and the DRM nodes of exactly its GPUs: ``/dev/dri/renderD<n>`` (compute and memory) and
``/dev/dri/card<n>``. KFD checks each process's DRM-node access, so a container given
only some render nodes sees only those GPUs. The device nodes belong to the ``video``
and ``render`` groups, which the container's user must hold (``group_add``). The backend
passes the groups by the host's numeric ids (the owners of the very nodes it maps): the
``render`` group's id differs between distributions and an image need not name it.
``ROCR_VISIBLE_DEVICES`` then numbers the visible GPUs in allocator order and
``HIP_VISIBLE_DEVICES`` keeps HIP's numbering the same (both from 0 inside).
"""

from __future__ import annotations

from dlc.devices.base import GpuContainerArgs, GpuReservation
from dlc.errors import DlcError

#: groups that own /dev/kfd and /dev/dri/* on ROCm hosts
ROCM_GROUPS = ("video", "render")
#: first DRM render minor; renderD<128 + k> is the k-th DRM device when nothing else says
FIRST_RENDER_MINOR = 128


def container_ordinals(indices: tuple[int, ...]) -> tuple[int, ...]:
    """Visible-device entries putting ``indices`` first-to-last as device 0..k-1."""
    rank = {index: pos for pos, index in enumerate(sorted(indices))}
    return tuple(rank[i] for i in indices)


def device_paths(reservation: GpuReservation) -> list[str]:
    """``kfd`` and each GPU's ``dri/renderD<n>`` and ``dri/card<n>``, relative to ``/dev``.

    Raises:
        DlcError: minors or card numbers do not match the GPU count.
    """
    renders = reservation.minors or tuple(FIRST_RENDER_MINOR + i for i in reservation.indices)
    cards = reservation.cards or tuple(r - FIRST_RENDER_MINOR for r in renders)
    if len(cards) != len(reservation.indices):
        raise DlcError("gpu_cards: need one /dev/dri/card number per GPU index")
    paths = ["kfd"]
    for render, card in zip(renders, cards, strict=True):
        paths += [f"dri/renderD{render}", f"dri/card{card}"]
    return paths


def render_rocm(
    reservation: GpuReservation,
    device_root: str = "/dev",
    groups: tuple[str, ...] = ROCM_GROUPS,
) -> GpuContainerArgs:
    """``/dev/kfd``, each reserved GPU's render and card node, the ROCm groups and env.

    Args:
        reservation: the GPUs; ``minors`` are their ``renderD`` numbers and ``cards``
            their ``card`` numbers (from :mod:`dlc.devices.amd.host`). Without them the
            usual numbering (card ``i``, renderD ``128 + i``) is assumed.
        device_root: host directory holding ``kfd`` and ``dri/`` (tests point it at a
            directory of stand-in nodes). Container paths are always ``/dev``.
        groups: supplementary groups (names, or the nodes' numeric group ids).

    Raises:
        DlcError: minors or card numbers do not match the GPU count.
    """
    if not reservation.indices:
        return GpuContainerArgs(env={"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    paths = device_paths(reservation)
    root = device_root.rstrip("/")
    # Inside the container ROCr numbers the visible render nodes by host order, like CUDA.
    ordinals = ",".join(str(o) for o in container_ordinals(reservation.indices))
    env = {
        "ROCR_VISIBLE_DEVICES": ordinals,
        "HIP_VISIBLE_DEVICES": ordinals,
        "DLC_GPU_HOST_IDS": ",".join(str(i) for i in reservation.indices),
        # an image that also carries CUDA tooling must not reach NVIDIA GPUs of this host
        "NVIDIA_VISIBLE_DEVICES": "void",
    }
    return GpuContainerArgs(
        devices=tuple(f"{root}/{p}:/dev/{p}:rwm" for p in paths),
        env=env,
        group_add=tuple(groups),
    )
