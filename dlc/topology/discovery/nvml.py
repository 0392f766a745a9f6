"""Live GPU discovery through NVML.

:func:`topology_from_nvml` reads a machine's GPUs and the links between every pair
from NVML and returns the same :class:`~dlc.topology.model.Topology` the
``nvidia-smi topo -m`` parser builds, so everything downstream works on either.

The NVML binding is passed in (dependency injection): production code hands over
the ``pynvml`` module (package ``nvidia-ml-py``), tests a fake with the same
functions. Nothing here imports ``pynvml``; :mod:`dlc.topology.discovery.discover` does that
lazily, so this module imports on machines without it.

Facts a driver or binding may lack (NUMA ids, NVLink, P2P status) degrade to
``None``/unknown; only ``nvmlInit``, the device count and the device handles are
required, and their failure is a one-line :class:`~dlc.errors.DiscoveryError`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from itertools import combinations
from typing import Any

from dlc.errors import DiscoveryError
from dlc.topology.model import Gpu, P2PStatus, PairLink, PcieLevel, Topology

# nvmlGpuTopologyLevel_t. INTERNAL (two GPUs on one board, e.g. K80) sits behind
# the board's own PCIe switch, which `topo -m` prints as PIX.
_LEVELS: dict[int, PcieLevel] = {
    0: PcieLevel.PIX,  # NVML_TOPOLOGY_INTERNAL
    10: PcieLevel.PIX,  # NVML_TOPOLOGY_SINGLE
    20: PcieLevel.PXB,  # NVML_TOPOLOGY_MULTIPLE
    30: PcieLevel.PHB,  # NVML_TOPOLOGY_HOSTBRIDGE
    40: PcieLevel.NODE,  # NVML_TOPOLOGY_NODE (alias NVML_TOPOLOGY_CPU)
    50: PcieLevel.SYS,  # NVML_TOPOLOGY_SYSTEM
}

# nvmlGpuP2PStatus_t -> the abbreviations `nvidia-smi topo -p2p` prints.
_P2P: dict[int, P2PStatus] = {
    0: P2PStatus.OK,
    1: P2PStatus.CNS,  # NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED (sic)
    2: P2PStatus.GNS,
    3: P2PStatus.TNS,  # NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED
    4: P2PStatus.DR,
    5: P2PStatus.NS,
    6: P2PStatus.U,
}

_MIB = 1024 * 1024
_CPU_SET_WORDS = 64  # 64-bit words: room for 4096 CPUs, more than any host has
_NODE_SET_WORDS = 16  # room for 1024 NUMA nodes
_NVLINK_TYPE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
_NVLINK_TYPE_GPU = 0  # NVML_NVLINK_DEVICE_TYPE_GPU
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def topology_from_nvml(nvml: Any) -> Topology:
    """Discover this host's GPUs and their pair links through NVML.

    Args:
        nvml: the ``pynvml`` module, or any object with the same functions,
            constants and ``NVMLError`` class (tests pass a fake).

    Returns:
        A topology with ``source="nvml"``: every GPU with model, UUID, PCI bus id,
        minor number, memory, CPU/NUMA affinity; every pair with its PCIe level,
        NVLink count and P2P status; driver and CUDA driver versions.

    Raises:
        DiscoveryError: NVML cannot be initialised (no driver/library), reports no
            GPU, or fails to enumerate the devices.
    """
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise DiscoveryError(f"NVML unavailable: nvmlInit failed: {_error_text(exc)}") from exc
    try:
        return _collect(nvml)
    finally:
        call_optional(nvml, "nvmlShutdown")


def normalize_bus_id(text: str | bytes | None) -> str | None:
    """Canonical PCI bus id ``DDDDDDDD:BB:DD.F`` (upper-case hex), as NVML prints it.

    NVML, ``nvidia-smi --query-gpu=pci.bus_id``, ``/proc`` and ``lspci`` spell the
    same device differently (4- or 8-digit domain, case); comparing canonical
    forms is what lets an NVLink's remote end be matched to a GPU.

    Returns:
        The canonical id, or ``None`` for empty or unparsable text.
    """
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    match = _BUS_ID.match((text or "").strip().rstrip("\x00"))
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function}"


def cpu_list_text(words: Iterable[int], word_bits: int = 64) -> str:
    """Render an NVML CPU bitmask (array of ``word_bits``-bit words) as a CPU list.

    Example: words ``[0x0000_0FFF_0000_0FFF]`` give ``"0-11,32-43"``.
    """
    cpus = [
        w * word_bits + bit
        for w, word in enumerate(words)
        for bit in range(word_bits)
        if int(word) >> bit & 1
    ]
    ranges: list[str] = []
    start: int | None = None
    prev: int | None = None
    for cpu in [*cpus, None]:
        if start is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(ranges)


def cuda_version_text(version: int) -> str:
    """``nvmlSystemGetCudaDriverVersion``'s integer (``12040``) as ``"12.4"``."""
    return f"{version // 1000}.{version % 1000 // 10}"


