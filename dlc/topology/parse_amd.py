"""Parse saved ``rocm-smi`` / ``amd-smi`` output into a :class:`~dlc.topology.model.Topology`.

Accepted inputs (one file, sections in any order, as the tools print them):

* ``rocm-smi --showtopo`` text (weight, hops and link-type matrices, NUMA nodes), with
  any of ``--shownodesbw``, ``--showtoponuma``, ``--showbus``, ``--showproductname`` and
  ``--showmeminfo vram`` appended;
* ``rocm-smi ... --json`` (``{"system": {"(Topology) Weight between DRM devices 0 and 1":
  "15", ...}, "card0": {...}}``);
* ``amd-smi topology --json`` in the list-of-links form (ROCm 6.2+) or the older
  per-GPU-dict form, optionally followed by ``amd-smi static --json`` and
  ``amd-smi metric --json`` documents in the same file.

XGMI (Infinity Fabric) pairs become fabric links of the model, counted in
:attr:`~dlc.topology.model.PairLink.nvlinks`, so the tree, the report and the allocator
treat them as they treat NVLink. Both SMIs print *1 hop* for every XGMI pair of a hive,
direct or not (ROCm/rocm-systems issue 5763), so directness comes from, in order:

1. the XGMI bandwidth (``--shownodesbw`` / amd-smi ``bandwidth``): ``0-0`` means not
   directly connected; otherwise the link count is the maximum over 50,000 MB/s, the
   rate of one MI200 link per direction;
2. the weight: the kernel adds 15 per XGMI hop and 20 per PCIe segment, so an XGMI
   weight of 15 is one direct link and 30 two hops.

Indirect XGMI pairs keep peer access (``p2p=OK``) and no fabric link. PCIe pairs get a
level from their hops (``2``: through one CPU socket, ``3``: across sockets) or weight.
Every problem raises :class:`~dlc.errors.TopologyParseError` naming the line (text) or
the key (JSON) and what was expected; no other exception escapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dlc.errors import TopologyParseError
from dlc.topology.model import AMD, Gpu, P2PStatus, PairLink, PcieLevel, Topology

#: weight the amdgpu kernel driver gives one XGMI hop, and one PCIe segment
XGMI_HOP_WEIGHT = 15
PCIE_SEGMENT_WEIGHT = 20
#: MB/s of one XGMI link per direction, as ``--shownodesbw`` reports it (MI200)
XGMI_LINK_MBPS = 50_000

_TITLE_RE = re.compile(r"\s*=+\s*(.*?)\s*=+\s*")
_GPU_RE = re.compile(r"GPU([0-9]{1,4})")
_CARD_LINE_RE = re.compile(r"\s*(?:GPU|card)\[?([0-9]{1,4})\]?\s*:\s*(.*?)\s*:\s*(.*?)\s*")
_PAIR_KEY_RE = re.compile(r"\(Topology\) (.+?) between DRM devices ([0-9]+) and ([0-9]+)")
_BDF_RE = re.compile(r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


@dataclass
class AmdFacts:
    """What the SMI outputs told, before it becomes a topology (pair keys ``(a, b)``, a < b)."""

    gpus: set[int] = field(default_factory=set)
    weight: dict[tuple[int, int], int] = field(default_factory=dict)
    hops: dict[tuple[int, int], int] = field(default_factory=dict)
    kind: dict[tuple[int, int], str] = field(default_factory=dict)
    max_mbps: dict[tuple[int, int], int] = field(default_factory=dict)
    numa: dict[int, int] = field(default_factory=dict)
    model: dict[int, str] = field(default_factory=dict)
    bus: dict[int, str] = field(default_factory=dict)
    vram_mib: dict[int, int] = field(default_factory=dict)
    driver: str | None = None


def _err(message: str, line: int | None = None, expected: str | None = None):
    return TopologyParseError(message, line=line, expected=expected)


def _key(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def looks_like_amd(text: str) -> bool:
    """Whether ``text`` is ``rocm-smi``/``amd-smi`` output rather than ``nvidia-smi topo -m``."""
    head = text.lstrip()[:4000]
    if head.startswith("{"):  # rocm-smi --json; a dlc-topology/1 document has a "schema"
        return '"schema"' not in head and ('"system"' in head or '"card' in head)
    if head.startswith("["):  # amd-smi --json: a list of GPUs
        return any(key in head for key in ('"links"', '"link_type"', '"asic"', '"bdf"'))
    return "ROCm System Management Interface" in head or "between two GPUs" in head


def parse_amd_smi_text(text: str) -> Topology:
    """Parse saved ``rocm-smi``/``amd-smi`` output (text or JSON; see the module docstring).

    Raises:
        TopologyParseError: no GPU matrix or link list, or a malformed section.
    """
    if not isinstance(text, str) or not text.strip():
        raise _err("AMD SMI output is empty", 1, "`rocm-smi --showtopo` or `amd-smi topology`")
    stripped = text.lstrip()
    facts = AmdFacts()
    if stripped.startswith(("[", "{")):
        for doc in _json_documents(text):
            _read_json(doc, facts)
    else:
        _read_text(text, facts)
    return build_topology(facts)


# ---- text ------------------------------------------------------------------------------


def _read_text(text: str, facts: AmdFacts) -> None:
    lines = text.splitlines()
    title = ""
    i = 0
    while i < len(lines):
        match = _TITLE_RE.fullmatch(lines[i])
        if match and "=" in lines[i]:
            title = match.group(1).lower()
            i += 1
            continue
        if _is_header(lines[i]) and len(lines[i].split()) > 1:
            i = _read_matrix(lines, i, title, facts)
            continue
        card = _CARD_LINE_RE.fullmatch(lines[i])
        if card:
            _read_card_line(int(card.group(1)), card.group(2), card.group(3), i + 1, facts)
        i += 1
    if not facts.gpus:
        raise _err(
            "no GPU matrix found in the rocm-smi output",
            1,
            "`rocm-smi --showtopo` (or --shownodesbw) tables with a GPU0 GPU1 ... header",
        )


def _is_header(line: str) -> bool:
    tokens = line.split()
    return len(tokens) > 0 and all(_GPU_RE.fullmatch(t) for t in tokens)


def _read_matrix(lines: list[str], start: int, title: str, facts: AmdFacts) -> int:
    """Read the matrix whose header is ``lines[start]``; return the index after it."""
    header = [int(_GPU_RE.fullmatch(t).group(1)) for t in lines[start].split()]  # type: ignore[union-attr]
    if not _is_header(lines[start]):
        raise _err("matrix header mixes GPU names and values", start + 1, "GPU0 GPU1 ...")
    what = _matrix_kind(title, start)
    index = start + 1
    seen = 0
    while (
        index < len(lines)
        and lines[index].split()[:1]
        and _GPU_RE.fullmatch(lines[index].split()[0])
    ):
        tokens = lines[index].split()
        row = int(tokens[0][3:])
        cells = tokens[1:]
        if len(cells) != len(header):
            raise _err(
                f"GPU{row}'s row in the {title or 'matrix'} has {len(cells)} cells",
                index + 1,
                f"{len(header)} cells, one per column GPU{header[0]}..GPU{header[-1]}",
            )
        for col, cell in zip(header, cells, strict=True):
            if col != row:
                _store(facts, what, row, col, cell, index + 1)
        facts.gpus.add(row)
        seen += 1
        index += 1
    if seen != len(header):
        raise _err(
            f"the {title or 'matrix'} has {seen} rows for {len(header)} columns",
            index,
            f"rows GPU{header[0]}..GPU{header[-1]}",
        )
    facts.gpus.update(header)
    return index


def _matrix_kind(title: str, line: int) -> str:
    for needle, kind in (("weight", "weight"), ("hops", "hops"), ("link type", "type")):
        if needle in title:
            return kind
    if "bandwidth" in title:
        return "bandwidth"
    raise _err(
        f"a GPU matrix under the unknown title {title!r}",
        line + 1,
        "Weight, Hops, Link Type or Bandwidth between two GPUs",
    )


def _store(facts: AmdFacts, what: str, a: int, b: int, cell: str, line: int) -> None:
    key = _key(a, b)
    try:
        if what == "weight":
            facts.weight[key] = int(cell)
        elif what == "hops":
            facts.hops[key] = int(cell)
        elif what == "type":
            if cell.upper() not in ("XGMI", "PCIE"):
                raise ValueError
            facts.kind[key] = cell.upper()
        else:
            _, _, top = cell.partition("-")
            facts.max_mbps[key] = max(facts.max_mbps.get(key, 0), int(top or cell))
    except ValueError:
        want = {
            "weight": "a number",
            "hops": "a number",
            "type": "XGMI or PCIE",
            "bandwidth": "min-max in MB/s such as 50000-200000",
        }[what]
        raise _err(f"GPU{a}/GPU{b} {what} is {cell!r}", line, want) from None


def _read_card_line(gpu: int, name: str, value: str, line: int, facts: AmdFacts) -> None:
    name = name.lower()
    if "numa node" in name:
        if not value.lstrip("-").isdigit():
            raise _err(f"GPU[{gpu}] NUMA node {value!r}", line, "a number")
        facts.numa[gpu] = max(int(value), 0)  # -1: no NUMA information
    elif name in ("card series", "market name", "card sku name") or name == "card model name":
        if value and not value.lower().startswith("0x") and value.upper() != "N/A":
            facts.model.setdefault(gpu, value)
    elif "pci bus" in name:
        if not _BDF_RE.fullmatch(value):
            raise _err(f"GPU[{gpu}] PCI bus {value!r}", line, "a bus id such as 0000:05:00.0")
        facts.bus[gpu] = value.lower()
    elif "vram total memory" in name:
        if not value.isdigit():
            raise _err(f"GPU[{gpu}] VRAM total {value!r}", line, "a number of bytes")
        facts.vram_mib[gpu] = int(value) >> 20
    elif "driver version" in name and value:
        facts.driver = value


# ---- JSON ------------------------------------------------------------------------------


def _json_documents(text: str) -> Iterator[Any]:
    """Each JSON document of ``text`` (several tools' ``--json`` output may be saved in one)."""
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            expected = "amd-smi/rocm-smi --json output"
            raise _err(f"malformed JSON: {exc.msg}", line, expected) from None
        yield doc


def _read_json(doc: Any, facts: AmdFacts) -> None:
    if (
        isinstance(doc, dict)
        and "system" in doc
        or (isinstance(doc, dict) and any(k.startswith("card") for k in doc))
    ):
        _read_rocm_json(doc, facts)
    elif isinstance(doc, list):
        for n, item in enumerate(doc):
            if not isinstance(item, dict) or not isinstance(item.get("gpu"), int):
                expected = '{"gpu": 0, ...}'
                raise _err(f"amd-smi JSON item {n} has no integer 'gpu'", expected=expected)
            _read_amd_item(item, facts)
    elif isinstance(doc, dict) and isinstance(doc.get("gpu_data"), list):
        _read_json(doc["gpu_data"], facts)
    else:
        raise _err(
            "JSON is neither amd-smi (a list of GPUs) nor rocm-smi ({'system': ..., 'card0': ...})"
        )


def _read_rocm_json(doc: dict[str, Any], facts: AmdFacts) -> None:
    for key, value in (doc.get("system") or {}).items():
        match = _PAIR_KEY_RE.fullmatch(key)
        if not match:
            continue
        what = {"Weight": "weight", "Hops": "hops", "Link type": "type"}.get(match.group(1))
        if what is None:
            continue
        a, b = int(match.group(2)), int(match.group(3))
        facts.gpus.update((a, b))
        _store(facts, what, a, b, str(value), 1)
    for card, fields in doc.items():
        if not card.startswith("card") or not isinstance(fields, dict):
            continue
        if not card[4:].isdigit():
            raise _err(f"rocm-smi JSON key {card!r}", expected="card<number>")
        gpu = int(card[4:])
        facts.gpus.add(gpu)
        for name, value in fields.items():
            _read_card_line(gpu, name.removeprefix("(Topology) "), str(value).strip(), 1, facts)


def _read_amd_item(item: dict[str, Any], facts: AmdFacts) -> None:
    gpu = item["gpu"]
    facts.gpus.add(gpu)
    if isinstance(item.get("links"), list):  # amd-smi topology, ROCm 6.2+
        for link in item["links"]:
            other = link.get("gpu") if isinstance(link, dict) else None
            if not isinstance(other, int):
                raise _err(f"amd-smi topology: GPU {gpu} has a link without 'gpu'")
            if other != gpu:
                _amd_link(facts, gpu, other, link)
    elif isinstance(item.get("link_type"), dict):  # amd-smi topology, ROCm 6.0/6.1
        for name, kind in item["link_type"].items():
            other = int(name.removeprefix("gpu_"))
            if other == gpu:
                continue
            link = {"link_type": kind}
            for src, dst in (("weight", "weight"), ("hops", "num_hops")):
                if isinstance(item.get(src), dict):
                    link[dst] = item[src].get(name)
            _amd_link(facts, gpu, other, link)
    _amd_static(gpu, item, facts)


def _amd_link(facts: AmdFacts, a: int, b: int, link: dict[str, Any]) -> None:
    facts.gpus.add(b)
    kind = str(link.get("link_type", "")).upper()
    if kind == "SELF":
        return
    where = f"amd-smi topology GPU {a} -> {b}"
    if kind not in ("XGMI", "PCIE"):
        raise _err(f"{where}: link_type {kind!r}", expected="XGMI or PCIE")
    facts.kind[_key(a, b)] = kind
    for src, what in (("weight", "weight"), ("num_hops", "hops")):
        value = link.get(src)
        if isinstance(value, int):
            _store(facts, what, a, b, str(value), 1)
    bandwidth = link.get("bandwidth")
    if isinstance(bandwidth, str) and "-" in bandwidth:
        _store(facts, "bandwidth", a, b, bandwidth, 1)


def _amd_static(gpu: int, item: dict[str, Any], facts: AmdFacts) -> None:
    """``amd-smi static --json`` fields: ``asic.market_name``, ``bus.bdf``, ``vram.size``, ..."""
    asic = item["asic"] if isinstance(item.get("asic"), dict) else {}
    name = asic.get("market_name")
    if isinstance(name, str) and name and name.upper() != "N/A":
        facts.model[gpu] = name
    bus = item["bus"] if isinstance(item.get("bus"), dict) else {}
    bdf = bus.get("bdf") or item.get("bdf")
    if isinstance(bdf, str) and _BDF_RE.fullmatch(bdf):
        facts.bus.setdefault(gpu, bdf.lower())
    vram = item["vram"] if isinstance(item.get("vram"), dict) else {}
    size = vram.get("size")
    if isinstance(size, dict) and isinstance(size.get("value"), int):
        unit = str(size.get("unit", "MB")).upper()
        facts.vram_mib[gpu] = size["value"] * 1024 if unit.startswith("G") else size["value"]
    numa = item["numa"] if isinstance(item.get("numa"), dict) else {}
    if isinstance(numa.get("node"), int):
        facts.numa[gpu] = max(numa["node"], 0)
    driver = item["driver"] if isinstance(item.get("driver"), dict) else {}
    if isinstance(driver.get("version"), str):
        facts.driver = driver["version"]


# ---- building --------------------------------------------------------------------------


def build_topology(facts: AmdFacts) -> Topology:
    """The topology the facts describe (``vendor="amd"``, XGMI links as fabric links).

    Raises:
        TopologyParseError: GPU indices are not ``0..n-1``, or a pair has no link facts.
    """
    gpus = sorted(facts.gpus)
    if gpus != list(range(len(gpus))):
        raise _err(f"GPU indices {gpus} are not 0..{len(gpus) - 1}", expected="every GPU listed")
    hive = _hives(facts, gpus)
    links = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            links[(a, b)] = _pair(facts, a, b, hive[a] == hive[b])
    return Topology(
        gpus=tuple(
            Gpu(
                index=g,
                model=facts.model.get(g),
                pci_bus_id=facts.bus.get(g),
                memory_mib=facts.vram_mib.get(g),
                numa_node=facts.numa.get(g),
                vendor=AMD,
            )
            for g in gpus
        ),
        links=links,
        driver_version=facts.driver,
        source="rocm-smi",
    )


def _hives(facts: AmdFacts, gpus: list[int]) -> dict[int, int]:
    """Each GPU's XGMI hive: GPUs joined by XGMI links or a non-zero XGMI rate share one."""
    hive = {g: g for g in gpus}

    def root(g: int) -> int:
        while hive[g] != g:
            g = hive[g]
        return g

    joined = [k for k, kind in facts.kind.items() if kind == "XGMI"]
    joined += [k for k, mbps in facts.max_mbps.items() if mbps]
    for a, b in joined:
        hive[root(a)] = root(b)
    return {g: root(g) for g in gpus}


def _pair(facts: AmdFacts, a: int, b: int, same_hive: bool) -> PairLink:
    key = (a, b)
    weight, hops, mbps = facts.weight.get(key), facts.hops.get(key), facts.max_mbps.get(key)
    kind = facts.kind.get(key)
    if kind is None:  # --shownodesbw alone: a non-zero XGMI rate means a direct link
        if mbps is None and weight is None:
            raise _err(
                f"no link facts for GPU{a}-GPU{b}",
                expected="--showtopo (weight/hops/type) or --shownodesbw for every pair",
            )
        # a 0-0 rate inside a hive is an indirect XGMI route, not PCIe
        kind = "XGMI" if same_hive else "PCIE"
    if kind == "XGMI":
        if mbps is not None:
            count = round(mbps / XGMI_LINK_MBPS) if mbps else 0
            count = max(count, 1) if mbps else 0
        else:
            count = 1 if weight is None or weight <= XGMI_HOP_WEIGHT * 3 // 2 else 0
        return PairLink(a, b, pcie_level=None, nvlinks=count, p2p=P2PStatus.OK)
    return PairLink(a, b, pcie_level=_pcie_level(hops, weight))


def _pcie_level(hops: int | None, weight: int | None) -> PcieLevel:
    """PCIe level from hops (2: one CPU socket, 3+: across sockets) or the weight."""
    if hops is not None:
        return PcieLevel.PXB if hops <= 1 else PcieLevel.NODE if hops == 2 else PcieLevel.SYS
    if weight is not None:
        if weight <= PCIE_SEGMENT_WEIGHT:
            return PcieLevel.PXB
        return PcieLevel.NODE if weight <= 2 * PCIE_SEGMENT_WEIGHT else PcieLevel.SYS
    return PcieLevel.SYS
