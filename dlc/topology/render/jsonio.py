"""The ``dlc topology --json`` document, and reading it back into a :class:`Topology`.

The document is meant for programs, so its shape is fixed and versioned by the
``schema`` key (currently ``"dlc-topology/1"``). Top-level keys:

``schema``
    ``"dlc-topology/1"``.
``source``, ``driver_version``, ``cuda_version``
    where the facts came from; versions are ``null`` when unknown.
``summary``
    the one-line description a person reads (not meant to be parsed).
``gpus``
    one object per GPU, by index: ``index``, ``name`` (``GPU<index>``), ``model``,
    ``uuid``, ``pci_bus_id``, ``minor``, ``memory_mib``, ``cpu_affinity``,
    ``numa_node``, ``gpu_numa_id``, ``mig_mode`` (each ``null`` when unknown),
    ``vendor`` (``"nvidia"``/``"amd"``; a document without it reads as ``"nvidia"``) and
    ``nvlink_partners``: ``[{"gpu": int, "nvlinks": int}]``.
``nics``
    ``name``, ``alias`` (the ``NIC#`` column name or ``null``), ``levels``:
    ``[{"gpu": int, "level": "PIX"|"PXB"|"PHB"|"NODE"|"SYS"}]``, and
    ``nearest_gpus`` (the GPUs at the closest level) with that ``nearest_level``.
``links``
    one object per unordered GPU pair ``a < b``: ``label`` (``NV#`` or the PCIe
    level), ``pcie_level`` (``null`` when ``topo -m`` hid it behind ``NV#``),
    ``nvlinks``, ``p2p`` (``OK``/``CNS``/``GNS``/``TNS``/``NS``/``DR``/``U``),
    ``p2p_capable``, ``gbps`` (one direction), ``gbps_source``
    (``"measured"``/``"estimated"``) and ``measured_gbps`` (``null`` if not measured).
``groups``
    ``{"p2p": [[int, ...]], "nvlink": [[int, ...]]}``: maximal P2P-capable sets and
    NVLink-connected sets, largest first.
``tree``
    the PCIe tree as nested nodes ``{"id", "kind", "label", "children": [...]}``;
    GPU nodes add ``"gpu": int``; nodes whose level was inferred add
    ``"inferred": true``.

:func:`topology_from_json` reads back only the facts (``gpus``, ``nics``,
``links``, versions, source); the derived keys are recomputed, so a document
round-trips to an equal :class:`Topology`.
"""

from __future__ import annotations

from typing import Any

from dlc.errors import TopologyParseError
from dlc.topology.bandwidth import estimate_gbps
from dlc.topology.model import NVIDIA, Gpu, Nic, P2PStatus, PairLink, PcieLevel, Topology
from dlc.topology.render.report import TopologyFacts, analyze

SCHEMA = "dlc-topology/1"

_GPU_FIELDS: dict[str, type] = {
    "model": str,
    "uuid": str,
    "pci_bus_id": str,
    "minor": int,
    "memory_mib": int,
    "cpu_affinity": str,
    "numa_node": int,
    "gpu_numa_id": int,
    "mig_mode": str,
    "vendor": str,
}


def topology_to_json(topo: Topology, facts: TopologyFacts | None = None) -> dict[str, Any]:
    """The ``--json`` document of ``topo`` (see the module docstring for the keys).

    Args:
        topo: the machine.
        facts: its analysis, when the caller already has it (saves rebuilding the tree).
    """
    facts = facts or analyze(topo)
    return {
        "schema": SCHEMA,
        "source": topo.source,
        "driver_version": topo.driver_version,
        "cuda_version": topo.cuda_version,
        "summary": facts.summary,
        "gpus": [_gpu_doc(topo, gpu) for gpu in topo.gpus],
        "nics": [_nic_doc(facts, nic) for nic in topo.nics],
        "links": [_link_doc(topo, link) for link in topo.pairs()],
        "groups": {
            "p2p": [sorted(g) for g in facts.p2p_groups],
            "nvlink": [sorted(g) for g in facts.nvlink_groups],
        },
        "tree": _tree_doc(facts, "root"),
    }


