"""``mesos-agent`` flags for a GPU host, and reading them back from an offer.

Pure functions on a :class:`~dlc.topology.model.Topology`; the ``dlc node-config``
command prints what :func:`node_config` returns.

Resources (see ``../shared/DESIGN.md``): ``gpus:N`` keeps Mesos's own GPU filtering
and ``gpu_ids:{0,1,...}`` is the SET of GPU indices DLC's allocator picks from,
optionally preceded by the host's ``cpus`` and ``mem``. When every GPU's memory is known,
``gpu_mem`` and ``gpu_core`` follow: one RANGES block per GPU at a fixed stride
(:mod:`dlc.topology.gpu_shares`), which the master splits between GPU shares.

Attributes: ``dlc_topo`` carries the whole topology (:mod:`dlc.topology.encoding`);
``gpu_model``, ``gpu_mem_mib``, ``nvidia_driver`` and ``cuda`` are there for people
and simple constraints; ``dlc_sharing`` names how the node enforces shares (``mps``,
``watchdog``, ``mig`` or ``none``). Mesos makes numeric-looking attribute values SCALAR and only
allows ``[a-zA-Z0-9_/.-]`` in text, so DLC writes every one of these four values as
``v`` + the value with each other character replaced by ``_`` (``gpu_mem_mib:v16384``,
``nvidia_driver:v535.129.03``, ``gpu_model:vTesla_V100-SXM2-16GB``). Reading strips
exactly that ``v``; a bare number (an attribute set by hand) is accepted too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from dlc.errors import DlcError, NodeConfigError, TopologyEncodingError
from dlc.topology.encoding import decode_topology, encode_topology
from dlc.topology.gpu_shares import (
    ATTR_SHARING,
    GPU_CORE,
    GPU_MEM,
    SharingMode,
    core_ranges,
    default_sharing,
    mem_ranges,
    parse_sharing,
    ranges_text,
)
from dlc.topology.model import AMD, NVIDIA, VENDORS, Topology

ATTR_TOPOLOGY = "dlc_topo"
ATTR_MODEL = "gpu_model"
ATTR_MEMORY = "gpu_mem_mib"
ATTR_DRIVER = "nvidia_driver"
ATTR_CUDA = "cuda"
#: the GPUs' vendor; absent on NVIDIA agents (and on agents configured before vendors)
ATTR_VENDOR = "gpu_vendor"
#: ROCm release of an AMD agent's driver (its ``nvidia_driver`` counterpart)
ATTR_ROCM = "rocm"
#: prefix of every DLC attribute value that is not the topology encoding
VALUE_PREFIX = "v"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_/.-]")


@dataclass(frozen=True)
class AgentConfig:
    """What ``mesos-agent`` needs to advertise a GPU host to DLC.

    Attributes:
        resources: the ``--resources`` value, e.g. ``gpus:2;gpu_ids:{0,1}``.
        attributes: attribute name -> value, in flag order.
    """

    resources: str
    attributes: dict[str, str]

    @property
    def attributes_text(self) -> str:
        """The ``--attributes`` value: ``name:value`` pairs joined by ``;``."""
        return ";".join(f"{k}:{v}" for k, v in self.attributes.items())

    def flags(self) -> list[str]:
        """``--resources=...`` (when there is anything to declare) and ``--attributes=...``."""
        flags = [f"--resources={self.resources}"] if self.resources else []
        return flags + [f"--attributes={self.attributes_text}"]

    def env(self) -> dict[str, str]:
        """The same as ``MESOS_RESOURCES`` / ``MESOS_ATTRIBUTES`` environment variables."""
        env = {"MESOS_RESOURCES": self.resources} if self.resources else {}
        return env | {"MESOS_ATTRIBUTES": self.attributes_text}


@dataclass(frozen=True)
class AgentGpuInfo:
    """The GPU facts an agent advertises, read back from its attributes."""

    topology: Topology | None
    gpu_model: str | None
    gpu_mem_mib: int | None
    driver_version: str | None
    cuda_version: str | None
    sharing: SharingMode | None = None
    gpu_vendor: str = NVIDIA
    rocm_version: str | None = None


def attribute_value(text: str) -> str:
    """``text`` as a DLC attribute value: ``v`` + text with unsafe characters as ``_``."""
    return VALUE_PREFIX + _UNSAFE.sub("_", text)


def _read_value(name: str, value: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-zA-Z0-9_/.-]+", value):
        raise TopologyEncodingError(
            f"attribute {name}={value!r}: expected 'v' + [a-zA-Z0-9_/.-] (e.g. v535.129.03)"
        )
    if value.startswith(VALUE_PREFIX):
        return value[len(VALUE_PREFIX) :]
    if re.fullmatch(r"[0-9][0-9.]*", value):
        return value  # a hand-written numeric attribute, which Mesos made SCALAR
    raise TopologyEncodingError(f"attribute {name}={value!r}: expected it to start with 'v'")


def _fixed(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return ""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def agent_resources(
    topo: Topology,
    cpus: float | None = None,
    mem_mib: int | None = None,
    gpu_mem_mib: int | None = None,
) -> str:
    """The ``--resources`` value: ``[cpus:C;][mem:M;]gpus:N;gpu_ids:{i,...}[;gpu_mem;gpu_core]``.

    Args:
        topo: the machine.
        cpus, mem_mib: the host's CPUs and memory to declare, if any.
        gpu_mem_mib: memory of each GPU where ``topo`` does not know it (``--gpu-mem``, for
            a saved ``topo -m``). Without a memory for every GPU the ranges are left out.

    Raises:
        NodeConfigError: ``cpus``, ``mem_mib`` or ``gpu_mem_mib`` is not a positive number.
    """
    parts = []
    if cpus is not None:
        # Mesos keeps three decimals of a scalar; never print an exponent.
        text = "" if isinstance(cpus, bool) or not isinstance(cpus, int | float) else _fixed(cpus)
        if not text or not float(text) > 0:
            raise NodeConfigError("cpus", f"{cpus!r} is not a positive number; pass e.g. --cpus 8")
        parts.append(f"cpus:{text}")
    if mem_mib is not None:
        if isinstance(mem_mib, bool) or not isinstance(mem_mib, int) or mem_mib <= 0:
            raise NodeConfigError(
                "mem", f"{mem_mib!r} is not a positive whole number of MiB; pass e.g. --mem 65536"
            )
        parts.append(f"mem:{mem_mib}")
    if topo.gpus:
        ids = ",".join(str(i) for i in sorted(topo.gpu_indices))
        parts += [f"gpus:{len(topo.gpus)}", f"gpu_ids:{{{ids}}}"]
        memories = gpu_memories(topo, gpu_mem_mib)
        # No share ranges on AMD: nothing on ROCm enforces a share (docs/sharing.md), so an
        # AMD agent offers whole GPUs only and no share can ever be placed there.
        if memories and topo.vendor != AMD:
            parts.append(f"{GPU_MEM}:{ranges_text(mem_ranges(memories))}")
            parts.append(f"{GPU_CORE}:{ranges_text(core_ranges(memories))}")
    return ";".join(parts)


def gpu_memories(topo: Topology, default_mib: int | None = None) -> dict[int, int] | None:
    """GPU index -> memory in MiB (``default_mib`` where unknown); ``None`` if any is unknown.

    Raises:
        NodeConfigError: ``default_mib`` is not a positive whole number below 2**20.
    """
    if default_mib is not None and (
        isinstance(default_mib, bool)
        or not isinstance(default_mib, int)
        or not 0 < default_mib < (1 << 20)
    ):
        raise NodeConfigError(
            "gpu-mem", f"{default_mib!r} is not a GPU memory in MiB; pass e.g. --gpu-mem 16384"
        )
    memories = {g.index: g.memory_mib or default_mib for g in topo.gpus}
    return None if None in memories.values() else memories  # type: ignore[return-value]


def agent_attributes(topo: Topology, sharing: SharingMode | str | None = None) -> dict[str, str]:
    """The agent attributes for ``topo`` (the facts it does not know are left out).

    ``sharing`` (default: :func:`~dlc.topology.gpu_shares.default_sharing` of the models)
    becomes ``dlc_sharing`` on a machine with GPUs.

    Raises:
        FieldError: ``sharing`` is not a mode.
    """
    # A saved file's name is the operator's business, not the cluster's: "file" only.
    source = "file" if topo.source.startswith("file:") else topo.source
    attrs = {ATTR_TOPOLOGY: encode_topology(replace(topo, source=source))}
    models = list(dict.fromkeys(g.model for g in topo.gpus if g.model))
    if models:
        # Mixed machines list each model once, in GPU order; dlc_topo has them per GPU.
        attrs[ATTR_MODEL] = attribute_value("/".join(models))
    memories = [g.memory_mib for g in topo.gpus if g.memory_mib is not None]
    if memories and len(memories) == len(topo.gpus):
        attrs[ATTR_MEMORY] = attribute_value(str(min(memories)))  # what every GPU offers
    if topo.gpus and topo.vendor != NVIDIA:
        attrs[ATTR_VENDOR] = attribute_value(topo.vendor)
    if topo.driver_version:
        name = ATTR_ROCM if topo.vendor == AMD else ATTR_DRIVER
        attrs[name] = attribute_value(topo.driver_version)
    if topo.cuda_version:
        attrs[ATTR_CUDA] = attribute_value(topo.cuda_version)
    if topo.gpus and topo.vendor == AMD:
        if sharing is not None:
            raise NodeConfigError(
                "sharing", "AMD GPUs offer no enforced shares; leave --sharing out on AMD hosts"
            )
    elif topo.gpus:
        mode = default_sharing(g.model for g in topo.gpus) if sharing is None else sharing
        attrs[ATTR_SHARING] = parse_sharing(mode).value
    return attrs


def node_config(
    topo: Topology,
    cpus: float | None = None,
    mem_mib: int | None = None,
    sharing: SharingMode | str | None = None,
    gpu_mem_mib: int | None = None,
) -> AgentConfig:
    """Resources and attributes for the agent of the machine ``topo`` describes."""
    return AgentConfig(
        agent_resources(topo, cpus, mem_mib, gpu_mem_mib), agent_attributes(topo, sharing)
    )


def parse_agent_attributes(attributes: Mapping[str, str]) -> AgentGpuInfo:
    """Read DLC's GPU attributes from an agent's attributes (name -> text value).

    Raises:
        TopologyEncodingError: a DLC attribute is present but malformed.
    """
    memory = attributes.get(ATTR_MEMORY)
    mem_mib = None
    if memory is not None:
        text = _read_value(ATTR_MEMORY, memory)
        if not re.fullmatch(r"[0-9]{1,12}(\.0*)?", text):
            raise TopologyEncodingError(f"attribute {ATTR_MEMORY}={memory!r}: expected v<MiB>")
        mem_mib = int(text.split(".")[0])
    optional = {
        name: _read_value(name, attributes[name]) if name in attributes else None
        for name in (ATTR_MODEL, ATTR_DRIVER, ATTR_CUDA, ATTR_VENDOR, ATTR_ROCM)
    }
    vendor = (optional[ATTR_VENDOR] or NVIDIA).lower()
    if vendor not in VENDORS:
        raise TopologyEncodingError(
            f"attribute {ATTR_VENDOR}={attributes[ATTR_VENDOR]!r}: expected one of "
            + ", ".join(f"v{v}" for v in VENDORS)
        )
    sharing = attributes.get(ATTR_SHARING)
    if sharing is not None:
        try:
            sharing = parse_sharing(sharing)
        except DlcError as exc:
            raise TopologyEncodingError(f"attribute {ATTR_SHARING}: {exc}") from None
    return AgentGpuInfo(
        topology=topology_from_attributes(attributes),
        gpu_model=optional[ATTR_MODEL],
        gpu_mem_mib=mem_mib,
        driver_version=optional[ATTR_DRIVER],
        cuda_version=optional[ATTR_CUDA],
        sharing=sharing,
        gpu_vendor=vendor,
        rocm_version=optional[ATTR_ROCM],
    )


def topology_from_attributes(attributes: Mapping[str, str]) -> Topology | None:
    """The topology an agent advertises in ``dlc_topo``, or ``None`` without one.

    Raises:
        TopologyEncodingError: the ``dlc_topo`` value is malformed.
    """
    value = attributes.get(ATTR_TOPOLOGY)
    return None if value is None else decode_topology(value)
