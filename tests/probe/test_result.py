"""parse_probe_json: the synthetic DGX-1 sample, malformed documents, error documents."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlc.errors import ProbeOutputError, ProbeRunError
from dlc.probe.result import FIGURE_KEYS, ProbeDevice, ProbePair, ProbeResult, parse_probe_json

from .helpers import raw_pair, sample_doc


def test_sample_parses_every_device_and_ordered_pair(sample_text: str) -> None:
    doc = json.loads(sample_text)
    result = parse_probe_json(sample_text)
    n = len(doc["devices"])
    assert [d.index for d in result.devices] == list(range(n))
    assert len(result.pairs) == n * (n - 1)
    assert result.device(3).pci_bus_id == doc["devices"][3]["pci_bus_id"]
    assert result.params["size_bytes"] == doc["params"]["size_bytes"]


@pytest.mark.parametrize(
    ("src", "dst", "p2p"),
    [
        pytest.param(0, 3, True, id="nv2-pair-uses-p2p-figure"),
        pytest.param(1, 0, True, id="nv1-pair-uses-p2p-figure"),
        pytest.param(0, 5, False, id="sys-pair-without-p2p-uses-staged-figure"),
    ],
)
def test_effective_figures_follow_p2p_enabled(
    sample_text: str, src: int, dst: int, p2p: bool
) -> None:
    raw = raw_pair(json.loads(sample_text), src, dst)
    pair = next(p for p in parse_probe_json(sample_text).pairs if (p.src, p.dst) == (src, dst))
    suffix = "p2p" if p2p else "nop2p"
    assert pair.p2p_enabled is p2p
    assert pair.uni_gbps == raw[f"uni_gbps_{suffix}"]
    assert pair.bidi_gbps == raw[f"bidi_gbps_{suffix}"]
    assert pair.latency_us == raw[f"latency_us_{suffix}"]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting ``path`` (``"pairs.2.uni_gbps_p2p"``) to ``value``."""

    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return mutate


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.pop(key)


def _duplicate_first(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc[key].insert(1, dict(doc[key][0]))


def _null_p2p_of_first_pair(doc: dict[str, Any]) -> None:
    doc["pairs"][0]["uni_gbps_p2p"] = None  # pair 0 -> 1 is NV1 with P2P enabled


def _enable_on_sys_pair(doc: dict[str, Any]) -> None:
    raw_pair(doc, 0, 5)["p2p_enabled"] = True


# Index of pair 0->5 (SYS, no P2P) in the sample: pairs are src-major, dst ascending.
SYS_PAIR = 4

BAD_DOCUMENTS = [
    pytest.param(_drop("version"), "version", id="version-missing"),
    pytest.param(_set("version", 2), "version", id="version-from-the-future"),
    pytest.param(_set("version", True), "version", id="version-bool"),
    pytest.param(_drop("devices"), "devices", id="devices-missing"),
    pytest.param(_set("devices", {}), "devices", id="devices-not-a-list"),
    pytest.param(_set("devices.1.index", "1"), "devices[1].index", id="device-index-string"),
    pytest.param(_set("devices.1.index", -1), "devices[1].index", id="device-index-negative"),
    pytest.param(_set("devices.2.name", None), "devices[2].name", id="device-name-null"),
    pytest.param(_set("devices.2.pci_bus_id", 6), "devices[2].pci_bus_id", id="bus-id-number"),
    pytest.param(_duplicate_first("devices"), "devices", id="device-listed-twice"),
    pytest.param(_drop("pairs"), "pairs", id="pairs-missing"),
    pytest.param(_set("pairs.0", [0, 1]), "pairs[0]", id="pair-not-an-object"),
    pytest.param(_set("pairs.0.src", 9), "pairs[0].src", id="src-not-a-device"),
    pytest.param(_set("pairs.0.dst", 0), "pairs[0].dst", id="dst-equals-src"),
    pytest.param(_set("pairs.0.dst", None), "pairs[0].dst", id="dst-null"),
    pytest.param(_set("pairs.2.uni_gbps_p2p", -3.0), "pairs[2].uni_gbps_p2p", id="negative"),
    pytest.param(_set("pairs.2.uni_gbps_p2p", 0), "pairs[2].uni_gbps_p2p", id="zero-bandwidth"),
    pytest.param(_set("pairs.2.bidi_gbps_p2p", "fast"), "pairs[2].bidi_gbps_p2p", id="string"),
    pytest.param(_set("pairs.2.latency_us_p2p", True), "pairs[2].latency_us_p2p", id="bool"),
    pytest.param(_set("pairs.3.can_access_peer", 1), "pairs[3].can_access_peer", id="int-flag"),
    pytest.param(_set("pairs.3.p2p_enabled", "yes"), "pairs[3].p2p_enabled", id="str-flag"),
    pytest.param(_enable_on_sys_pair, f"pairs[{SYS_PAIR}].p2p_enabled", id="enabled-not-can"),
    pytest.param(_null_p2p_of_first_pair, "pairs[0].uni_gbps_p2p", id="enabled-without-figure"),
    pytest.param(_set("pairs.5.uni_gbps_nop2p", None), "pairs[5].uni_gbps_nop2p", id="no-nop2p"),
    pytest.param(_set("pairs.5.data_ok", "yes"), "pairs[5].data_ok", id="data-ok-string"),
    pytest.param(_duplicate_first("pairs"), "pairs[1]", id="pair-listed-twice"),
    pytest.param(_set("params", []), "params", id="params-not-an-object"),
    pytest.param(_set("warnings", [1]), "warnings", id="warnings-not-strings"),
]


@pytest.mark.parametrize(("mutate", "field"), BAD_DOCUMENTS)
def test_bad_document_names_the_field(mutate: Callable, field: str) -> None:
    doc = sample_doc()
    mutate(doc)
    with pytest.raises(ProbeOutputError) as info:
        parse_probe_json(json.dumps(doc))
    assert info.value.field == field
    assert str(info.value).startswith(f"probe JSON: {field}: ")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("", "empty output", id="empty"),
        pytest.param("  \n", "empty output", id="blank"),
        pytest.param("Segmentation fault", "not JSON", id="not-json"),
        pytest.param('{"version": 1, "devices": [', "not JSON", id="cut-off"),
        pytest.param("[1, 2]", "expected an object", id="list"),
        pytest.param('{"version": 1, "error": "boom"}', "error", id="error-not-object"),
        pytest.param('{"version": 1, "error": {"exit_code": 3}}', "error.message", id="no-msg"),
    ],
)
def test_unreadable_text_is_a_probe_output_error(text: str, needle: str) -> None:
    with pytest.raises(ProbeOutputError, match=needle.replace(".", r"\.")):
        parse_probe_json(text)


