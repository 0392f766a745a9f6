"""Pure rendering of a share per backend (the docker tests run the same through the engine)."""

from __future__ import annotations

import pytest

from dlc.errors import DlcError
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.render import (
    LABEL_SHARE,
    LABEL_SHARING,
    apply_share,
    render_share,
    thread_percentage,
)
from dlc.scheduler.jobs.launch_spec import GpuShare

from .h100 import h100_gpu

UUID = h100_gpu()["uuid"]
MIG = "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"


def test_mps_share_gets_pipe_limits_ipc_and_the_gpu_by_uuid():
    share = GpuShare(0, UUID, 4096, 250, "mps", gpu_minor=0)
    args = render_share(share, GpuStyle.TOOLKIT, pipe_dir="/var/run/dlc-mps/gpu0/pipe")
    env = args.gpu.env
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/var/run/dlc-mps/gpu0/pipe"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_VISIBLE_DEVICES"] == UUID and env["NVIDIA_VISIBLE_DEVICES"] == UUID
    assert args.gpu.device_requests[0]["DeviceIDs"] == [UUID]
    assert (env["DLC_GPU_MEMORY_MIB"], env["DLC_GPU_CORE_MILLI"]) == ("4096", "250")
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert args.ipc_mode == "host"
    assert args.mounts[0]["Source"] == args.mounts[0]["Target"] == "/var/run/dlc-mps/gpu0/pipe"
    assert args.labels == {LABEL_SHARE: "0:4096:250:mps", LABEL_SHARING: "mps"}


def test_memory_only_share_sets_no_thread_cap():
    env = render_share(GpuShare(0, UUID, 4096, 0, "mps"), GpuStyle.TOOLKIT, pipe_dir="/p").gpu.env
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"


@pytest.mark.parametrize(
    "milli, percent", [(0, None), (1, 1), (250, 25), (333, 34), (999, 100), (1000, None)]
)
def test_thread_percentage_rounds_up(milli, percent):
    assert thread_percentage(milli) == percent


def test_legacy_style_mps_share_maps_the_minor_device(tmp_path):
    share = GpuShare(3, None, 2048, 500, "mps", gpu_minor=7)
    args = render_share(share, GpuStyle.LEGACY, "580.159.04", "/p", device_root="/dev")
    assert "/dev/nvidia7:/dev/nvidia7:rwm" in args.gpu.devices
    assert (
        args.gpu.env["CUDA_VISIBLE_DEVICES"] == "0"
        and args.gpu.env["NVIDIA_VISIBLE_DEVICES"] == "void"
    )
    assert args.gpu.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"


def test_watchdog_share_has_hints_and_no_mps():
    args = render_share(GpuShare(2, UUID, 4096, 0, "watchdog"), GpuStyle.TOOLKIT)
    assert not any(k.startswith("CUDA_MPS") for k in args.gpu.env)
    assert args.ipc_mode is None and args.mounts == ()
    assert "compute not limited" in args.gpu.env["DLC_GPU_ISOLATION"]


def test_none_share_says_time_slicing_without_limits():
    args = render_share(GpuShare(1, UUID, 0, 500, "none"), GpuStyle.TOOLKIT)
    assert args.gpu.env["DLC_GPU_ISOLATION"] == "time-slicing: no memory or compute limits"
    assert args.labels[LABEL_SHARING] == "none"


def test_mig_share_names_the_mig_device():
    args = render_share(GpuShare(0, MIG, 10240, 0, "mig"), GpuStyle.TOOLKIT)
    assert args.gpu.env["NVIDIA_VISIBLE_DEVICES"] == MIG
    assert args.gpu.device_requests[0]["DeviceIDs"] == [MIG]


@pytest.mark.parametrize(
    "share, style, message",
    [
        (GpuShare(0, UUID, 1, 0, "mig"), GpuStyle.TOOLKIT, "needs the MIG device's UUID"),
        (GpuShare(0, MIG, 1, 0, "mig"), GpuStyle.LEGACY, "need the toolkit GPU style"),
        (GpuShare(0, UUID, 1, 0, "mps"), GpuStyle.TOOLKIT, "no MPS pipe directory"),
    ],
    ids=["mig-without-mig-uuid", "mig-legacy", "mps-without-pipe"],
)
def test_unusable_shares_are_refused(share, style, message):
    with pytest.raises(DlcError, match=message):
        render_share(share, style, "580.159.04")


def test_apply_share_adds_mounts_ipc_labels_and_drops_shm_size():
    args = render_share(GpuShare(0, UUID, 4096, 250, "mps"), GpuStyle.TOOLKIT, pipe_dir="/p")
    kwargs = {"mounts": [{"Target": "/data"}], "shm_size": "64m", "labels": {"dlc.job": "j"}}
    out = apply_share(kwargs, args)
    assert [m["Target"] for m in out["mounts"]] == ["/data", "/p"]
    assert out["ipc_mode"] == "host" and "shm_size" not in out
    assert out["labels"]["dlc.job"] == "j" and out["labels"][LABEL_SHARING] == "mps"
