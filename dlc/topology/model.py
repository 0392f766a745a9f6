"""The topology model: typed GPUs, NICs and the links between every GPU pair.

This is plain data. Parsers (``nvidia-smi topo -m``/``-p2p`` text, NVML) build a
:class:`Topology`; the tree, the report, the encoding and the allocator read it.
Nothing here imports networkx, pynvml or anything Mesos/Docker.

Vocabulary follows ``nvidia-smi topo -m``:

* PCIe level of a pair (closest first): ``PIX`` (one bridge), ``PXB`` (several
  bridges, no host bridge), ``PHB`` (through a host bridge), ``NODE`` (between host
  bridges of one NUMA node), ``SYS`` (across the SMP interconnect; ``SOC`` in old
  drivers).
* ``NV#``: the pair is joined by a bonded set of ``#`` NVLinks. ``topo -m`` then
  hides the PCIe level of that pair, so :attr:`PairLink.pcie_level` may be ``None``.
* P2P status from ``nvidia-smi topo -p2p`` (or NVML): ``OK`` or one of the reasons it
  is not supported.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

#: GPU vendors DLC knows; ``Gpu.vendor`` holds one of these (lower case)
NVIDIA = "nvidia"
AMD = "amd"
VENDORS = (NVIDIA, AMD)


class PcieLevel(enum.IntEnum):
    """PCIe common-ancestor level of a device pair, ordered closest first."""

    PIX = 1
    PXB = 2
    PHB = 3
    NODE = 4
    SYS = 5

    @classmethod
    def from_text(cls, text: str) -> PcieLevel:
        """Parse ``PIX``/``PXB``/``PHB``/``NODE``/``SYS`` or the old ``SOC``.

        Raises:
            KeyError: ``text`` is not a PCIe level.
        """
        text = text.strip().upper()
        if text == "SOC":  # pre-R418 drivers: "SMP link between CPU sockets"
            return cls.SYS
        return cls[text]


class P2PStatus(enum.StrEnum):
    """P2P status of an ordered GPU pair, as ``nvidia-smi topo -p2p`` prints it."""

    OK = "OK"  # peer-to-peer supported
    CNS = "CNS"  # chipset not supported
    GNS = "GNS"  # GPU not supported (GeForce cards on stock drivers)
    TNS = "TNS"  # topology not supported
    NS = "NS"  # not supported
    DR = "DR"  # disabled by regkey
    U = "U"  # unknown: not measured / not reported

    @property
    def supported(self) -> bool:
        """True only when P2P is known to work."""
        return self is P2PStatus.OK


@dataclass(frozen=True)
class Gpu:
    """One GPU of a machine.

    Only ``index`` is always known; the rest depends on the source (``topo -m``
    text carries affinities but no model; NVML carries everything). ``vendor``
    defaults to ``"nvidia"`` so documents and encodings written before vendors
    existed still read back as what they described.
    """

    index: int  #: nvidia-smi / NVML / amd-smi index (``GPU<index>``)
    model: str | None = None  #: e.g. ``"Tesla V100-SXM2-16GB"``
    uuid: str | None = None  #: ``GPU-xxxxxxxx-...``
    pci_bus_id: str | None = None  #: ``00000000:1A:00.0``
    minor: int | None = None  #: ``/dev/nvidia<minor>``; may differ from ``index``
    memory_mib: int | None = None  #: total framebuffer memory
    cpu_affinity: str | None = None  #: CPU list as printed, e.g. ``"0-11,24-35"``
    numa_node: int | None = None  #: NUMA affinity (first node when a list)
    gpu_numa_id: int | None = None  #: the GPU's own NUMA id (Grace-coherent systems)
    #: current MIG mode, ``"enabled"`` or ``"disabled"``; ``None`` where unknown or the GPU
    #: has no MIG (pre-Ampere). Live discovery only: the agent attribute does not carry it.
    mig_mode: str | None = None
    #: who made it: ``"nvidia"`` or ``"amd"`` (see :data:`VENDORS`)
    vendor: str = NVIDIA

    @property
    def name(self) -> str:
        """``GPU<index>``, the column/row name ``nvidia-smi`` uses."""
        return f"GPU{self.index}"

    def cpus(self) -> frozenset[int]:
        """The CPU affinity expanded to a set of CPU numbers (empty when unknown)."""
        return parse_cpu_list(self.cpu_affinity or "")


@dataclass(frozen=True)
class Nic:
    """A network interface shown in the topology (``mlx5_0``, ``NIC3`` ...)."""

    name: str  #: the device name (``mlx5_0``); the legend's name when ``NIC#`` was used
    alias: str | None = None  #: ``NIC#`` column name when the output used a ``NIC Legend``


@dataclass(frozen=True)
class PairLink:
    """How two GPUs (``a < b``) are connected.

    Attributes:
        a, b: GPU indices, ``a < b``.
        pcie_level: PCIe common-ancestor level; ``None`` when unknown (``topo -m``
            prints ``NV#`` instead of the level for NVLinked pairs).
        nvlinks: number of NVLinks joining the pair (0 for none). On NVSwitch
            systems this is the per-GPU link count through the switch. On AMD
            machines the same field counts the direct XGMI (Infinity Fabric) links:
            both are GPU-to-GPU fabrics the allocator must keep groups of whole.
        p2p: P2P status (the worse of both directions when they differ).
        measured_gbps: unidirectional P2P bandwidth measured by the probe,
            replacing the estimate when present.
    """

    a: int
    b: int
    pcie_level: PcieLevel | None = None
    nvlinks: int = 0
    p2p: P2PStatus = P2PStatus.U
    measured_gbps: float | None = None

    @property
    def p2p_capable(self) -> bool:
        """Whether the pair can really do peer-to-peer.

        NVLink always can. Over PCIe we trust an explicit ``topo -p2p`` / NVML
        status when there is one; GeForce cards report ``GNS`` on a close ``PHB``
        link, so a near level alone is not enough. With no status known, PCIe P2P
        is assumed only below the host bridge's peer (``PIX``/``PXB``/``PHB``), the
        levels at which CUDA enables it by default on server platforms.
        """
        if self.nvlinks > 0:
            return True
        if self.p2p is not P2PStatus.U:
            return self.p2p.supported
        return self.pcie_level is not None and self.pcie_level <= PcieLevel.PHB

    @property
    def label(self) -> str:
        """``NV#`` for NVLinked pairs, else the PCIe level name (``?`` if unknown)."""
        if self.nvlinks:
            return f"NV{self.nvlinks}"
        return self.pcie_level.name if self.pcie_level is not None else "?"


def pair_key(a: int, b: int) -> tuple[int, int]:
    """The canonical ``(low, high)`` key of an unordered GPU pair."""
    if a == b:
        raise ValueError(f"a GPU pair needs two different GPUs, got {a} twice")
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class Topology:
    """A machine's GPUs, NICs and pair links.

    Attributes:
        gpus: GPUs ordered by index.
        nics: NICs in output order.
        links: one :class:`PairLink` per unordered GPU pair, keyed ``(a, b)``, a < b.
        nic_levels: PCIe level between each NIC and each GPU, keyed
            ``(nic_name, gpu_index)``.
        driver_version: NVIDIA driver version when known (``"535.129.03"``).
        cuda_version: highest CUDA version the driver supports, when known.
        source: where the facts came from (``"topo-m"``, ``"nvml"``, ...).
        truncated: the input table was cut short (``--allow-truncated``): the machine
            has more GPUs or NICs than these. Not part of equality or the compact
            encoding, so complete topologies round-trip exactly as before.
    """

    gpus: tuple[Gpu, ...]
    links: dict[tuple[int, int], PairLink] = field(default_factory=dict)
    nics: tuple[Nic, ...] = ()
    nic_levels: dict[tuple[str, int], PcieLevel] = field(default_factory=dict)
    driver_version: str | None = None
    cuda_version: str | None = None
    source: str = "unknown"
    truncated: bool = field(default=False, compare=False)

    def __hash__(self) -> int:  # dict fields make the generated hash unusable
        return hash((self.gpus, tuple(sorted(self.links.items())), self.nics))

    @property
    def vendor(self) -> str:
        """The GPUs' vendor (``"nvidia"`` for an empty machine; mixed machines do not exist)."""
        return self.gpus[0].vendor if self.gpus else NVIDIA

    @property
    def fabric(self) -> str:
        """The GPU-to-GPU fabric's short name in reports: ``NV`` (NVLink) or ``XGMI``."""
        return "XGMI" if self.vendor == AMD else "NV"

    def link_label(self, link: PairLink) -> str:
        """``NV#``/``XGMI#`` for fabric-linked pairs, else the PCIe level (``?`` if unknown)."""
        if link.nvlinks:
            return f"{self.fabric}{link.nvlinks}"
        if self.vendor == AMD and link.pcie_level is None and link.p2p is P2PStatus.OK:
            return "XGMI*"  # routed over other GPUs' XGMI links: peer access, no direct link
        return link.label

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """All GPU indices, ascending."""
        return tuple(g.index for g in self.gpus)

    def gpu(self, index: int) -> Gpu:
        """The GPU with ``index``.

        Raises:
            KeyError: no such GPU.
        """
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(f"no GPU{index} in this topology")

    def link(self, a: int, b: int) -> PairLink:
        """The link between GPUs ``a`` and ``b`` (in either order)."""
        key = pair_key(a, b)
        try:
            return self.links[key]
        except KeyError:
            raise KeyError(f"no link between GPU{key[0]} and GPU{key[1]}") from None

    def pairs(self, subset: frozenset[int] | set[int] | None = None) -> Iterator[PairLink]:
        """Links between all pairs of ``subset`` (default: all GPUs), ``(a, b)`` ascending."""
        indices = sorted(subset) if subset is not None else list(self.gpu_indices)
        for i, a in enumerate(indices):
            for b in indices[i + 1 :]:
                yield self.link(a, b)

    def replace_links(self, updates: dict[tuple[int, int], PairLink]) -> Topology:
        """A copy with some links replaced (keys must already exist)."""
        unknown = set(updates) - set(self.links)
        if unknown:
            raise KeyError(f"unknown GPU pairs {sorted(unknown)}")
        return replace(self, links={**self.links, **updates})

    def with_p2p(self, status: dict[tuple[int, int], P2PStatus]) -> Topology:
        """A copy with P2P status from ``topo -p2p`` or NVML merged in.

        ``status`` is keyed by ordered or unordered pairs; when both directions are
        given the worse one wins (a pair is P2P-capable only if both ways are).
        """
        merged: dict[tuple[int, int], P2PStatus] = {}
        for (a, b), st in status.items():
            key = pair_key(a, b)
            prev = merged.get(key)
            merged[key] = st if prev is None or prev is P2PStatus.OK else prev
        return self.replace_links(
            {k: replace(self.links[k], p2p=st) for k, st in merged.items() if k in self.links}
        )

    def with_measured(self, gbps: dict[tuple[int, int], float]) -> Topology:
        """A copy with probe-measured unidirectional bandwidth (GB/s) per pair."""
        merged: dict[tuple[int, int], float] = {}
        for (a, b), value in gbps.items():
            key = pair_key(a, b)
            # Two directions measured: the slower one bounds a collective.
            merged[key] = min(value, merged.get(key, value))
        return self.replace_links(
            {k: replace(self.links[k], measured_gbps=v) for k, v in merged.items()}
        )


def parse_cpu_list(text: str) -> frozenset[int]:
    """Expand a Linux CPU list such as ``"0-11,24-35"`` to a set of CPU numbers.

    Blank text, ``N/A`` and malformed parts give an empty set: affinity is a
    tie-breaker, never a reason to reject a machine.
    """
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part or part.upper() == "N/A":
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return frozenset()
        start, end = int(lo), int(hi or lo)
        if end < start:
            start, end = end, start
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: frozenset[int] | set[int] | str) -> str:
    """A CPU list as a person reads it: ``0-11,24-35``; ``0,8,16,...`` with a stride when long.

    ``nvidia-smi`` on POWER prints every CPU as its own range (``0-0,8-8,16-16,...``);
    those become ``0,8,16``, and five or more equally spaced CPUs become ``0,8,16,...,152``.
    Text that is not a CPU list comes back as it was.
    """
    numbers = sorted(parse_cpu_list(cpus) if isinstance(cpus, str) else cpus)
    if not numbers:
        return cpus if isinstance(cpus, str) else ""
    runs: list[list[int]] = []
    for cpu in numbers:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    singles = [r[0] for r in runs]
    strides = {b - a for a, b in zip(singles, singles[1:], strict=False)}
    if len(runs) >= 5 and all(len(r) == 1 for r in runs) and len(strides) == 1:
        return f"{singles[0]},{singles[1]},{singles[2]},...,{singles[-1]}"
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
