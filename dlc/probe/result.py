"""The probe's JSON output as plain data, and its strict reader.

The native probe (``native/p2p_probe``) prints one JSON document (schema version 1,
see its README) or, when it cannot measure, a one-line error document
``{"version": 1, "error": {"exit_code", "kind", "message", ...}}``.
:func:`parse_probe_json` turns the first into a :class:`ProbeResult` and the
second into a :class:`~dlc.errors.ProbeRunError`; anything malformed raises
:class:`~dlc.errors.ProbeOutputError` naming the JSON path of the bad field.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dlc.errors import ProbeOutputError, ProbeRunError

SCHEMA_VERSION = 1

#: JSON keys of the measured figures of a pair (GB/s or microseconds; each may be null)
FIGURE_KEYS: tuple[str, ...] = (
    "uni_gbps_p2p",
    "uni_gbps_nop2p",
    "bidi_gbps_p2p",
    "bidi_gbps_nop2p",
    "latency_us_p2p",
    "latency_us_nop2p",
)


#: JSON keys of a device's single-GPU figures (``devices[i].local``; probe 1.1.0 and later)
LOCAL_KEYS: tuple[str, ...] = (
    "d2d_gbps",
    "h2d_gbps",
    "d2h_gbps",
    "h2d_latency_us",
    "d2h_latency_us",
)


@dataclass(frozen=True)
class ProbeLocal:
    """One GPU on its own: copies within its memory and to/from pinned host memory.

    GB/s count the bytes copied once (a device-to-device copy reads and writes each byte,
    so the memory traffic is twice ``d2d_gbps``); latencies are per small copy.
    """

    d2d_gbps: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    h2d_latency_us: float | None = None
    d2h_latency_us: float | None = None


@dataclass(frozen=True)
class ProbeDevice:
    """One GPU the probe measured (CUDA ordinal in PCI bus order)."""

    index: int
    name: str
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    local: ProbeLocal | None = None  #: single-GPU figures (``None`` from probes before 1.1)


@dataclass(frozen=True)
class ProbePair:
    """Measurements of one ordered pair ``src -> dst``.

    Bandwidths are GB/s (10^9 bytes/s); ``bidi_*`` is the sum of both directions.
    ``*_p2p`` figures are ``None`` when peer access was not enabled.
    """

    src: int
    dst: int
    can_access_peer: bool
    p2p_enabled: bool
    uni_gbps_p2p: float | None = None
    uni_gbps_nop2p: float | None = None
    bidi_gbps_p2p: float | None = None
    bidi_gbps_nop2p: float | None = None
    latency_us_p2p: float | None = None
    latency_us_nop2p: float | None = None
    data_ok: bool | None = None

    @property
    def uni_gbps(self) -> float | None:
        """The one-way bandwidth this pair really gets: P2P when enabled, else staged."""
        return self.uni_gbps_p2p if self.p2p_enabled else self.uni_gbps_nop2p

    @property
    def bidi_gbps(self) -> float | None:
        """Two-way bandwidth on the path the pair really uses."""
        return self.bidi_gbps_p2p if self.p2p_enabled else self.bidi_gbps_nop2p

    @property
    def latency_us(self) -> float | None:
        """Small-copy latency on the path the pair really uses."""
        return self.latency_us_p2p if self.p2p_enabled else self.latency_us_nop2p


@dataclass(frozen=True)
class ProbeResult:
    """A whole probe run: devices, ordered pairs and the run's parameters."""

    devices: tuple[ProbeDevice, ...]
    pairs: tuple[ProbePair, ...]
    params: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    tool: str | None = None
    #: facts about the run that are not problems (e.g. one GPU: no pairs to measure)
    notes: tuple[str, ...] = ()

    def device(self, index: int) -> ProbeDevice:
        """The measured device with CUDA ordinal ``index``.

        Raises:
            KeyError: the probe did not measure that GPU.
        """
        for dev in self.devices:
            if dev.index == index:
                return dev
        raise KeyError(f"the probe did not measure GPU {index}")

    def to_dict(self) -> dict[str, Any]:
        """The result as a schema-1 document (what :func:`parse_probe_json` reads)."""
        doc: dict[str, Any] = {
            "version": SCHEMA_VERSION,
            "devices": [asdict(d) for d in self.devices],
            "pairs": [asdict(p) for p in self.pairs],
            "params": dict(self.params),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }
        if self.tool is not None:
            doc["tool"] = self.tool
        return doc