def _collect(nvml: Any) -> Topology:
    count = _call_required(nvml, "nvmlDeviceGetCount")
    if count < 1:
        raise DiscoveryError(
            "NVML reports no GPU on this host; use --from-file FILE to describe a machine"
        )
    handles = [_call_required(nvml, "nvmlDeviceGetHandleByIndex", i) for i in range(count)]
    gpus = tuple(_gpu(nvml, i, h) for i, h in enumerate(handles))
    nvlinks = _nvlink_counts(nvml, handles, [g.pci_bus_id for g in gpus])
    links = {
        (a, b): PairLink(
            a=a,
            b=b,
            pcie_level=_pcie_level(nvml, handles[a], handles[b]),
            nvlinks=nvlinks.get((a, b), 0),
            p2p=_p2p_status(nvml, handles[a], handles[b]),
        )
        for a, b in combinations(range(count), 2)
    }
    driver = call_optional(nvml, "nvmlSystemGetDriverVersion")
    cuda = call_optional(nvml, "nvmlSystemGetCudaDriverVersion")
    return Topology(
        gpus=gpus,
        links=links,
        driver_version=_text(driver),
        cuda_version=cuda_version_text(cuda) if isinstance(cuda, int) and cuda > 0 else None,
        source="nvml",
    )


def _gpu(nvml: Any, index: int, handle: Any) -> Gpu:
    pci = call_optional(nvml, "nvmlDeviceGetPciInfo", handle)
    memory = call_optional(nvml, "nvmlDeviceGetMemoryInfo", handle)
    cpu_words = call_optional(nvml, "nvmlDeviceGetCpuAffinity", handle, _CPU_SET_WORDS)
    return Gpu(
        index=index,
        model=_text(call_optional(nvml, "nvmlDeviceGetName", handle)),
        uuid=_text(call_optional(nvml, "nvmlDeviceGetUUID", handle)),
        pci_bus_id=normalize_bus_id(getattr(pci, "busId", None)),
        minor=call_optional(nvml, "nvmlDeviceGetMinorNumber", handle),
        memory_mib=int(memory.total) // _MIB if memory is not None else None,
        cpu_affinity=(cpu_list_text(cpu_words) or None) if cpu_words is not None else None,
        numa_node=_numa_affinity(nvml, handle),
        # nvmlDeviceGetNumaNodeId is the GPU's *own* NUMA node, which exists only
        # where GPU memory is a NUMA node (Grace-coherent systems): `GPU NUMA ID`.
        gpu_numa_id=call_optional(nvml, "nvmlDeviceGetNumaNodeId", handle),
        mig_mode=mig_mode_text(call_optional(nvml, "nvmlDeviceGetMigMode", handle)),
    )


def mig_mode_text(modes: Any) -> str | None:
    """``"enabled"``/``"disabled"`` from ``nvmlDeviceGetMigMode``'s ``(current, pending)``.

    ``None`` when NVML has no answer (pre-Ampere GPUs raise NotSupported).
    """
    if not modes:
        return None
    current = modes[0] if isinstance(modes, (list, tuple)) else modes
    return "enabled" if int(current) == 1 else "disabled"


def _numa_affinity(nvml: Any, handle: Any) -> int | None:
    """The first NUMA node of the GPU's memory affinity (``topo -m``'s NUMA Affinity)."""
    scope = getattr(nvml, "NVML_AFFINITY_SCOPE_NODE", 0)
    words = call_optional(nvml, "nvmlDeviceGetMemoryAffinity", handle, _NODE_SET_WORDS, scope)
    if words is None:
        return None
    for w, word in enumerate(words):
        word = int(word)
        if word:
            return w * 64 + (word & -word).bit_length() - 1
    return None


def _pcie_level(nvml: Any, h1: Any, h2: Any) -> PcieLevel | None:
    level = call_optional(nvml, "nvmlDeviceGetTopologyCommonAncestor", h1, h2)
    return _LEVELS.get(level) if level is not None else None


