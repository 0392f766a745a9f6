"""Existing MIG instances through NVML (read-only); the real H100 had MIG disabled."""

from __future__ import annotations

from types import SimpleNamespace

from dlc.executor.sharing.mig import list_mig_devices

from .h100 import FakeH100Nvml, NvmlError


class NotFound(NvmlError):
    pass


def _mig_nvml(slots: dict[int, tuple[str, str, int]]) -> FakeH100Nvml:
    """The H100 with MIG enabled and the given instances (slot -> uuid, name, MiB)."""
    nvml = FakeH100Nvml()
    nvml.mig = "enabled"
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7

    def handle(parent, slot):
        if slot not in slots:
            raise NotFound("Not Found")
        return ("mig", slot)

    nvml.nvmlDeviceGetMigDeviceHandleByIndex = handle
    nvml.nvmlDeviceGetUUID = lambda h: slots[h[1]][0] if isinstance(h, tuple) else nvml.uuid
    nvml.nvmlDeviceGetName = lambda h: slots[h[1]][1]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(total=slots[h[1]][2] << 20)
    forbidden = ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlGpuInstanceDestroy")
    for name in forbidden:
        setattr(nvml, name, lambda *a, n=name: (_ for _ in ()).throw(AssertionError(n)))
    return nvml


def test_the_real_h100_with_mig_disabled_offers_no_mig_device():
    assert FakeH100Nvml().mig == "disabled"
    assert list_mig_devices(FakeH100Nvml()) == []


def test_existing_instances_are_listed_with_profile_and_memory():
    nvml = _mig_nvml(
        {
            0: ("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40192),
            3: ("MIG-bbbb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 9856),
        }
    )
    devices = list_mig_devices(nvml)
    assert [(d.slot, d.uuid, d.profile, d.memory_mib) for d in devices] == [
        (0, "MIG-aaaa", "3g.40gb", 40192),
        (3, "MIG-bbbb", "1g.10gb", 9856),
    ]
    assert {d.gpu_index for d in devices} == {0}


def test_a_gpu_without_mig_support_is_skipped():
    nvml = FakeH100Nvml()

    def unsupported(handle):
        raise NvmlError("Not Supported")

    nvml.nvmlDeviceGetMigMode = unsupported
    assert list_mig_devices(nvml) == []