def test_nan_figure_is_rejected() -> None:
    text = json.dumps(sample_doc()).replace(
        '"bidi_gbps_nop2p": ', '"bidi_gbps_nop2p": NaN, "x": ', 1
    )
    with pytest.raises(ProbeOutputError, match=r"pairs\[0\]\.bidi_gbps_nop2p"):
        parse_probe_json(text)


@pytest.mark.parametrize(
    ("code", "kind", "hint"),
    [
        pytest.param(3, "no_device", "without a GPU here", id="no-device"),
        pytest.param(4, "no_driver", "without a driver here", id="no-driver"),
        pytest.param(1, "cuda_error", "", id="cuda-call-failed"),
    ],
)
def test_error_document_becomes_probe_run_error(code: int, kind: str, hint: str) -> None:
    message = f"cudaGetDeviceCount(&count) failed: message for {kind}"
    line = json.dumps(
        {"version": 1, "error": {"exit_code": code, "kind": kind, "message": message}}
    )
    with pytest.raises(ProbeRunError) as info:
        parse_probe_json(line)
    assert (info.value.code, info.value.kind) == (code, kind)
    assert message in str(info.value)
    assert hint in str(info.value)


_figure = st.one_of(st.none(), st.floats(min_value=0.001, max_value=5000, allow_nan=False))


@st.composite
def _results(draw: st.DrawFn) -> ProbeResult:
    indices = draw(st.lists(st.integers(0, 15), min_size=1, max_size=5, unique=True))
    devices = tuple(
        ProbeDevice(i, f"GPU model {i}", f"0000:{i + 16:02X}:00.0", "9.0") for i in indices
    )
    pairs = []
    for src in indices:
        for dst in indices:
            if src == dst:
                continue
            can = draw(st.booleans())
            enabled = can and draw(st.booleans())
            figures = {key: draw(_figure) for key in FIGURE_KEYS}
            figures["uni_gbps_nop2p"] = draw(st.floats(min_value=0.001, max_value=100))
            if enabled:
                figures["uni_gbps_p2p"] = draw(st.floats(min_value=0.001, max_value=1000))
            data_ok = draw(st.sampled_from([None, True, False]))
            pairs.append(ProbePair(src, dst, can, enabled, data_ok=data_ok, **figures))
    return ProbeResult(devices, tuple(pairs), {"size_bytes": 1 << 20}, ("a warning",), "t 1")


@given(_results())
def test_to_dict_round_trips_through_the_parser(result: ProbeResult) -> None:
    assert parse_probe_json(json.dumps(result.to_dict())) == result