def _gpu_doc(topo: Topology, gpu: Gpu) -> dict[str, Any]:
    doc: dict[str, Any] = {"index": gpu.index, "name": gpu.name}
    doc.update({key: getattr(gpu, key) for key in _GPU_FIELDS})
    partners = []
    for other in topo.gpu_indices:
        if other != gpu.index and topo.link(gpu.index, other).nvlinks:
            partners.append({"gpu": other, "nvlinks": topo.link(gpu.index, other).nvlinks})
    doc["nvlink_partners"] = partners
    return doc


def _nic_doc(facts: TopologyFacts, nic: Nic) -> dict[str, Any]:
    levels = facts.topo.nic_levels
    nearest, level = facts.nic_nearest.get(nic.name, (frozenset(), None))
    return {
        "name": nic.name,
        "alias": nic.alias,
        "levels": [
            {"gpu": gpu, "level": levels[(nic.name, gpu)].name}
            for gpu in facts.topo.gpu_indices
            if (nic.name, gpu) in levels
        ],
        "nearest_gpus": sorted(nearest),
        "nearest_level": level.name if level is not None else None,
    }


def _link_doc(topo: Topology, link: PairLink) -> dict[str, Any]:
    model = topo.gpu(link.a).model or topo.gpu(link.b).model
    return {
        "a": link.a,
        "b": link.b,
        "label": link.label,
        "pcie_level": link.pcie_level.name if link.pcie_level is not None else None,
        "nvlinks": link.nvlinks,
        "p2p": link.p2p.value,
        "p2p_capable": link.p2p_capable,
        "gbps": round(estimate_gbps(link, model), 2),
        "gbps_source": "measured" if link.measured_gbps is not None else "estimated",
        "measured_gbps": link.measured_gbps,
    }


def _tree_doc(facts: TopologyFacts, node: str) -> dict[str, Any]:
    graph = facts.tree.graph
    attrs = graph.nodes[node]
    doc: dict[str, Any] = {"id": node, "kind": attrs.get("kind"), "label": attrs.get("label", node)}
    if attrs.get("gpu") is not None:
        doc["gpu"] = attrs["gpu"]
    if attrs.get("inferred"):
        doc["inferred"] = True
    doc["children"] = [_tree_doc(facts, child) for child in facts.children(node)]
    return doc


def topology_from_json(doc: Any) -> Topology:
    """Read a ``dlc-topology/1`` document back into a :class:`Topology`.

    Raises:
        TopologyParseError: the document is not a ``dlc-topology/1`` object or a
            field has the wrong type; the message names the field.
    """
    if not isinstance(doc, dict):
        raise TopologyParseError("topology JSON must be an object", expected=f"schema {SCHEMA}")
    if doc.get("schema") != SCHEMA:
        raise TopologyParseError(
            f"topology JSON: schema is {doc.get('schema')!r}, this DLC reads {SCHEMA!r}"
        )
    gpus = tuple(_read_gpu(item, f"gpus[{i}]") for i, item in enumerate(_list(doc, "gpus")))
    if not gpus:
        raise TopologyParseError("topology JSON: gpus is empty; a machine needs at least one GPU")
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise TopologyParseError(f"topology JSON: gpus has a repeated index in {indices}")
    links = {}
    for i, item in enumerate(_list(doc, "links")):
        link = _read_link(item, f"links[{i}]", set(indices))
        links[(link.a, link.b)] = link
    missing = [
        (a, b) for i, a in enumerate(indices) for b in indices[i + 1 :] if (a, b) not in links
    ]
    if missing:
        a, b = missing[0]
        raise TopologyParseError(
            f"topology JSON: links has no entry for GPU{a}-GPU{b} ({len(missing)} pairs missing)"
        )
    nics, nic_levels = [], {}
    for i, item in enumerate(_list(doc, "nics")):
        nic, levels = _read_nic(item, f"nics[{i}]", set(indices))
        nics.append(nic)
        nic_levels.update(levels)
    return Topology(
        gpus=tuple(sorted(gpus, key=lambda g: g.index)),
        links=links,
        nics=tuple(nics),
        nic_levels=nic_levels,
        driver_version=_opt(doc, "driver_version", str, "driver_version"),
        cuda_version=_opt(doc, "cuda_version", str, "cuda_version"),
        source=_opt(doc, "source", str, "source") or "json",
    )


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise TopologyParseError(f"topology JSON: {key} must be a list, got {type(value).__name__}")
    return value


