"""Rendering one GPU reservation into container arguments, both NVIDIA styles."""

from __future__ import annotations

import pytest

from dlc.errors import DlcError
from dlc.executor.gpu_render import (
    GpuReservation,
    GpuStyle,
    container_ordinals,
    merge_search_path,
    pick_style,
    render,
)

DRIVER = "535.104.05"


@pytest.mark.parametrize(
    ("indices", "expected"),
    [
        pytest.param((0,), (0,), id="one-gpu"),
        pytest.param((0, 1, 2, 3), (0, 1, 2, 3), id="sorted-stays"),
        pytest.param((3, 1), (1, 0), id="reversed-pair"),
        pytest.param((5, 2, 7), (1, 0, 2), id="allocator-order-kept"),
        pytest.param((), (), id="no-gpus"),
    ],
)
def test_container_ordinals_put_allocator_first_gpu_at_cuda0(indices, expected):
    assert container_ordinals(indices) == expected


@pytest.mark.parametrize(
    ("reservation", "devices"),
    [
        pytest.param(
            GpuReservation((0, 1), (0, 1), (), DRIVER),
            ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1"],
            id="minors-equal-indices",
        ),
        pytest.param(
            GpuReservation((2, 0), (5, 3), (), DRIVER),
            ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia5", "nvidia3"],
            id="minors-differ-from-indices",
        ),
        pytest.param(
            GpuReservation((1,), (), (), DRIVER),
            ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia1"],
            id="minors-unknown-fall-back-to-index",
        ),
    ],
)
def test_legacy_devices_by_minor_number(reservation, devices):
    args = render(reservation, GpuStyle.LEGACY, device_root="/fake/dev")
    assert list(args.devices) == [f"/fake/dev/{d}:/dev/{d}:rwm" for d in devices]
    assert args.volumes == {f"nvidia_driver_{DRIVER}": {"bind": "/usr/local/nvidia", "mode": "ro"}}
    assert args.device_requests == ()
    assert args.env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert args.path_prepend == ("/usr/local/nvidia/bin",)
    assert args.ld_library_path_prepend == ("/usr/local/nvidia/lib", "/usr/local/nvidia/lib64")


@pytest.mark.parametrize(
    ("reservation", "device_ids"),
    [
        pytest.param(GpuReservation((3, 1), (3, 1)), ["3", "1"], id="indices-in-allocator-order"),
        pytest.param(
            GpuReservation((3, 1), (7, 6), ("GPU-c", "GPU-a")), ["GPU-c", "GPU-a"], id="uuids-win"
        ),
    ],
)
def test_toolkit_device_request(reservation, device_ids):
    args = render(reservation, GpuStyle.TOOLKIT)
    assert args.device_requests == (
        {"Driver": "nvidia", "DeviceIDs": device_ids, "Capabilities": [["gpu"]]},
    )
    assert args.env["NVIDIA_VISIBLE_DEVICES"] == ",".join(device_ids)
    assert args.devices == () and args.volumes == {}


@pytest.mark.parametrize("style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY], ids=lambda s: s.value)
@pytest.mark.parametrize(
    ("indices", "cuda_visible", "host_ids"),
    [
        pytest.param((0, 1), "0,1", "0,1", id="in-order"),
        pytest.param((6, 4, 5), "2,0,1", "6,4,5", id="permuted"),
    ],
)
def test_both_styles_number_from_zero_in_allocator_order(style, indices, cuda_visible, host_ids):
    args = render(GpuReservation(indices, indices, (), DRIVER), style)
    assert args.env["CUDA_VISIBLE_DEVICES"] == cuda_visible
    assert args.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert args.env["DLC_GPU_HOST_IDS"] == host_ids


@pytest.mark.parametrize(
    "style", [GpuStyle.TOOLKIT, GpuStyle.LEGACY, GpuStyle.NONE], ids=lambda s: s.value
)
def test_no_gpus_renders_nothing_but_hides_all_gpus(style):
    args = render(GpuReservation(), style)
    assert args.devices == () and args.volumes == {} and args.device_requests == ()
    assert args.env == {"NVIDIA_VISIBLE_DEVICES": "void", "CUDA_VISIBLE_DEVICES": ""}


def test_legacy_without_driver_version_is_a_clear_error():
    with pytest.raises(DlcError, match="driver_version"):
        render(GpuReservation((0,), (0,)), GpuStyle.LEGACY)


def test_auto_must_be_resolved_first():
    with pytest.raises(DlcError, match="pick_style"):
        render(GpuReservation((0,), (0,)), GpuStyle.AUTO)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"indices": (0, 0)}, "duplicate", id="duplicate-index"),
        pytest.param({"indices": (0, 1), "minors": (0,)}, "gpu_minors", id="minor-count"),
        pytest.param({"indices": (0,), "uuids": ("a", "b")}, "gpu_uuids", id="uuid-count"),
    ],
)
def test_reservation_rejects_inconsistent_input(kwargs, message):
    with pytest.raises(DlcError, match=message):
        GpuReservation(**kwargs)


@pytest.mark.parametrize(
    ("configured", "runtimes", "volume", "expected"),
    [
        pytest.param(GpuStyle.AUTO, {"runc", "nvidia"}, True, GpuStyle.TOOLKIT, id="toolkit-wins"),
        pytest.param(GpuStyle.AUTO, {"runc"}, True, GpuStyle.LEGACY, id="volume-means-legacy"),
        pytest.param(GpuStyle.AUTO, {"runc"}, False, GpuStyle.NONE, id="nothing-found"),
        pytest.param(GpuStyle.LEGACY, {"nvidia"}, False, GpuStyle.LEGACY, id="configured-wins"),
        pytest.param(GpuStyle.NONE, {"nvidia"}, True, GpuStyle.NONE, id="configured-none"),
    ],
)
def test_pick_style(configured, runtimes, volume, expected):
    assert pick_style(configured, frozenset(runtimes), volume) is expected


@pytest.mark.parametrize(
    ("prepend", "current", "expected"),
    [
        pytest.param(("/a",), "/usr/bin:/bin", "/a:/usr/bin:/bin", id="prepend"),
        pytest.param(("/a",), "/a:/bin", "/a:/bin", id="no-duplicate"),
        pytest.param(("/a", "/b"), None, "/a:/b:/d", id="default-when-unset"),
        pytest.param(("/a",), "", "/a", id="empty-current"),
    ],
)
def test_merge_search_path(prepend, current, expected):
    assert merge_search_path(prepend, current, "/d") == expected
