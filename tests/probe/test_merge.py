"""merge_measurements / compare_with_nominal / measured_topology on the DGX-1 V100."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dlc.probe.runner as runner
from dlc.errors import ProbeError
from dlc.probe import (
    compare_with_nominal,
    measured_topology,
    merge_measurements,
    parse_probe_json,
)
from dlc.probe.result import ProbeDevice, ProbePair, ProbeResult
from dlc.topology.bandwidth import STAGED_GBPS, estimate_gbps, nvlink_gbps
from dlc.topology.model import Gpu, P2PStatus, PairLink, PcieLevel, Topology
from dlc.topology.render.jsonio import topology_to_json

from .helpers import SAMPLE_PATH, raw_pair, sample_doc


def _effective(raw: dict) -> float:
    return raw["uni_gbps_p2p"] if raw["p2p_enabled"] else raw["uni_gbps_nop2p"]


def test_measured_figure_replaces_the_estimate_for_every_pair(
    dgx1: Topology, sample_text: str
) -> None:
    doc = json.loads(sample_text)
    merged = merge_measurements(dgx1, parse_probe_json(sample_text))
    for (a, b), link in merged.links.items():
        slower = min(_effective(raw_pair(doc, a, b)), _effective(raw_pair(doc, b, a)))
        assert link.measured_gbps == slower
        assert estimate_gbps(link) == slower
        # the links' shape is untouched
        assert (link.nvlinks, link.pcie_level) == (
            dgx1.links[(a, b)].nvlinks,
            dgx1.links[(a, b)].pcie_level,
        )


@pytest.mark.parametrize(
    ("pair", "status"),
    [
        pytest.param((0, 3), P2PStatus.OK, id="nv2-can-access-peer-ok"),
        pytest.param((0, 1), P2PStatus.OK, id="nv1-can-access-peer-ok"),
        pytest.param((0, 5), P2PStatus.NS, id="sys-cannot-access-peer-ns"),
        pytest.param((3, 4), P2PStatus.NS, id="cross-socket-ns"),
    ],
)
def test_unknown_p2p_status_comes_from_can_access_peer(
    dgx1: Topology, sample_text: str, pair: tuple[int, int], status: P2PStatus
) -> None:
    assert dgx1.links[pair].p2p is P2PStatus.U
    merged = merge_measurements(dgx1, parse_probe_json(sample_text))
    assert merged.links[pair].p2p is status


def test_links_rank_by_measured_bandwidth(dgx1: Topology, sample_text: str) -> None:
    """What a ranking allocator sees: NV2 > NV1 > SYS on the sample, and a degraded
    NV2 link (measured lower than an NV1 link) drops below it."""
    merged = merge_measurements(dgx1, parse_probe_json(sample_text))
    ranked = sorted([(0, 1), (0, 3), (0, 5)], key=lambda k: -estimate_gbps(merged.links[k]))
    assert ranked == [(0, 3), (0, 1), (0, 5)]

    doc = sample_doc()
    for src, dst in ((0, 3), (3, 0)):
        raw_pair(doc, src, dst)["uni_gbps_p2p"] = 11.0  # one of the two NVLinks down
    degraded = merge_measurements(dgx1, parse_probe_json(json.dumps(doc)))
    ranked = sorted([(0, 1), (0, 3)], key=lambda k: -estimate_gbps(degraded.links[k]))
    assert ranked == [(0, 1), (0, 3)]
    # the report/JSON shows the measured figure, not the NVLink estimate
    doc_link = next(x for x in topology_to_json(degraded)["links"] if (x["a"], x["b"]) == (0, 3))
    assert (doc_link["gbps"], doc_link["gbps_source"]) == (11.0, "measured")


def test_pair_with_p2p_refused_uses_the_staged_figure(dgx1: Topology) -> None:
    doc = sample_doc()
    for src, dst in ((0, 1), (1, 0)):
        raw = raw_pair(doc, src, dst)
        raw["p2p_enabled"] = False  # e.g. cudaDeviceEnablePeerAccess failed
        raw["uni_gbps_p2p"] = None
    merged = merge_measurements(dgx1, parse_probe_json(json.dumps(doc)))
    expected = min(raw_pair(doc, 0, 1)["uni_gbps_nop2p"], raw_pair(doc, 1, 0)["uni_gbps_nop2p"])
    assert merged.links[(0, 1)].measured_gbps == expected


def _pcie_topology(
    statuses: dict[tuple[int, int], P2PStatus], bus_ids: list[str | None]
) -> Topology:
    gpus = tuple(Gpu(i, model="NVIDIA RTX 5090", pci_bus_id=bus) for i, bus in enumerate(bus_ids))
    links = {
        (a, b): PairLink(a, b, PcieLevel.PHB, p2p=statuses.get((a, b), P2PStatus.U))
        for a in range(len(gpus))
        for b in range(a + 1, len(gpus))
    }
    return Topology(gpus, links, source="test")


def _result(
    bus_ids: list[str | None], gbps: dict[tuple[int, int], float], can: bool
) -> ProbeResult:
    devices = tuple(ProbeDevice(i, "NVIDIA RTX 5090", bus) for i, bus in enumerate(bus_ids))
    pairs = tuple(
        ProbePair(s, d, can, can, uni_gbps_p2p=v if can else None, uni_gbps_nop2p=v)
        for (s, d), v in gbps.items()
    )
    return ProbeResult(devices, pairs)


def test_known_p2p_status_is_kept() -> None:
    topo = _pcie_topology({(0, 1): P2PStatus.GNS}, [None, None])
    merged = merge_measurements(topo, _result([None, None], {(0, 1): 8.0, (1, 0): 9.0}, True))
    assert merged.links[(0, 1)].p2p is P2PStatus.GNS
    assert merged.links[(0, 1)].measured_gbps == 8.0


def test_gpus_are_matched_by_pci_bus_id_when_both_sides_know_it() -> None:
    # The topology lists the GPUs in another order than the probe saw them.
    topo = _pcie_topology({}, ["00000000:41:00.0", "00000000:01:00.0", "00000000:81:00.0"])
    probe_bus = ["0000:01:00.0", "0000:41:00.0", "0000:81:00.0"]
    gbps = {(0, 1): 5.0, (1, 0): 5.0, (0, 2): 7.0, (2, 0): 7.0, (1, 2): 9.0, (2, 1): 9.0}
    merged = merge_measurements(topo, _result(probe_bus, gbps, True))
    # probe 0 is topology GPU1, probe 1 is GPU0, probe 2 is GPU2
    assert merged.links[(0, 1)].measured_gbps == 5.0
    assert merged.links[(1, 2)].measured_gbps == 7.0
    assert merged.links[(0, 2)].measured_gbps == 9.0


@pytest.mark.parametrize(
    ("topo_bus", "probe_bus", "needle"),
    [
        pytest.param([None, None], [None, None, None], "probe GPU 2 is not", id="extra-index"),
        pytest.param(
            ["00000000:01:00.0", "00000000:02:00.0"],
            ["0000:01:00.0", "0000:03:00.0"],
            r"probe GPU 1 \(0000:03:00.0\) is not",
            id="unknown-bus-id",
        ),
    ],
)
def test_probe_of_another_machine_is_refused(
    topo_bus: list[str | None], probe_bus: list[str | None], needle: str
) -> None:
    topo = _pcie_topology({}, topo_bus)
    gbps = {(s, d): 5.0 for s in range(len(probe_bus)) for d in range(len(probe_bus)) if s != d}
    with pytest.raises(ProbeError, match=needle):
        merge_measurements(topo, _result(probe_bus, gbps, True))


def test_comparison_rows_against_nominal(dgx1: Topology, sample_text: str) -> None:
    result = parse_probe_json(sample_text)
    rows = {(r.a, r.b): r for r in compare_with_nominal(dgx1, result)}
    assert len(rows) == 28
    per_link = nvlink_gbps(result.device(0).name)  # topo -m has no model: the probe's
    expectations = {(0, 3): ("NV2", True, 2 * per_link), (0, 1): ("NV1", True, per_link)}
    expectations[(0, 5)] = ("SYS", False, STAGED_GBPS)  # P2P refused -> staged estimate
    doc = json.loads(sample_text)
    for key, (label, p2p, nominal) in expectations.items():
        row = rows[key]
        measured = min(_effective(raw_pair(doc, *key)), _effective(raw_pair(doc, *key[::-1])))
        assert (row.label, row.p2p, row.nominal_gbps) == (label, p2p, nominal)
        assert row.measured_gbps == measured
        assert row.ratio == pytest.approx(measured / nominal)
        assert row.pair == f"GPU{key[0]}-GPU{key[1]}"
    # the sample sits just under the NVLink nominal rate
    assert 0.9 < rows[(0, 3)].ratio < 1.0


def test_measured_topology_reads_a_saved_run(dgx1: Topology, sample_text: str) -> None:
    expected = merge_measurements(dgx1, parse_probe_json(sample_text))
    assert measured_topology(dgx1, SAMPLE_PATH) == expected
    assert measured_topology(dgx1, str(SAMPLE_PATH)).links == expected.links


def test_measured_topology_runs_the_probe_without_a_file(
    dgx1: Topology, sample_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(runner, "build_probe", lambda: calls.append("build") or Path("/x/probe"))

    def fake_run(binary: Path) -> ProbeResult:
        calls.append(f"run {binary}")
        return parse_probe_json(sample_text)

    monkeypatch.setattr(runner, "run_probe", fake_run)
    merged = measured_topology(dgx1)
    assert calls == ["build", "run /x/probe"]
    assert merged.links[(0, 3)].measured_gbps is not None


def test_unreadable_probe_file_names_the_option(tmp_path: Path, dgx1: Topology) -> None:
    with pytest.raises(ProbeError, match=r"^--probe-json: cannot read .*missing\.json"):
        measured_topology(dgx1, tmp_path / "missing.json")
