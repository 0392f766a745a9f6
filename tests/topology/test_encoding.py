"""Compact topology encoding: exact round trip, Mesos-safe charset, clean errors."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc.errors import TopologyEncodingError
from dlc.topology.encoding import VALUE_RE, decode_topology, encode_topology
from dlc.topology.model import Gpu, Nic, P2PStatus, PairLink, PcieLevel, Topology
from dlc.topology.parse_topo import parse_topo_m
from tests.fixture_files import complete_topo_files, truncated_topo_files

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXTURES = complete_topo_files() + truncated_topo_files()
TOPOLOGIES = [parse_topo_m(p.read_text(), allow_truncated=True) for p in FIXTURES]


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=[p.stem for p in FIXTURES])
def test_fixture_round_trips_exactly(topo: Topology):
    text = encode_topology(topo)
    assert VALUE_RE.fullmatch(text)
    assert decode_topology(text) == topo


@pytest.mark.parametrize(
    "name, limit",
    [("dgx1-v100_nv1-nv2_mlx5_oneflow", 120), ("hgx-a100-80gb_nv12_8nic-roce_nic-legend", 260)],
    ids=["dgx1-v100", "hgx-a100-8nic"],
)
def test_encoding_is_compact(name: str, limit: int):
    topo = TOPOLOGIES[[p.stem for p in FIXTURES].index(name)]
    assert len(encode_topology(topo)) <= limit


def _sixteen_gpu() -> Topology:
    """A 16-GPU NVSwitch box with full NVML facts, 8 NICs, P2P and measured bandwidth."""
    gpus = tuple(
        Gpu(
            index=i,
            model="Tesla V100-SXM3-32GB",
            uuid=f"GPU-{i:08x}-1c2d-3e4f-5a6b-7c8d9e0f{i:04x}",
            pci_bus_id=f"00000000:{0x34 + i:02X}:00.0",
            minor=i,
            memory_mib=32768,
            cpu_affinity="0-23,48-71" if i < 8 else "24-47,72-95",
            numa_node=0 if i < 8 else 1,
        )
        for i in range(16)
    )
    links = {
        (a, b): PairLink(
            a, b, PcieLevel.NODE if (a < 8) == (b < 8) else PcieLevel.SYS, 6, P2PStatus.OK, 132.5
        )
        for a in range(16)
        for b in range(a + 1, 16)
    }
    nics = tuple(Nic(f"mlx5_{i}") for i in range(8))
    levels = {
        (n.name, g): PcieLevel.PIX if g // 2 == i else PcieLevel.SYS
        for i, n in enumerate(nics)
        for g in range(16)
    }
    return Topology(gpus, links, nics, levels, "535.129.03", "12.2", "nvml")


def test_sixteen_gpu_round_trip_and_length():
    topo = _sixteen_gpu()
    text = encode_topology(topo)
    assert decode_topology(text) == topo
    # uuids and bus ids dominate (16 x ~60 chars); links and NIC levels run-length encode
    assert len(text) <= 1410
    assert "/LN6om132.5-7S6om132.5-8" in text and "/PI-2S-16I-2" in text


# ---- property tests -----------------------------------------------------------------

_opt_text = st.none() | st.text(max_size=24)
_opt_int = st.none() | st.integers(-(10**12), 10**12)


@st.composite
def _gpu_fields(draw, index: int) -> dict:
    return dict(
        model=draw(_opt_text),
        uuid=draw(_opt_text),
        pci_bus_id=draw(_opt_text),
        minor=draw(_opt_int),
        memory_mib=draw(_opt_int),
        cpu_affinity=draw(_opt_text),
        numa_node=draw(_opt_int),
        gpu_numa_id=draw(_opt_int),
    )


@st.composite
def topologies(draw) -> Topology:
    topo = draw(st.sampled_from(TOPOLOGIES))
    gpus = tuple(
        replace(g, **draw(_gpu_fields(g.index))) if draw(st.booleans()) else g for g in topo.gpus
    )
    topo = replace(topo, gpus=gpus)
    keys = sorted(topo.links)
    if keys:
        chosen = draw(st.lists(st.sampled_from(keys), max_size=len(keys)))
        status = {k: draw(st.sampled_from(list(P2PStatus))) for k in chosen}
        topo = topo.with_p2p(status)
        chosen = draw(st.lists(st.sampled_from(keys), max_size=len(keys)))
        gbps = st.floats(min_value=0, max_value=1e6, allow_nan=False) | st.integers(0, 1000)
        topo = topo.with_measured({k: draw(gbps) for k in chosen})
        dropped = draw(st.lists(st.sampled_from(keys), max_size=2))
        links = {k: v for k, v in topo.links.items() if k not in dropped}
        topo = replace(topo, links=links)
    return replace(
        topo,
        driver_version=draw(_opt_text),
        cuda_version=draw(_opt_text),
        source=draw(st.sampled_from(["topo-m", "nvml", "unknown", "x y/z_"])),
        nics=tuple(replace(n, alias=draw(_opt_text)) for n in topo.nics),
    )


@PROPS
@given(topologies())
def test_round_trip_property(topo: Topology):
    text = encode_topology(topo)
    assert VALUE_RE.fullmatch(text), text
    assert decode_topology(text) == topo


@PROPS
@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_encoding_error(text: str):
    try:
        decode_topology(text)
    except TopologyEncodingError as err:
        assert str(err)


@PROPS
@given(topologies(), st.data())
def test_mutated_encoding_only_raises_encoding_error(topo: Topology, data):
    text = encode_topology(topo)
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 6)))
    new = data.draw(st.text(alphabet="T1/GQLPxSZ0-9_.mEWNA", max_size=4))
    with contextlib.suppress(TopologyEncodingError):
        decode_topology(text[:i] + new + text[j:])


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "start with a letter"),
        ("T1/G/A0,1", "start with a letter"),
        ("T2/G", "unknown topology encoding"),
        ("T1/G/G/LS/LS", "unexpected token"),
        ("T1/G/G", "L token is required"),
        ("T1/G/G/LS-2", "more than 1 link codes"),
        ("T1/G/G/L", "0 link codes; expected 1"),
        ("T1/G/G/LQ", "bad link code"),
        ("T1/G/Mbad_zz", "bad escape"),
        ("T1/G/Nfour", "expected an integer"),
        ("T1/G/QZ", "Q needs one GPU field tag"),
        ("T1/Mx", "must follow its GPU"),
        ("T1/G/Eeth0", "P token is required"),
        ("T1/G/Eeth0/PIX", "P token must hold 1"),
        ("T1/G1/G1", "duplicate GPU indices"),
        ("T1//G", "empty token"),
    ],
    ids=[
        "empty",
        "comma",
        "version",
        "two-L",
        "missing-L",
        "too-many-links",
        "too-few-links",
        "bad-link-code",
        "bad-escape",
        "bad-int",
        "bad-Q",
        "field-before-gpu",
        "missing-P",
        "short-P",
        "duplicate-gpu",
        "empty-token",
    ],
)
def test_malformed_encoding(text: str, message: str):
    with pytest.raises(TopologyEncodingError, match=message):
        decode_topology(text)


@pytest.mark.parametrize(
    "topo, message",
    [
        (Topology(gpus=(Gpu(0), Gpu(0))), "duplicate GPU indices"),
        (Topology(gpus=(Gpu(0),), links={(0, 1): PairLink(0, 1)}), "fewer than 2 GPUs"),
        (
            Topology(gpus=(Gpu(0), Gpu(1)), links={(0, 1): PairLink(0, 1, measured_gbps=-1.0)}),
            "expected >= 0",
        ),
        (Topology(gpus=(Gpu(0), Gpu(1)), links={(0, 2): PairLink(0, 2)}), "GPUs the topology"),
        (Topology(gpus=(Gpu(-1),)), "non-negative"),
        (Topology(gpus=(Gpu(0, memory_mib="16G"),)), "memory_mib"),  # type: ignore[arg-type]
        ("not a topology", "expected a Topology"),
    ],
    ids=[
        "dup-gpu",
        "link-without-pair",
        "negative-gbps",
        "stray-link",
        "negative-index",
        "bad-field-type",
        "not-topology",
    ],
)
def test_unencodable_topology(topo, message: str):
    with pytest.raises(TopologyEncodingError, match=message):
        encode_topology(topo)
