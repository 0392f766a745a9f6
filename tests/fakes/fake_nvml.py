"""A fake NVML binding built from a real machine's topology.

:class:`FakeNvml` answers the ``pynvml`` calls that :mod:`dlc.topology.discovery.nvml` makes,
consistently with one :class:`~dlc.topology.model.Topology` (normally parsed from a
real ``nvidia-smi topo -m`` fixture) so that tests can check NVML discovery against
the text parser on real machines.

How the fake fills what ``topo -m`` does not show:

* PCI bus ids: ``fake_bus_id(i)``, ascending with the index as on real hosts;
  NVSwitches get ids from ``fake_switch_bus_id(s)``.
* PCIe level of an NVLinked pair (``topo -m`` prints ``NV#`` instead): ``NODE``
  when both GPUs share a NUMA node (or, with no NUMA column, a CPU affinity),
  else ``SYS``. :func:`hidden_level` is that rule.
* NVLinks: point-to-point wiring gives GPU ``i`` ``NV#`` links whose remote end is
  GPU ``j``. When that wiring would need more links than a GPU has
  (``NVML_NVLINK_MAX_LINKS``: 8 GPUs x NV12 on HGX A100) the GPUs sit on an
  NVSwitch fabric instead: each has ``NV#`` links spread over the switches.
* P2P status: from a parsed ``topo -p2p`` matrix when given, else ``OK`` for
  NVLinked pairs and PCIe levels up to ``NODE``, ``CNS`` across sockets.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from dlc.topology.model import P2PStatus, PcieLevel, Topology, pair_key

_UUID_NAMESPACE = uuid.UUID("6f1d4c2e-0b8a-4e55-9d5e-2a7c3f90b1aa")


class NVMLError(Exception):
    """Base of the fake's errors; ``value`` is the ``nvmlReturn_t`` code."""

    value = 999
    text = "Unknown Error"

    def __str__(self) -> str:
        return self.text


class NVMLError_Uninitialized(NVMLError):  # noqa: N801 - pynvml's names
    value, text = 1, "Uninitialized"


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    value, text = 2, "Invalid Argument"


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    value, text = 3, "Not Supported"


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    value, text = 9, "Driver Not Loaded"


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    value, text = 12, "NVML Shared Library Not Found"


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
    value, text = 13, "Function Not Found"


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    value, text = 15, "GPU is lost"


_P2P_CODES = {
    P2PStatus.OK: 0,
    P2PStatus.CNS: 1,
    P2PStatus.GNS: 2,
    P2PStatus.TNS: 3,
    P2PStatus.DR: 4,
    P2PStatus.NS: 5,
    P2PStatus.U: 6,
}
_LEVEL_CODES = {
    PcieLevel.PIX: 10,
    PcieLevel.PXB: 20,
    PcieLevel.PHB: 30,
    PcieLevel.NODE: 40,
    PcieLevel.SYS: 50,
}


def fake_bus_id(index: int) -> str:
    """The fake's PCI bus id of GPU ``index`` (same scheme as ``tests/fakes/nvidia-smi``)."""
    return f"00000000:{0x07 + 0x0E * index:02X}:00.0"


def fake_switch_bus_id(switch: int) -> str:
    """The fake's PCI bus id of NVSwitch ``switch``."""
    return f"00000000:{0xE0 + switch:02X}:00.0"


def hidden_level(topo: Topology, a: int, b: int) -> PcieLevel:
    """The PCIe level the fake reports for a pair whose ``topo -m`` cell is ``NV#``."""
    ga, gb = topo.gpu(a), topo.gpu(b)
    if ga.numa_node is not None and gb.numa_node is not None:
        return PcieLevel.NODE if ga.numa_node == gb.numa_node else PcieLevel.SYS
    if ga.cpus() and ga.cpus() == gb.cpus():
        return PcieLevel.NODE
    return PcieLevel.SYS


@dataclass(frozen=True)
class FakeHandle:
    """Stands in for pynvml's opaque ``c_nvmlDevice_t``."""

    index: int