def parse_probe_json(text: str) -> ProbeResult:
    """Read the probe's output.

    Args:
        text: what the probe printed on stdout (or a saved copy).

    Returns:
        The validated result.

    Raises:
        ProbeRunError: the text is the probe's error document (no GPU, no driver, ...);
            carries its ``code`` and ``kind``.
        ProbeOutputError: the text is not valid probe JSON; ``field`` names the culprit.
    """
    if not text.strip():
        raise ProbeOutputError("(document)", "empty output: expected the probe's JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProbeOutputError(
            "(document)", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(doc, dict):
        raise ProbeOutputError("(document)", f"expected an object, got {_kind(doc)}")
    version = doc.get("version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ProbeOutputError(
            "version", f"expected {SCHEMA_VERSION}, got {version!r}; rebuild the probe"
        )
    if "error" in doc:
        raise _run_error(doc["error"])
    devices = tuple(_device(d, f"devices[{i}]") for i, d in enumerate(_list(doc, "devices")))
    known = {d.index for d in devices}
    if len(known) != len(devices):
        raise ProbeOutputError("devices", "a device index appears twice")
    pairs = tuple(_pair(p, f"pairs[{i}]", known) for i, p in enumerate(_list(doc, "pairs")))
    seen: set[tuple[int, int]] = set()
    for i, pair in enumerate(pairs):
        if (pair.src, pair.dst) in seen:
            raise ProbeOutputError(f"pairs[{i}]", f"pair {pair.src}->{pair.dst} appears twice")
        seen.add((pair.src, pair.dst))
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise ProbeOutputError("params", f"expected an object, got {_kind(params)}")
    warnings = doc.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise ProbeOutputError("warnings", "expected a list of strings")
    notes = doc.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ProbeOutputError("notes", "expected a list of strings")
    tool = doc.get("tool")
    return ProbeResult(
        devices,
        pairs,
        params,
        tuple(warnings),
        tool if isinstance(tool, str) else None,
        tuple(notes),
    )


def _run_error(err: Any) -> ProbeRunError:
    if not isinstance(err, dict):
        raise ProbeOutputError("error", f"expected an object, got {_kind(err)}")
    message = err.get("message")
    code = err.get("exit_code")
    if not isinstance(message, str) or not message:
        raise ProbeOutputError("error.message", "expected a non-empty string")
    if not isinstance(code, int) or isinstance(code, bool):
        raise ProbeOutputError("error.exit_code", f"expected an integer, got {code!r}")
    kind = err["kind"] if isinstance(err.get("kind"), str) else "unknown"
    hint = {
        "no_device": "; without a GPU here, pass --probe-json FILE with a saved run",
        "no_driver": "; without a driver here, pass --probe-json FILE with a saved run",
    }.get(kind, "")
    return ProbeRunError(f"P2P probe: {message}{hint}", code, kind)


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    if key not in doc:
        raise ProbeOutputError(key, "missing")
    value = doc[key]
    if not isinstance(value, list):
        raise ProbeOutputError(key, f"expected a list, got {_kind(value)}")
    return value


def _device(item: Any, where: str) -> ProbeDevice:
    if not isinstance(item, dict):
        raise ProbeOutputError(where, f"expected an object, got {_kind(item)}")
    index = _int(item, "index", where)
    name = item.get("name")
    if not isinstance(name, str):
        raise ProbeOutputError(f"{where}.name", f"expected a string, got {name!r}")
    bus = _opt_str(item, "pci_bus_id", where)
    cc = _opt_str(item, "compute_capability", where)
    local = item.get("local")
    if local is not None:
        if not isinstance(local, dict):
            raise ProbeOutputError(f"{where}.local", f"expected an object, got {_kind(local)}")
        local = ProbeLocal(**{k: _figure(local, k, f"{where}.local") for k in LOCAL_KEYS})
    return ProbeDevice(index, name, bus, cc, local)


def _pair(item: Any, where: str, known: set[int]) -> ProbePair:
    if not isinstance(item, dict):
        raise ProbeOutputError(where, f"expected an object, got {_kind(item)}")
    src = _int(item, "src", where)
    dst = _int(item, "dst", where)
    for key, gpu in (("src", src), ("dst", dst)):
        if gpu not in known:
            raise ProbeOutputError(f"{where}.{key}", f"GPU {gpu} is not in devices")
    if src == dst:
        raise ProbeOutputError(f"{where}.dst", f"same GPU as src ({src})")
    can = _bool(item, "can_access_peer", where)
    enabled = _bool(item, "p2p_enabled", where)
    if enabled and not can:
        raise ProbeOutputError(f"{where}.p2p_enabled", "true although can_access_peer is false")
    figures = {key: _figure(item, key, where) for key in FIGURE_KEYS}
    if figures["uni_gbps_nop2p"] is None:
        raise ProbeOutputError(f"{where}.uni_gbps_nop2p", "missing: every pair is measured")
    if enabled and figures["uni_gbps_p2p"] is None:
        raise ProbeOutputError(f"{where}.uni_gbps_p2p", "null although p2p_enabled is true")
    data_ok = item.get("data_ok")
    if data_ok is not None and not isinstance(data_ok, bool):
        raise ProbeOutputError(f"{where}.data_ok", f"expected true, false or null, got {data_ok!r}")
    return ProbePair(src, dst, can, enabled, data_ok=data_ok, **figures)


def _int(item: dict[str, Any], key: str, where: str) -> int:
    value = item.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProbeOutputError(f"{where}.{key}", f"expected a GPU index >= 0, got {value!r}")
    return value


def _bool(item: dict[str, Any], key: str, where: str) -> bool:
    value = item.get(key)
    if not isinstance(value, bool):
        raise ProbeOutputError(f"{where}.{key}", f"expected true or false, got {value!r}")
    return value


def _opt_str(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise ProbeOutputError(f"{where}.{key}", f"expected a string or null, got {value!r}")
    return value


def _figure(item: dict[str, Any], key: str, where: str) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ProbeOutputError(f"{where}.{key}", f"expected a number > 0 or null, got {value!r}")
    return float(value)


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), repr(value))
