"""Red-team finding 54 (docs/security.md): no container may pick GPUs through an engine
runtime's own device variable.

The AMD container runtime (``amd-ctk runtime configure --amd-set-as-default`` makes it the
engine's default) adds every GPU named by ``AMD_VISIBLE_DEVICES`` in the container's
environment, ``all`` for all of them, with ``/dev/kfd`` and the device cgroup rules. DLC maps
an AMD task's devices itself and set nothing for that variable, so a CPU-only job (or a one-GPU
job) whose ``env`` or image said ``AMD_VISIBLE_DEVICES=all`` got every GPU of the agent. Every
container now sets it to ``none`` (the runtime adds nothing for a value that names no GPU), as
``NVIDIA_VISIBLE_DEVICES=void`` does for the NVIDIA runtime. Likewise the NVIDIA runtime, with
``swarm-resource`` in its config, takes ``DOCKER_RESOURCE_GPU`` over ``NVIDIA_VISIBLE_DEVICES``:
such variables from the job or its image now say what the rendering says.
"""

from __future__ import annotations

import pytest

from dlc.devices.amd.render import render_rocm
from dlc.devices.base import GpuReservation
from dlc.devices.nvidia.render import PROC_DRIVER, PROC_IRQ
from dlc.executor.container_spec import (
    ENGINE_MASKED_PATHS,
    TaskIdentity,
    container_env,
    create_kwargs,
)
from dlc.executor.gpu_render import GpuStyle, render
from dlc.scheduler.jobs.launch_spec import LaunchSpec

HOSTILE = {"AMD_VISIBLE_DEVICES": "all", "NVIDIA_VISIBLE_DEVICES": "all"}


@pytest.mark.parametrize("style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY, GpuStyle.NONE],
                         ids=lambda s: s.value)  # fmt: skip
def test_a_cpu_only_container_names_no_gpu_to_any_runtime(style):
    spec = LaunchSpec("j", "img", env=dict(HOSTILE))  # the job's env says all
    env = container_env(spec, render(GpuReservation(), style), image_env=dict(HOSTILE))
    assert env["AMD_VISIBLE_DEVICES"] == "none"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_an_amd_task_gets_its_own_devices_and_no_runtime_pick():
    spec = LaunchSpec("j", "img", env=dict(HOSTILE))
    args = render_rocm(GpuReservation((2,), (130,), vendor="amd", cards=(2,)))
    env = container_env(spec, args, image_env=dict(HOSTILE))
    assert env["AMD_VISIBLE_DEVICES"] == "none"
    assert [d.split(":")[0] for d in args.devices] == ["/dev/kfd", "/dev/dri/renderD130",
                                                       "/dev/dri/card2"]  # fmt: skip


@pytest.mark.parametrize("style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY], ids=lambda s: s.value)
def test_an_nvidia_task_names_no_amd_gpu_either(style):
    spec = LaunchSpec("j", "img", env=dict(HOSTILE))
    args = render(GpuReservation((0,), (0,), driver_version="550.1"), style)
    assert container_env(spec, args, image_env={})["AMD_VISIBLE_DEVICES"] == "none"


@pytest.mark.parametrize(
    ("reservation", "visible"),
    [(GpuReservation(), "void"), (GpuReservation((1,), (1,), ("GPU-b",), "550.1"), "GPU-b")],
    ids=["cpu-only", "one-gpu"],
)
def test_swarm_resource_variables_say_what_the_rendering_says(reservation, visible):
    """With ``swarm-resource = "DOCKER_RESOURCE_GPU"`` in the NVIDIA runtime's config, that
    variable wins over ``NVIDIA_VISIBLE_DEVICES``: the job's and the image's copies must not
    name GPUs of their own."""
    spec = LaunchSpec("j", "img", env={"DOCKER_RESOURCE_GPU": "all"})
    args = render(reservation, GpuStyle.TOOLKIT)
    env = container_env(spec, args, image_env={"DOCKER_RESOURCE_GPU_ADDITIONAL": "all"})
    assert env["NVIDIA_VISIBLE_DEVICES"] == visible
    assert env["DOCKER_RESOURCE_GPU"] == env["DOCKER_RESOURCE_GPU_ADDITIONAL"] == visible
    assert "DOCKER_RESOURCE_GPU" not in container_env(LaunchSpec("j", "img"), args, {})


@pytest.mark.parametrize("style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY, GpuStyle.NONE],
                         ids=lambda s: s.value)  # fmt: skip
def test_a_cpu_only_container_cannot_read_the_drivers_gpu_list(style):
    """Red-team finding 58: ``/proc/driver/nvidia`` lists every GPU of the host (model, UUID,
    bus location, minor) and the driver version; the toolkit trims it to a GPU container's
    own GPUs, but a CPU-only container got the whole of it. It is masked there, with every
    mask the engine applies by default (naming masks replaces the engine's list)."""
    kwargs = create_kwargs(
        LaunchSpec("j", "img"), TaskIdentity("f", "e", "t", "j"), render(GpuReservation(), style)
    )
    assert PROC_DRIVER in kwargs["masked_paths"]
    assert set(ENGINE_MASKED_PATHS) <= set(kwargs["masked_paths"])
    # finding 60: the whole of /proc/driver (nvidia-uvm/gpus names every used GPU's UUID) and
    # /proc/irq (each line's handler, what /proc/interrupts lists)
    assert {"/proc/driver", "/proc/irq"} <= set(kwargs["masked_paths"]) and PROC_IRQ


@pytest.mark.parametrize("style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY], ids=lambda s: s.value)
def test_a_gpu_container_keeps_the_engines_masks(style):
    """A GPU task's driver files are the toolkit's (or the legacy volume's) business: no
    masks are named, so the engine applies its own list unchanged."""
    args = render(GpuReservation((0,), (0,), driver_version="550.1"), style)
    kwargs = create_kwargs(LaunchSpec("j", "img"), TaskIdentity("f", "e", "t", "j"), args)
    assert "masked_paths" not in kwargs