class FakeNvml:
    """Answers pynvml calls from one topology. See the module docstring for the rules.

    Args:
        topo: the machine (GPU indices ``0..n-1``).
        model, memory_mib, driver_version, cuda_version: system facts reported.
        minors: ``/dev/nvidia<minor>`` per index (default: equal to the index).
        nvswitch: force (True/False) or auto-detect (None) the NVSwitch fabric.
        switch_count: number of NVSwitches in a fabric.
        p2p, p2p_write: P2P status per ordered pair for the read / write caps
            (write defaults to read); default derived from the links.
        fail: function name -> error class it raises (``nvmlInit`` included).
        missing: function names the binding lacks (``AttributeError``).
        report_remote_type: whether ``nvmlDeviceGetNvLinkRemoteDeviceType`` exists.
    """

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_AFFINITY_SCOPE_NODE = 0
    NVML_TOPOLOGY_INTERNAL = 0
    NVML_TOPOLOGY_SINGLE = 10
    NVML_TOPOLOGY_MULTIPLE = 20
    NVML_TOPOLOGY_HOSTBRIDGE = 30
    NVML_TOPOLOGY_NODE = 40
    NVML_TOPOLOGY_SYSTEM = 50
    NVML_P2P_CAPS_INDEX_READ = (0,)  # the real binding's trailing-comma quirk, on purpose
    NVML_P2P_CAPS_INDEX_WRITE = 1
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    def __init__(
        self,
        topo: Topology,
        *,
        model: str = "NVIDIA A100-SXM4-80GB",
        memory_mib: int = 81920,
        driver_version: str = "535.129.03",
        cuda_version: int = 12020,
        minors: Sequence[int] | None = None,
        nvswitch: bool | None = None,
        switch_count: int = 6,
        p2p: Mapping[tuple[int, int], P2PStatus] | None = None,
        p2p_write: Mapping[tuple[int, int], P2PStatus] | None = None,
        fail: Mapping[str, type[NVMLError]] | None = None,
        missing: Iterable[str] = (),
        report_remote_type: bool = True,
    ):
        if topo.gpu_indices != tuple(range(len(topo.gpus))):
            raise ValueError(f"FakeNvml needs GPUs 0..n-1, got {topo.gpu_indices}")
        self.topo = topo
        self.model, self.memory_mib = model, memory_mib
        self.driver_version, self.cuda_version = driver_version, cuda_version
        self.minors = list(minors) if minors is not None else list(range(len(topo.gpus)))
        self.fail = dict(fail or {})
        self.missing = set(missing)
        if not report_remote_type:
            self.missing.add("nvmlDeviceGetNvLinkRemoteDeviceType")
        self.p2p_read = dict(p2p or {})
        self.p2p_write = dict(p2p_write) if p2p_write is not None else self.p2p_read
        self.nvswitch = self._needs_switch() if nvswitch is None else nvswitch
        self.nvlinks = self._wire(switch_count)  # per GPU: [(remote bus id, remote type)]
        self.calls: Counter[str] = Counter()
        self.initialised = 0

    # --- binding surface -------------------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(f"fake pynvml has no attribute {name!r}")
        return object.__getattribute__(self, name)

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self._enter("nvmlInit", needs_init=False)
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._enter("nvmlShutdown")
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetCount")
        return len(self.topo.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:  # noqa: N802
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.topo.gpus):
            raise NVMLError_InvalidArgument()
        return FakeHandle(index)

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:  # noqa: N802
        self._enter("nvmlDeviceGetName", handle)
        return self.model

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:  # noqa: N802
        self._enter("nvmlDeviceGetUUID", handle)
        return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self.model}/{handle.index}')}"

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> SimpleNamespace:  # noqa: N802
        self._enter("nvmlDeviceGetPciInfo", handle)
        return _pci_info(fake_bus_id(handle.index))

    def nvmlDeviceGetMinorNumber(self, handle: FakeHandle) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetMinorNumber", handle)
        return self.minors[handle.index]

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle) -> SimpleNamespace:  # noqa: N802
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        total = self.memory_mib * 1024 * 1024
        return SimpleNamespace(total=total, free=total, used=0)

    def nvmlDeviceGetCpuAffinity(self, handle: FakeHandle, cpu_set_size: int) -> list[int]:  # noqa: N802
        self._enter("nvmlDeviceGetCpuAffinity", handle)
        cpus = self.topo.gpu(handle.index).cpus()
        if not cpus:
            raise NVMLError_NotSupported()
        return _bitmask(cpus, cpu_set_size)

    def nvmlDeviceGetMemoryAffinity(  # noqa: N802
        self, handle: FakeHandle, node_set_size: int, scope: int
    ) -> list[int]:
        self._enter("nvmlDeviceGetMemoryAffinity", handle)
        node = self.topo.gpu(handle.index).numa_node
        if node is None or scope != self.NVML_AFFINITY_SCOPE_NODE:
            raise NVMLError_NotSupported()
        return _bitmask({node}, node_set_size)

    def nvmlDeviceGetNumaNodeId(self, handle: FakeHandle) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetNumaNodeId", handle)
        node = self.topo.gpu(handle.index).gpu_numa_id
        if node is None:  # only Grace-coherent GPUs are NUMA nodes themselves
            raise NVMLError_NotSupported()
        return node

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: FakeHandle, h2: FakeHandle) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetTopologyCommonAncestor", h1, h2)
        if h1.index == h2.index:
            raise NVMLError_InvalidArgument()
        link = self.topo.link(h1.index, h2.index)
        level = link.pcie_level or hidden_level(self.topo, h1.index, h2.index)
        return _LEVEL_CODES[level]

    def nvmlDeviceGetP2PStatus(self, h1: FakeHandle, h2: FakeHandle, caps: int) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetP2PStatus", h1, h2)
        if not isinstance(caps, int) or caps not in (0, 1):
            raise NVMLError_InvalidArgument()  # ctypes would reject the 1-tuple, too
        table = self.p2p_read if caps == 0 else self.p2p_write
        key = (h1.index, h2.index)
        status = table.get(key, table.get(key[::-1]))
        return _P2P_CODES[status if status is not None else self._derived_p2p(*key)]

    def nvmlDeviceGetNvLinkState(self, handle: FakeHandle, link: int) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetNvLinkState", handle)
        self._nvlink(handle, link)
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: FakeHandle, link: int) -> SimpleNamespace:  # noqa: N802
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", handle)
        return _pci_info(self._nvlink(handle, link)[0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: FakeHandle, link: int) -> int:  # noqa: N802
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle)
        return self._nvlink(handle, link)[1]

    # --- internals ---------------------------------------------------------------

    def _enter(self, name: str, *handles: FakeHandle, needs_init: bool = True) -> None:
        self.calls[name] += 1
        if name in self.fail:
            raise self.fail[name]()
        if needs_init and self.initialised <= 0:
            raise NVMLError_Uninitialized()
        for handle in handles:
            if not isinstance(handle, FakeHandle) or handle.index >= len(self.topo.gpus):
                raise NVMLError_InvalidArgument()

    def _nvlink(self, handle: FakeHandle, link: int) -> tuple[str, int]:
        links = self.nvlinks[handle.index]
        if not links:
            raise NVMLError_NotSupported()  # what NVML says for a GPU without NVLink
        if not 0 <= link < len(links):
            raise NVMLError_InvalidArgument()
        return links[link]

    def _needs_switch(self) -> bool:
        per_gpu = Counter()
        for link in self.topo.links.values():
            per_gpu[link.a] += link.nvlinks
            per_gpu[link.b] += link.nvlinks
        return any(n > self.NVML_NVLINK_MAX_LINKS for n in per_gpu.values())

    def _wire(self, switch_count: int) -> list[list[tuple[str, int]]]:
        wiring: list[list[tuple[str, int]]] = []
        for gpu in self.topo.gpus:
            peers = [p for p in self.topo.gpu_indices if p != gpu.index]
            counts = {p: self.topo.link(gpu.index, p).nvlinks for p in peers}
            if self.nvswitch:
                total = max(counts.values(), default=0)
                switch = self.NVML_NVLINK_DEVICE_TYPE_SWITCH
                links = [(fake_switch_bus_id(k % switch_count), switch) for k in range(total)]
            else:
                gpu_type = self.NVML_NVLINK_DEVICE_TYPE_GPU
                links = [(fake_bus_id(p), gpu_type) for p in peers for _ in range(counts[p])]
            if len(links) > self.NVML_NVLINK_MAX_LINKS:
                raise ValueError(f"GPU{gpu.index} would need {len(links)} NVLinks")
            wiring.append(links)
        return wiring

    def _derived_p2p(self, a: int, b: int) -> P2PStatus:
        link = self.topo.link(*pair_key(a, b))
        if link.nvlinks:
            return P2PStatus.OK
        level = link.pcie_level or hidden_level(self.topo, a, b)
        return P2PStatus.OK if level <= PcieLevel.NODE else P2PStatus.CNS


def _pci_info(bus_id: str) -> SimpleNamespace:
    domain, bus, rest = bus_id.split(":")
    return SimpleNamespace(
        busId=bus_id, domain=int(domain, 16), bus=int(bus, 16), device=int(rest[:2], 16)
    )


def _bitmask(members: Iterable[int], words: int) -> list[int]:
    mask = [0] * words
    for m in members:
        if m // 64 < words:
            mask[m // 64] |= 1 << (m % 64)
    return mask
