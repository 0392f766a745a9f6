"""The device seam and the AMD backend: rendering exactly the job's DRM nodes, sysfs, registry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlc.devices.amd.backend import NO_SHARE_REASON, parse_rocm_usage
from dlc.devices.amd.host import SysfsDrm, pair_nodes
from dlc.devices.amd.render import render_rocm
from dlc.devices.base import GpuReservation
from dlc.devices.registry import BACKENDS, backend_for
from dlc.errors import DlcError
from dlc.executor.container_spec import create_kwargs
from dlc.executor.gpu_render import GpuStyle, render
from dlc.topology.parse_amd import parse_amd_smi_text

MI300 = (
    Path(__file__).resolve().parent.parent
    / "fixtures/amd/mi300-series-8gpu_xgmi15_showtopo_ms-swift.txt"
)


def _fake_sysfs(root: Path, gpus: int) -> None:
    """/sys/class/drm of an AMD host: card<i> and renderD<128+i> per GPU, bus order shuffled."""
    topo = parse_amd_smi_text(MI300.read_text())  # the fake host has the fixture's GPUs
    assert len(topo.gpus) >= gpus
    for i in range(gpus):
        bus = f"0000:{0x85 - 0x20 * i:02x}:00.0"  # descending: sysfs order != bus order
        dev = root / "devices" / bus
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x1002\n")
        for name in (f"card{i}", f"renderD{128 + i}"):
            (root / name).mkdir()
            os.symlink(dev, root / name / "device")


def test_render_gives_kfd_and_exactly_the_reserved_nodes():
    args = render_rocm(GpuReservation((5, 2), (133, 130), vendor="amd", cards=(5, 2)))
    assert args.devices == (
        "/dev/kfd:/dev/kfd:rwm",
        "/dev/dri/renderD133:/dev/dri/renderD133:rwm",
        "/dev/dri/card5:/dev/dri/card5:rwm",
        "/dev/dri/renderD130:/dev/dri/renderD130:rwm",
        "/dev/dri/card2:/dev/dri/card2:rwm",
    )
    assert args.group_add == ("video", "render")
    assert args.env["ROCR_VISIBLE_DEVICES"] == args.env["HIP_VISIBLE_DEVICES"] == "1,0"
    assert args.env["DLC_GPU_HOST_IDS"] == "5,2" and not args.device_requests


def test_executor_render_dispatches_on_vendor():
    amd = render(GpuReservation((0,), (128,), vendor="amd", cards=(0,)), GpuStyle.TOOLKIT)
    assert "/dev/kfd:/dev/kfd:rwm" in amd.devices and not amd.device_requests
    nvidia = render(GpuReservation((0,)), GpuStyle.TOOLKIT)
    assert nvidia.device_requests and not nvidia.group_add
    simulated = render(GpuReservation((0,), vendor="amd"), GpuStyle.NONE)
    assert not simulated.devices


def test_container_kwargs_carry_the_groups(tmp_path):
    from dlc.executor.container_spec import TaskIdentity
    from dlc.scheduler.jobs.launch_spec import LaunchSpec

    args = render_rocm(GpuReservation((1,), (129,), vendor="amd", cards=(1,)))
    spec = LaunchSpec(job_id="j1", image="rocm/pytorch:latest", command=("true",), gpu_ids=(1,))
    kwargs = create_kwargs(spec, TaskIdentity("fw", "ex", "t1", "j1"), args)
    assert kwargs["group_add"] == ["video", "render"]
    assert kwargs["devices"][0] == "/dev/kfd:/dev/kfd:rwm"


def test_sysfs_pairs_nodes_by_bus_order(tmp_path):
    _fake_sysfs(tmp_path, 3)
    gpus = SysfsDrm(tmp_path).gpus()
    assert [(g.card, g.render) for g in gpus] == [(2, 130), (1, 129), (0, 128)]
    assert pair_nodes([("card0", "0000:01:00.0")]) == []  # no render node: not a GPU


def test_registry_one_line_per_vendor_and_sharing():
    assert set(BACKENDS) == {"nvidia", "amd"}
    assert backend_for("amd").sharing().allowed is False
    assert backend_for("amd").sharing().refusal == NO_SHARE_REASON
    assert backend_for("NVIDIA").sharing().allowed
    with pytest.raises(DlcError, match="no device backend for 'intel'"):
        backend_for("intel")


def test_amd_fingerprint_from_file_and_usage():
    assert backend_for("amd").fingerprint(MI300).vendor == "amd"
    text = '{"card0": {"GPU use (%)": "7", "VRAM Total Memory (B)": "206141652992",'
    text += ' "VRAM Total Used Memory (B)": "297611264"}}'
    (sample,) = parse_rocm_usage(text, (0, 1))
    assert (sample.util_percent, sample.memory_used_mib, sample.memory_total_mib) == (
        7,
        283,
        196592,
    )
