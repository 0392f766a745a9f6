"""Reading GPU minors and the driver version from /proc/driver/nvidia text."""

from __future__ import annotations

import pytest

from dlc.errors import DlcError
from dlc.executor.host_gpus import ProcDriverInfo, parse_driver_version, parse_information

INFO = """Model: \t\t Tesla V100-SXM2-16GB
IRQ:   \t\t 118
GPU UUID: \t GPU-5d5a3c0e-0000-0000-0000-000000000001
Video BIOS: \t 88.00.4f.00.09
Bus Type: \t PCIe
DMA Size: \t 47 bits
DMA Mask: \t 0x7fffffffffff
Bus Location: \t 0000:{bus}:00.0
Device Minor: \t {minor}
GPU Excluded:\t No
"""


@pytest.mark.parametrize(
    ("text", "version"),
    [
        pytest.param(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
            "535.104.05",
            id="proprietary",
        ),
        pytest.param(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build\n",
            "550.54.14",
            id="open-kernel-module",
        ),
    ],
)
def test_parse_driver_version(text, version):
    assert parse_driver_version(text) == version


def test_parse_driver_version_rejects_garbage():
    with pytest.raises(DlcError, match="Kernel Module"):
        parse_driver_version("hello\n")


def test_parse_information():
    gpu = parse_information(INFO.format(bus="1A", minor=3))
    assert (gpu.bus_id, gpu.minor, gpu.uuid) == (
        "0000:1a:00.0",
        3,
        "GPU-5d5a3c0e-0000-0000-0000-000000000001",
    )


def test_parse_information_without_minor_is_an_error():
    with pytest.raises(DlcError, match="Device Minor"):
        parse_information("Model: x\n")


def test_index_follows_bus_order_and_minors_may_differ(tmp_path):
    # minors deliberately not in bus order: index comes from bus order, minor from the file
    for bus, minor in (("3b", 0), ("1a", 2), ("86", 1)):
        folder = tmp_path / "gpus" / f"0000:{bus}:00.0"
        folder.mkdir(parents=True)
        (folder / "information").write_text(INFO.format(bus=bus, minor=minor))
    (tmp_path / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01  x\n"
    )
    info = ProcDriverInfo(tmp_path)
    assert info.minors() == {0: 2, 1: 0, 2: 1}
    assert info.driver_version() == "470.82.01"


def test_no_driver_loaded(tmp_path):
    info = ProcDriverInfo(tmp_path / "absent")
    assert info.minors() == {}
    assert info.driver_version() is None
