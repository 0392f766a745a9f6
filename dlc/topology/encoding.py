"""Compact text encoding of a :class:`~dlc.topology.model.Topology`.

The encoding travels in a Mesos agent attribute (``dlc_topo:<value>``), so the value
matches ``^[a-zA-Z][a-zA-Z0-9_/.-]*$``: no commas, colons, semicolons or blanks.
Decoding gives back a topology equal (``==``) to the encoded one.

Format ``T1``: ``/``-separated tokens, each a one-letter tag and a payload::

    T1/Rtopo-m/G/A0-11_v24-35/G/G/.../Emlx5__0/LZ1-2Z2-2S-3.../PN-2I-2S-4

* ``D``/``C``/``R``: driver version, CUDA version, source (absent: ``"unknown"``).
* ``G[index]`` starts the next GPU (bare ``G``: previous index + 1, first 0). Its
  fields follow: ``M`` model, ``U`` uuid, ``B`` PCI bus id, ``N`` minor, ``Y``
  memory MiB, ``A`` CPU affinity, ``K`` NUMA node, ``J`` GPU NUMA id, ``V`` vendor
  (absent on the first GPU: ``nvidia``, so encodings from before vendors decode as
  they did); ``Q<tag>``
  sets a field to ``None``. To keep machines of identical GPUs short, model,
  memory, affinity, NUMA and vendor fields default to the previous GPU's value and the
  minor number to the previous minor shifted by the index step; uuid and bus id
  default to ``None``.
* ``E<name>`` adds a NIC, ``W<alias>`` gives the last NIC its ``NIC#`` alias.
* ``L``: every GPU pair in order (0,1), (0,2) ... (1,2) ... by GPU position. One
  code per pair: the PCIe level ``I``/``X``/``H``/``N``/``S`` (PIX, PXB, PHB, NODE,
  SYS) or ``Z`` (unknown), then the NVLink count if any, a P2P letter if not
  ``U`` (``o`` OK, ``c`` CNS, ``g`` GNS, ``t`` TNS, ``n`` NS, ``d`` DR), ``m<GB/s>``
  if measured, and ``-<k>`` when the same code repeats ``k`` times. ``x`` marks a
  pair without a link.
* ``P``: one level letter (or ``x``) per NIC and GPU, NIC-major, with ``-<k>``
  repeats as in ``L``.

Strings keep ``[A-Za-z0-9.-]``; ``_`` is written ``__``, blank ``_s``, ``:`` ``_k``,
``,`` ``_v`` and every other byte of their UTF-8 form ``_hh`` (``Tesla V100`` ->
``Tesla_sV100``, ``0-11,24-35`` -> ``0-11_v24-35``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from dlc.errors import TopologyEncodingError
from dlc.topology.model import Gpu, Nic, P2PStatus, PairLink, PcieLevel, Topology

VERSION = "T1"
#: what every encoded value matches (the Mesos text attribute charset, letter first)
VALUE_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9_/.-]*")

_LEVEL_CODE = {
    PcieLevel.PIX: "I",
    PcieLevel.PXB: "X",
    PcieLevel.PHB: "H",
    PcieLevel.NODE: "N",
    PcieLevel.SYS: "S",
}
_CODE_LEVEL = {v: k for k, v in _LEVEL_CODE.items()}
_P2P_CODE = {
    P2PStatus.OK: "o",
    P2PStatus.CNS: "c",
    P2PStatus.GNS: "g",
    P2PStatus.TNS: "t",
    P2PStatus.NS: "n",
    P2PStatus.DR: "d",
}
_CODE_P2P = {v: k for k, v in _P2P_CODE.items()}
_LINK_RE = re.compile(
    r"(?:([IXHNSZ])([0-9]{1,4})?([ocgtnd])?(?:m([0-9]{1,20}(?:\.[0-9]{1,20})?(?:e-?[0-9]{1,3})?))?"
    r"|(x))(?:-([0-9]{1,6}))?"
)
_INT_RE = re.compile(r"-?[0-9]{1,18}")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")

# GPU fields: tag -> (field name, kind). Inherited fields default to the previous GPU's.
_GPU_FIELDS = {
    "M": ("model", "str"),
    "U": ("uuid", "str"),
    "B": ("pci_bus_id", "str"),
    "N": ("minor", "int"),
    "Y": ("memory_mib", "int"),
    "A": ("cpu_affinity", "str"),
    "K": ("numa_node", "int"),
    "J": ("gpu_numa_id", "int"),
    "V": ("vendor", "str"),
}
_INHERITED = frozenset(
    {"model", "memory_mib", "cpu_affinity", "numa_node", "gpu_numa_id", "vendor"}
)


#: short escapes for the characters common in model names, bus ids and CPU lists
#: (letters outside 0-9a-f, so they cannot be mistaken for a hex escape)
_SHORT = {"_": "_", " ": "s", ":": "k", ",": "v"}
_SHORT_BACK = {v: k for k, v in _SHORT.items()}


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        elif ch in _SHORT:
            out.append("_" + _SHORT[ch])
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def _unescape(text: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "_":
            raw += ch.encode("ascii")
            i += 1
        elif text[i + 1 : i + 2] in _SHORT_BACK:
            raw += _SHORT_BACK[text[i + 1]].encode("ascii")
            i += 2
        elif re.fullmatch(r"[0-9a-f]{2}", text[i + 1 : i + 3]):
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raise TopologyEncodingError(
                f"bad escape {text[i : i + 3]!r} in {text!r}; expected _ _s _k _v or 2 hex digits"
            )
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise TopologyEncodingError(f"escaped text {text!r} is not UTF-8") from None


# ---- encoding ---------------------------------------------------------------------------


def _default_gpu(prev: Gpu | None, index: int) -> Gpu:
    """The GPU a bare ``G`` token stands for, given the previous GPU."""
    if prev is None:
        return Gpu(index=index)
    minor = None if prev.minor is None else prev.minor + (index - prev.index)
    kept = {name: getattr(prev, name) for name in _INHERITED}
    return Gpu(index=index, minor=minor, **kept)


def _check_value(name: str, value: object, kind: str) -> None:
    if value is None:
        return
    ok = isinstance(value, str) if kind == "str" else isinstance(value, int)
    if not ok or (kind == "int" and abs(value) >= 10**18):  # type: ignore[arg-type]
        raise TopologyEncodingError(f"GPU field {name}={value!r} is not a {kind} or None")


def _encode_gpu(gpu: Gpu, prev: Gpu | None) -> list[str]:
    if not isinstance(gpu, Gpu):
        raise TopologyEncodingError(f"gpus must hold Gpu objects, got {gpu!r}")
    _check_value("index", gpu.index, "int")
    if gpu.index is None or gpu.index < 0:
        raise TopologyEncodingError(f"GPU index must be a non-negative int, got {gpu.index!r}")
    nxt = 0 if prev is None else prev.index + 1
    tokens = ["G" if gpu.index == nxt else f"G{gpu.index}"]
    default = _default_gpu(prev, gpu.index)
    for tag, (name, kind) in _GPU_FIELDS.items():
        value = getattr(gpu, name)
        _check_value(name, value, kind)
        if value == getattr(default, name) and type(value) is type(getattr(default, name)):
            continue
        if value is None:
            tokens.append(f"Q{tag}")
        else:
            tokens.append(tag + (_escape(value) if kind == "str" else str(int(value))))
    return tokens


def _link_code(link: PairLink | None, key: tuple[int, int]) -> str:
    if link is None:
        return "x"
    if not isinstance(link, PairLink) or (link.a, link.b) != key:
        raise TopologyEncodingError(f"link for GPU pair {key} is {link!r}; expected PairLink{key}")
    if link.pcie_level is not None and not isinstance(link.pcie_level, PcieLevel):
        raise TopologyEncodingError(f"link {key} has pcie_level {link.pcie_level!r}")
    code = "Z" if link.pcie_level is None else _LEVEL_CODE[link.pcie_level]
    if not isinstance(link.nvlinks, int) or not 0 <= link.nvlinks <= 9999:
        raise TopologyEncodingError(f"link {key} has nvlinks={link.nvlinks!r}; expected 0..9999")
    if link.nvlinks:
        code += str(link.nvlinks)
    try:
        code += _P2P_CODE.get(P2PStatus(link.p2p), "")
    except ValueError:
        raise TopologyEncodingError(f"link {key} has p2p={link.p2p!r}") from None
    if link.measured_gbps is not None:
        code += "m" + _encode_gbps(link.measured_gbps, key)
    return code


def _encode_gbps(value: object, key: tuple[int, int]) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TopologyEncodingError(f"link {key} has measured_gbps={value!r}; expected a number")
    if not math.isfinite(value) or value < 0:
        raise TopologyEncodingError(f"link {key} has measured_gbps={value!r}; expected >= 0")
    text = "0.0" if value == 0 else repr(value).replace("+", "")
    if float(text) != value or not re.fullmatch(r"[0-9.e-]+", text):
        raise TopologyEncodingError(f"link {key} measured_gbps={value!r} cannot be encoded")
    return text


def _run_length(codes: list[str]) -> str:
    """Join codes, writing a run of ``k`` equal codes once with a ``-k`` suffix."""
    out: list[str] = []
    i = 0
    while i < len(codes):
        j = i
        while j < len(codes) and codes[j] == codes[i]:
            j += 1
        out.append(codes[i] if j - i == 1 else f"{codes[i]}-{j - i}")
        i = j
    return "".join(out)


def _encode_links(topo: Topology, order: list[int]) -> str:
    pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
    keys = [(a, b) if a < b else (b, a) for a, b in pairs]
    stray = set(topo.links) - set(keys)
    if stray:
        raise TopologyEncodingError(f"links {sorted(stray)[:3]} name GPUs the topology lacks")
    return _run_length([_link_code(topo.links.get(k), k) for k in keys])


def _encode_nic_levels(topo: Topology, order: list[int]) -> str:
    names = [nic.name for nic in topo.nics]
    stray = [k for k in topo.nic_levels if k[0] not in names or k[1] not in order]
    if stray:
        raise TopologyEncodingError(f"nic_levels {stray[:3]} name NICs/GPUs the topology lacks")
    out = []
    for name in names:
        for index in order:
            level = topo.nic_levels.get((name, index))
            if level is not None and not isinstance(level, PcieLevel):
                raise TopologyEncodingError(f"nic level ({name}, {index}) is {level!r}")
            out.append("x" if level is None else _LEVEL_CODE[level])
    return _run_length(out)


def encode_topology(topo: Topology) -> str:
    """Encode a topology as a Mesos-attribute-safe string (see the module docstring).

    Raises:
        TopologyEncodingError: the topology holds something the format cannot carry
            (duplicate GPU indices, links to unknown GPUs, a negative bandwidth ...).
    """
    if not isinstance(topo, Topology):
        raise TopologyEncodingError(f"expected a Topology, got {type(topo).__name__}")
    tokens = [VERSION]
    for tag, value in (("D", topo.driver_version), ("C", topo.cuda_version)):
        if value is not None:
            tokens.append(tag + _escape(str(value)))
    if topo.source != "unknown":
        tokens.append("R" + _escape(str(topo.source)))
    order = [gpu.index for gpu in topo.gpus]
    if len(set(order)) != len(order):
        raise TopologyEncodingError(f"duplicate GPU indices in {order}")
    prev = None
    for gpu in topo.gpus:
        tokens += _encode_gpu(gpu, prev)
        prev = gpu
    names = [nic.name for nic in topo.nics]
    if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
        raise TopologyEncodingError(f"NIC names must be distinct strings, got {names}")
    for nic in topo.nics:
        tokens.append("E" + _escape(nic.name))
        if nic.alias is not None:
            tokens.append("W" + _escape(str(nic.alias)))
    if len(order) > 1:
        tokens.append("L" + _encode_links(topo, order))
    elif topo.links:
        raise TopologyEncodingError("links given for a topology with fewer than 2 GPUs")
    if topo.nics and order:
        tokens.append("P" + _encode_nic_levels(topo, order))
    elif topo.nic_levels:
        raise TopologyEncodingError("nic_levels given without NICs or GPUs")
    return "/".join(tokens)


# ---- decoding ---------------------------------------------------------------------------


@dataclass
class _State:
    gpus: list[Gpu]
    nics: list[Nic]
    meta: dict[str, str]
    links: str | None = None
    nic_levels: str | None = None


def _int(payload: str, token: str) -> int:
    if not _INT_RE.fullmatch(payload):
        raise TopologyEncodingError(f"token {token!r}: expected an integer after the tag")
    return int(payload)


def _apply(state: _State, tag: str, payload: str, token: str) -> None:
    if tag in "DCR":
        if state.gpus or tag in state.meta:
            raise TopologyEncodingError(f"token {token!r} must come once, before the GPUs")
        state.meta[tag] = _unescape(payload)
    elif tag == "G":
        if state.nics or state.links is not None:
            raise TopologyEncodingError(f"token {token!r}: GPUs must come before NICs and links")
        prev = state.gpus[-1] if state.gpus else None
        nxt = 0 if prev is None else prev.index + 1
        index = _int(payload, token) if payload else nxt
        state.gpus.append(_default_gpu(prev, index))
    elif tag in _GPU_FIELDS or tag == "Q":
        if not state.gpus or state.nics or state.links is not None:
            raise TopologyEncodingError(f"token {token!r} must follow its GPU's G token")
        target = payload if tag == "Q" else tag
        if target not in _GPU_FIELDS or (tag == "Q" and len(payload) != 1):
            raise TopologyEncodingError(f"token {token!r}: Q needs one GPU field tag after it")
        name, kind = _GPU_FIELDS[target]
        value: object = None
        if tag != "Q":
            value = _unescape(payload) if kind == "str" else _int(payload, token)
        change: dict[str, Any] = {name: value}  # the field the tag names, of its kind
        state.gpus[-1] = replace(state.gpus[-1], **change)
    elif tag == "E":
        if state.links is not None or state.nic_levels is not None:
            raise TopologyEncodingError(f"token {token!r}: NICs must come before L and P")
        state.nics.append(Nic(name=_unescape(payload)))
    elif tag == "W":
        if not state.nics or state.nics[-1].alias is not None or state.links is not None:
            raise TopologyEncodingError(f"token {token!r} must follow its NIC's E token once")
        state.nics[-1] = replace(state.nics[-1], alias=_unescape(payload))
    elif tag == "L" and state.links is None and state.nic_levels is None:
        state.links = payload
    elif tag == "P" and state.nic_levels is None:
        state.nic_levels = payload
    else:
        raise TopologyEncodingError(
            f"unexpected token {token!r}; expected one of DCRGMUBNYAKJVQEWLP"
        )


def _decode_links(text: str, order: list[int]) -> dict[tuple[int, int], PairLink]:
    pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
    links: dict[tuple[int, int], PairLink] = {}
    pos = 0
    k = 0
    while pos < len(text):
        match = _LINK_RE.match(text, pos)
        if match is None or match.end() == pos:
            raise TopologyEncodingError(f"bad link code at {text[pos : pos + 8]!r} in L token")
        level, nv, p2p, gbps, absent, count = match.groups()
        repeat = int(count) if count else 1
        if k + repeat > len(pairs) or repeat < 1:
            raise TopologyEncodingError(f"L token has more than {len(pairs)} link codes")
        for a, b in pairs[k : k + repeat]:
            if absent:
                continue
            key = (a, b) if a < b else (b, a)
            links[key] = PairLink(
                key[0],
                key[1],
                pcie_level=None if level == "Z" else _CODE_LEVEL[level],
                nvlinks=int(nv) if nv else 0,
                p2p=_CODE_P2P[p2p] if p2p else P2PStatus.U,
                measured_gbps=float(gbps) if gbps is not None else None,
            )
        k += repeat
        pos = match.end()
    if k != len(pairs):
        raise TopologyEncodingError(f"L token has {k} link codes; expected {len(pairs)}")
    return links


def _decode_nic_levels(text: str, nics: list[Nic], order: list[int]):
    want = len(nics) * len(order)
    codes: list[str] = []
    for match in re.finditer(r"([IXHNSx])(?:-([0-9]{1,6}))?|(.)", text):
        if match.group(3) is not None or len(codes) > want:
            break
        codes += match.group(1) * int(match.group(2) or 1)
    else:
        if len(codes) == want:
            keys = [(nic.name, index) for nic in nics for index in order]
            return {key: _CODE_LEVEL[c] for key, c in zip(keys, codes, strict=True) if c != "x"}
    raise TopologyEncodingError(
        f"P token must hold {want} level codes (I/X/H/N/S/x, -k repeats), got {text!r}"
    )


def decode_topology(text: str) -> Topology:
    """Decode :func:`encode_topology` output back into the same :class:`Topology`.

    Raises:
        TopologyEncodingError: ``text`` is not a valid ``T1`` encoding.
    """
    if not isinstance(text, str) or not VALUE_RE.fullmatch(text):
        raise TopologyEncodingError(
            "topology encoding must start with a letter and use only [a-zA-Z0-9_/.-]"
        )
    tokens = text.split("/")
    if tokens[0] != VERSION:
        raise TopologyEncodingError(f"unknown topology encoding {tokens[0]!r}; expected {VERSION}")
    state = _State(gpus=[], nics=[], meta={})
    for token in tokens[1:]:
        if not token:
            raise TopologyEncodingError("empty token (two '/' in a row) in topology encoding")
        _apply(state, token[0], token[1:], token)
    order = [gpu.index for gpu in state.gpus]
    if len(set(order)) != len(order):
        raise TopologyEncodingError(f"duplicate GPU indices {order}")
    if (state.links is None) != (len(order) < 2):
        raise TopologyEncodingError("an L token is required exactly when there are 2+ GPUs")
    if (state.nic_levels is None) != (not state.nics or not order):
        raise TopologyEncodingError("a P token is required exactly when there are NICs and GPUs")
    names = [nic.name for nic in state.nics]
    if len(set(names)) != len(names):
        raise TopologyEncodingError(f"duplicate NIC names {names}")
    return Topology(
        gpus=tuple(state.gpus),
        links=_decode_links(state.links or "", order),
        nics=tuple(state.nics),
        nic_levels=_decode_nic_levels(state.nic_levels or "", state.nics, order),
        driver_version=state.meta.get("D"),
        cuda_version=state.meta.get("C"),
        source=state.meta.get("R", "unknown"),
    )