def _p2p_status(nvml: Any, h1: Any, h2: Any) -> P2PStatus:
    """Worst P2P status over read/write in both directions (``U`` when unknown)."""
    statuses = []
    for name, default in (("NVML_P2P_CAPS_INDEX_READ", 0), ("NVML_P2P_CAPS_INDEX_WRITE", 1)):
        caps = _constant(nvml, name, default)
        for src, dst in ((h1, h2), (h2, h1)):
            code = call_optional(nvml, "nvmlDeviceGetP2PStatus", src, dst, caps)
            statuses.append(_P2P.get(code, P2PStatus.U) if code is not None else P2PStatus.U)
    not_ok = [s for s in statuses if s is not P2PStatus.OK]
    if not not_ok:
        return P2PStatus.OK
    # A definite refusal says more than "unknown"; report it when there is one.
    definite = [s for s in not_ok if s is not P2PStatus.U]
    return definite[0] if definite else P2PStatus.U


def _nvlink_counts(
    nvml: Any, handles: list[Any], bus_ids: list[str | None]
) -> dict[tuple[int, int], int]:
    """NVLinks per GPU pair: direct links, plus the switch fabric where there is one.

    On NVSwitch systems (DGX-2, HGX A100/H100) every link ends at a switch, not a
    GPU. Any two switch-attached GPUs then talk over ``min(links_a, links_b)``
    links, which is the ``NV12``/``NV18`` ``topo -m`` prints for them.
    """
    gpu_by_bus = {bus: i for i, bus in enumerate(bus_ids) if bus is not None}
    direct: Counter[tuple[int, int]] = Counter()
    to_switch: Counter[int] = Counter()
    max_links = _constant(nvml, "NVML_NVLINK_MAX_LINKS", 18)
    enabled = _constant(nvml, "NVML_FEATURE_ENABLED", 1)
    for i, handle in enumerate(handles):
        for link in range(max_links):
            if call_optional(nvml, "nvmlDeviceGetNvLinkState", handle, link) != enabled:
                continue
            remote = call_optional(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            remote_bus = normalize_bus_id(getattr(remote, "busId", None))
            if remote_bus is None:
                continue  # the far end is unknown: count nothing rather than guess
            peer = gpu_by_bus.get(remote_bus)
            if peer is not None and peer != i:
                direct[(i, peer)] += 1
            elif peer is None and _remote_is_switch(nvml, handle, link):
                to_switch[i] += 1
    counts: dict[tuple[int, int], int] = {}
    for a, b in combinations(range(len(handles)), 2):
        # Count from both ends: one side's query may have failed.
        n = max(direct[(a, b)], direct[(b, a)])
        if to_switch[a] and to_switch[b]:
            n += min(to_switch[a], to_switch[b])
        if n:
            counts[(a, b)] = n
    return counts


def _remote_is_switch(nvml: Any, handle: Any, link: int) -> bool:
    """Whether an NVLink whose far end is not one of our GPUs ends at an NVSwitch.

    Bindings/drivers without ``nvmlDeviceGetNvLinkRemoteDeviceType`` get the
    benefit of the doubt: a non-GPU NVLink peer on x86 is a switch. An IBM NPU
    (POWER CPU) or a GPU we cannot see is not.
    """
    kind = call_optional(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
    if kind is None:
        return True
    return kind == _constant(nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", _NVLINK_TYPE_SWITCH)


def _constant(nvml: Any, name: str, default: int) -> int:
    value = getattr(nvml, name, default)
    # nvidia-ml-py defines NVML_P2P_CAPS_INDEX_READ as ``0,`` (a 1-tuple), which
    # ctypes cannot pass; unwrap it.
    if isinstance(value, tuple):
        value = value[0] if value else default
    return int(value)


def _call_required(nvml: Any, name: str, *args: Any) -> Any:
    try:
        return getattr(nvml, name)(*args)
    except AttributeError as exc:
        raise DiscoveryError(f"NVML binding has no {name}; upgrade nvidia-ml-py") from exc
    except nvml.NVMLError as exc:
        shown = ", ".join(repr(a) for a in args if isinstance(a, int))
        raise DiscoveryError(f"NVML {name}({shown}) failed: {_error_text(exc)}") from exc


def call_optional(nvml: Any, name: str, *args: Any) -> Any:
    """Call an NVML function for an optional fact: ``None`` if absent or failing."""
    function = getattr(nvml, name, None)
    if function is None:
        return None
    try:
        return function(*args)
    except nvml.NVMLError:
        return None


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library
        text = ""
    return text or type(exc).__name__


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return str(value).strip() or None