def _opt(doc: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(doc, dict):
        raise TopologyParseError(f"topology JSON: {where.rpartition('.')[0]} must be an object")
    value = doc.get(key)
    # bool is an int subclass; a JSON true is never a GPU index or a count.
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise TopologyParseError(
        f"topology JSON: {where} must be {kind.__name__} or null, got {value!r}"
    )


def _req(doc: Any, key: str, kind: type, where: str) -> Any:
    value = _opt(doc, key, kind, where)
    if value is None:
        raise TopologyParseError(f"topology JSON: {where} is required ({kind.__name__})")
    return value


def _read_gpu(item: Any, where: str) -> Gpu:
    index = _req(item, "index", int, f"{where}.index")
    fields = {key: _opt(item, key, kind, f"{where}.{key}") for key, kind in _GPU_FIELDS.items()}
    # Documents written before GPUs had a vendor described NVIDIA machines.
    fields["vendor"] = fields["vendor"] or NVIDIA
    return Gpu(index=index, **fields)


def _read_link(item: Any, where: str, indices: set[int]) -> PairLink:
    a = _req(item, "a", int, f"{where}.a")
    b = _req(item, "b", int, f"{where}.b")
    if a >= b or a not in indices or b not in indices:
        raise TopologyParseError(
            f"topology JSON: {where} must join two listed GPUs with a < b, got a={a} b={b}"
        )
    level = _opt(item, "pcie_level", str, f"{where}.pcie_level")
    p2p = _opt(item, "p2p", str, f"{where}.p2p") or "U"
    try:
        p2p_status = P2PStatus(p2p)
    except ValueError:
        names = "/".join(s.value for s in P2PStatus)
        raise TopologyParseError(f"topology JSON: {where}.p2p is {p2p!r}, use {names}") from None
    return PairLink(
        a=a,
        b=b,
        pcie_level=_level(level, f"{where}.pcie_level") if level is not None else None,
        nvlinks=_opt(item, "nvlinks", int, f"{where}.nvlinks") or 0,
        p2p=p2p_status,
        measured_gbps=_opt(item, "measured_gbps", float, f"{where}.measured_gbps"),
    )


def _read_nic(
    item: Any, where: str, indices: set[int]
) -> tuple[Nic, dict[tuple[str, int], PcieLevel]]:
    nic = Nic(
        name=_req(item, "name", str, f"{where}.name"),
        alias=_opt(item, "alias", str, f"{where}.alias"),
    )
    levels = {}
    for j, entry in enumerate(_list(item, "levels")):
        gpu = _req(entry, "gpu", int, f"{where}.levels[{j}].gpu")
        if gpu not in indices:
            raise TopologyParseError(f"topology JSON: {where}.levels[{j}].gpu {gpu} is not a GPU")
        text = _req(entry, "level", str, f"{where}.levels[{j}].level")
        levels[(nic.name, gpu)] = _level(text, f"{where}.levels[{j}].level")
    return nic, levels


def _level(text: str, where: str) -> PcieLevel:
    try:
        return PcieLevel.from_text(text)
    except KeyError:
        raise TopologyParseError(
            f"topology JSON: {where} is {text!r}, use PIX/PXB/PHB/NODE/SYS"
        ) from None
