"""Merge probe measurements into a :class:`~dlc.topology.model.Topology` (pure).

The probe numbers GPUs by CUDA ordinal in PCI bus order, which is the order
``nvidia-smi`` and NVML use too. When both sides know the PCI bus ids the GPUs
are matched by bus id (robust against ``CUDA_VISIBLE_DEVICES`` renumbering),
otherwise by index.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dlc.errors import ProbeError
from dlc.probe.result import ProbeResult, parse_probe_json
from dlc.topology.bandwidth import estimate_gbps
from dlc.topology.discovery.nvml import normalize_bus_id
from dlc.topology.model import P2PStatus, Topology, pair_key


@dataclass(frozen=True)
class Comparison:
    """Measured against nominal bandwidth for one unordered GPU pair ``a < b``.

    Attributes:
        a, b: topology GPU indices.
        label: the link as ``nvidia-smi topo -m`` names it (``NV2``, ``PIX``, ``SYS``).
        p2p: whether peer access was enabled for the pair (both directions measured).
        nominal_gbps: :func:`~dlc.topology.bandwidth.estimate_gbps` of the unmeasured link.
        measured_gbps: one-way bandwidth the pair gets (slower direction).
        ratio: ``measured_gbps / nominal_gbps``.
        bidi_gbps: two-way bandwidth (slower of the two orders measured), if measured.
        latency_us: small-copy latency (slower direction), if measured.
    """

    a: int
    b: int
    label: str
    p2p: bool
    nominal_gbps: float
    measured_gbps: float
    ratio: float
    bidi_gbps: float | None = None
    latency_us: float | None = None

    @property
    def pair(self) -> str:
        """``GPU<a>-GPU<b>``."""
        return f"GPU{self.a}-GPU{self.b}"


def gpu_mapping(topology: Topology, result: ProbeResult) -> dict[int, int]:
    """Probe device index -> topology GPU index.

    Raises:
        ProbeError: a measured GPU is not in the topology (wrong machine or file).
    """
    by_bus = {
        normalize_bus_id(g.pci_bus_id): g.index for g in topology.gpus if g.pci_bus_id is not None
    }
    indices = set(topology.gpu_indices)
    mapping: dict[int, int] = {}
    for dev in result.devices:
        bus = normalize_bus_id(dev.pci_bus_id)
        if bus is not None and by_bus:
            if bus not in by_bus:
                raise ProbeError(
                    f"probe GPU {dev.index} ({dev.pci_bus_id}) is not in the topology "
                    f"({topology.source}): was the probe run on another machine?"
                )
            mapping[dev.index] = by_bus[bus]
        elif dev.index in indices:
            mapping[dev.index] = dev.index
        else:
            raise ProbeError(
                f"probe GPU {dev.index} is not in the topology ({topology.source}, GPUs "
                f"{list(topology.gpu_indices)}): was the probe run on another machine?"
            )
    return mapping


def merge_measurements(topology: Topology, result: ProbeResult) -> Topology:
    """A copy of ``topology`` carrying the probe's figures.

    Each pair's measured bandwidth is the probe's one-way figure with P2P when peer
    access was enabled, else the staged (no-P2P) figure; of the two directions the
    slower wins (:meth:`Topology.with_measured`). Pairs whose P2P status is unknown
    (``U``) take it from ``cudaDeviceCanAccessPeer``: ``OK`` or ``NS``.

    Raises:
        ProbeError: the probe measured a GPU the topology does not have.
    """
    mapping = gpu_mapping(topology, result)
    gbps: dict[tuple[int, int], float] = {}
    status: dict[tuple[int, int], P2PStatus] = {}
    for pair in result.pairs:
        a, b = mapping[pair.src], mapping[pair.dst]
        value = pair.uni_gbps
        if value is not None:
            gbps[(a, b)] = value
        key = pair_key(a, b)
        if topology.links[key].p2p is P2PStatus.U:
            status[(a, b)] = P2PStatus.OK if pair.can_access_peer else P2PStatus.NS
    merged = topology.with_p2p(status) if status else topology
    return merged.with_measured(gbps) if gbps else merged


def compare_with_nominal(topology: Topology, result: ProbeResult) -> list[Comparison]:
    """Rows of measured vs nominal bandwidth, one per measured unordered pair.

    The nominal figure is the estimate for the link with the probe's P2P verdict
    applied but without the measurement, so a PCIe pair on which CUDA refuses P2P is
    compared with the staged estimate, not with a P2P rate it can never reach.
    """
    merged = merge_measurements(topology, result)
    mapping = gpu_mapping(topology, result)
    bidi: dict[tuple[int, int], list[float]] = {}
    latency: dict[tuple[int, int], list[float]] = {}
    p2p: dict[tuple[int, int], bool] = {}
    for pair in result.pairs:
        key = pair_key(mapping[pair.src], mapping[pair.dst])
        if pair.bidi_gbps is not None:
            bidi.setdefault(key, []).append(pair.bidi_gbps)
        if pair.latency_us is not None:
            latency.setdefault(key, []).append(pair.latency_us)
        p2p[key] = p2p.get(key, True) and pair.p2p_enabled
    rows = []
    for key in sorted(p2p):
        link = merged.links[key]
        if link.measured_gbps is None:
            continue
        model = merged.gpu(key[0]).model or _probe_model(result, mapping, key[0])
        nominal = estimate_gbps(replace(link, measured_gbps=None), model)
        rows.append(
            Comparison(
                a=key[0],
                b=key[1],
                label=link.label,
                p2p=p2p[key],
                nominal_gbps=nominal,
                measured_gbps=link.measured_gbps,
                ratio=link.measured_gbps / nominal,
                bidi_gbps=min(bidi[key]) if key in bidi else None,
                latency_us=max(latency[key]) if key in latency else None,
            )
        )
    return rows


def measured_topology(topology: Topology, probe_json_path: str | Path | None = None) -> Topology:
    """``topology`` with probe figures merged in: for ``dlc node-config --probe``.

    Args:
        topology: the discovered topology of this host.
        probe_json_path: a saved probe run to read; ``None`` builds (if needed) and
            runs the probe on this host.

    Raises:
        ProbeError: the probe cannot be built or run, its JSON is bad, or it does
            not match ``topology``.
    """
    if probe_json_path is not None:
        result = load_probe_json(probe_json_path)
    else:
        from dlc.probe.runner import build_probe, run_probe  # subprocess side: lazy

        result = run_probe(build_probe())
    return merge_measurements(topology, result)


def load_probe_json(path: str | Path) -> ProbeResult:
    """Read a saved probe run (``p2p_probe > run.json``).

    Raises:
        ProbeError: the file cannot be read or is not valid probe JSON.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProbeError(f"--probe-json: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ProbeError(
            f"--probe-json: {path} is not text; give the JSON the probe printed (p2p_probe > FILE)"
        ) from None
    return parse_probe_json(text)


def _probe_model(result: ProbeResult, mapping: dict[int, int], gpu: int) -> str | None:
    # topo -m text carries no GPU model; the probe knows it (picks the NVLink generation).
    for dev in result.devices:
        if mapping.get(dev.index) == gpu:
            return dev.name
    return None
