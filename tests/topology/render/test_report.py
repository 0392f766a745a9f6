"""The topology report (analysis + rich rendering) and the ``--json`` document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from dlc.errors import DlcError, TopologyParseError
from dlc.topology.model import Gpu, Nic, P2PStatus, PairLink, PcieLevel, Topology
from dlc.topology.parse_topo import load_topology_text
from dlc.topology.render.jsonio import SCHEMA, topology_from_json, topology_to_json
from dlc.topology.render.report import (
    analyze,
    describe_nvlink,
    link_style,
    nvlink_partners,
    render_report,
)
from tests.fixture_files import FIXTURE_DIR, complete_topo_files, truncated_topo_files

DGX1 = "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
H100 = "hgx-h100_nv18_gpu-numa-id_thunderkittens.txt"
BRIDGED = "pcie-8gpu_nv12-bridge-pairs_non-adjacent_all-sys_tabs_k8s-dp-546.txt"
RTX5090 = "rtx5090-2gpu_phb_tabs.txt"


def load(name: str | Path) -> Topology:
    """A fixture with its ``.p2p.txt`` sibling merged in when there is one."""
    path = FIXTURE_DIR / name
    p2p = path.with_suffix(".p2p.txt")
    return load_topology_text(path.read_text(), p2p.read_text() if p2p.exists() else None)


def report_text(topo: Topology, width: int = 100) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render_report(analyze(topo), console)
    return console.export_text()


def gpus(*sets: str) -> list[frozenset[int]]:
    return [frozenset(int(c) for c in s.split(",")) for s in sets]


def test_fixture_set_is_there():
    # An empty directory would silently turn the parametrized tests below into no tests.
    assert len(complete_topo_files()) >= 15


# ------------------------------------------------------------------ analysis

MACHINES = [
    pytest.param(
        DGX1,
        ["8 GPUs on 2 NUMA nodes", "1 NIC", "hybrid cube-mesh", "{0,1,2,3} {4,5,6,7}"],
        gpus("0,1,2,3,4,5,6,7"),
        gpus("0,1,2,3", "4,5,6,7", "0,4", "1,5", "2,6", "3,7"),
        id="dgx1-v100-cube-mesh",
    ),
    pytest.param(
        H100,
        ["8 GPUs on 2 NUMA nodes", "NVLink all-to-all", "NV18 between every pair", "all 8"],
        gpus("0,1,2,3,4,5,6,7"),
        gpus("0,1,2,3,4,5,6,7"),
        id="hgx-h100-nvswitch",
    ),
    pytest.param(
        BRIDGED,
        ["8 GPUs on 2 NUMA nodes", "4 pairs {0,2} {1,3} {4,5} {6,7} (NV12)"],
        gpus("0,2", "1,3", "4,5", "6,7"),
        gpus("0,2", "1,3", "4,5", "6,7"),
        id="pcie-bridge-pairs-non-adjacent",
    ),
    pytest.param(
        RTX5090,
        ["2 GPUs on 1 NUMA node", "no NVLink", "no P2P-capable pair (GNS)"],
        [],
        [],
        id="rtx5090-pair-no-p2p",
    ),
    pytest.param(
        "rtx3090-2gpu_nv4-bridge_lxc.txt",
        ["2 GPUs on 1 NUMA node", "NVLink NV4 between the two GPUs", "P2P between the two"],
        gpus("0,1"),
        gpus("0,1"),
        id="rtx3090-bridged-pair",
    ),
]


@pytest.mark.parametrize(("name", "phrases", "nvlink", "p2p"), MACHINES)
def test_analysis_finds_groups_and_summary(name, phrases, nvlink, p2p):
    facts = analyze(load(name))
    assert list(facts.nvlink_groups) == nvlink
    assert sorted(facts.p2p_groups, key=sorted) == sorted(p2p, key=sorted)
    for phrase in phrases:
        assert phrase in facts.summary
    assert "\n" not in facts.summary


@pytest.mark.parametrize(("name", "phrases", "nvlink", "p2p"), MACHINES)
def test_report_shows_summary_groups_and_every_gpu(name, phrases, nvlink, p2p):
    topo = load(name)
    text = report_text(topo)
    flat = " ".join(text.split())  # the summary may wrap
    for phrase in phrases:
        assert phrase in flat
    groups_line = next(line for line in text.splitlines() if line.startswith("NVLink groups:"))
    for group in nvlink:
        assert "{" + ",".join(map(str, sorted(group))) + "}" in groups_line
    if not nvlink:
        assert groups_line.split(":", 1)[1].strip() == "none"
    tree_gpus = re.findall(r"[├└]── (GPU\d+)\b", text)
    assert sorted(tree_gpus) == sorted(g.name for g in topo.gpus)


@pytest.mark.parametrize(
    ("name", "gpu", "partners"),
    [
        pytest.param(DGX1, 3, "NV2→0,2 NV1→1,7", id="dgx1-gpu3-crosses-sockets"),
        pytest.param(H100, 5, "NV18→all 7", id="h100-all-partners"),
        pytest.param(BRIDGED, 1, "NV12→3", id="bridge-partner-not-adjacent"),
        pytest.param(RTX5090, 0, "", id="no-nvlink"),
    ],
)
def test_nvlink_partners_on_each_gpu(name, gpu, partners):
    topo = load(name)
    assert nvlink_partners(topo, gpu) == partners
    line = next(ln for ln in report_text(topo).splitlines() if re.search(rf"── GPU{gpu}\b", ln))
    assert (f"NVLink {partners}" in line) == bool(partners)


def test_dgx1_nic_listed_with_its_nearest_gpus():
    text = report_text(load(DGX1))
    assert re.search(r"mlx5_0\s+\{2,3\}\s+PIX", text)
    assert "NIC mlx5_0  nearest GPUs {2,3} (PIX)" in text


def test_affinity_shown_per_gpu():
    text = report_text(load(DGX1))
    for gpu in range(8):
        cpus = "0-11,24-35" if gpu < 4 else "12-23,36-47"
        assert re.search(rf"── GPU{gpu}\s+CPU {cpus}\b", text)


def _fixture_rows(path: Path) -> dict[str, list[str]]:
    """``GPUn -> [cell, ...]`` straight from the fixture text, for the GPU columns."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) > 1:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_link_matrix_reproduces_the_printed_labels(path):
    topo = load(path.name)
    text = report_text(topo, width=200)
    if len(topo.gpus) < 2:
        assert "link class" not in text  # one GPU: no pairs, no matrix
        return
    matrix = text.split("link class")[1].split("legend:")[0].splitlines()[2:]
    printed = _fixture_rows(path)
    n = len(topo.gpus)
    for row in matrix:
        name, *cells = row.split()
        # Old drivers print SOC for what newer ones call SYS; the report uses SYS.
        expected = ["SYS" if c == "SOC" else c for c in printed[name][:n]]
        assert [c.rstrip("!") for c in cells] == expected
        a = int(name.removeprefix("GPU"))
        for b, cell in zip(topo.gpu_indices, cells, strict=True):
            if a != b:
                assert cell.endswith("!") == (not topo.link(a, b).p2p_capable)


@pytest.mark.parametrize(
    ("link", "style"),
    [
        pytest.param(PairLink(0, 1, nvlinks=18), "bold green1", id="most-nvlinks-brightest"),
        pytest.param(PairLink(0, 1, nvlinks=1), "green4", id="one-nvlink-dim"),
        pytest.param(PairLink(0, 1, PcieLevel.PIX), "cyan", id="pix"),
        pytest.param(PairLink(0, 1, PcieLevel.PHB), "yellow", id="phb"),
        pytest.param(PairLink(0, 1, PcieLevel.SYS), "red", id="sys-red"),
        pytest.param(PairLink(0, 1), "dim", id="unknown"),
    ],
)
def test_link_style_by_class(link, style):
    assert link_style(link, max_nvlinks=18) == style


def test_bandwidth_matrix_marks_measured_and_estimated():
    topo = load(DGX1).with_measured({(0, 3): 47.6})
    text = report_text(topo)
    section = text.split("GB/s one direction")[1].split("groups")[0]
    row0 = next(line for line in section.splitlines() if line.startswith("GPU0"))
    assert row0.split() == ["GPU0", "X", "~25", "~25", "48", "~50", "~6", "~6", "~6"]
    assert "bold = measured" in text


def _sixteen_gpus() -> Topology:
    gpus = tuple(Gpu(i, cpu_affinity="0-23" if i < 8 else "24-47") for i in range(16))
    links = {(a, b): PairLink(a, b, nvlinks=6) for a in range(16) for b in range(a + 1, 16)}
    return Topology(gpus=gpus, links=links)


@pytest.mark.parametrize("width", [100, 80, 60])
@pytest.mark.parametrize(
    "topo",
    [pytest.param(_sixteen_gpus(), id="16-gpu-nvswitch"), pytest.param(load(DGX1), id="dgx1")],
)
def test_report_fits_the_terminal_width(topo, width):
    text = report_text(topo, width)
    assert max(len(line) for line in text.splitlines()) <= width
    matrix = text.split("link class")[1].split("legend:")[0]
    # Every GPU row appears once per column block and no cell is cut.
    rows = [line.split() for line in matrix.splitlines() if re.match(r"GPU\d+ ", line)]
    cells = [c for row in rows for c in row[1:]]
    assert cells.count("X") == len(topo.gpus)
    assert len(cells) == len(topo.gpus) ** 2
    assert set(cells) - {"X"} <= {"NV1", "NV2", "NV6", "SYS!"}


def test_describe_nvlink_partial_mesh():
    gpus = tuple(Gpu(i) for i in range(3))
    links = {
        (0, 1): PairLink(0, 1, nvlinks=2),
        (1, 2): PairLink(1, 2, nvlinks=2),
        (0, 2): PairLink(0, 2, PcieLevel.SYS),
    }
    topo = Topology(gpus=gpus, links=links)
    assert describe_nvlink(topo, tuple(analyze(topo).nvlink_groups)) == (
        "NVLink: {0,1,2} (2 of 3 pairs linked)"
    )


# ------------------------------------------------------------------ JSON document

TOP_KEYS = {
    "schema",
    "source",
    "driver_version",
    "cuda_version",
    "summary",
    "gpus",
    "nics",
    "links",
    "groups",
    "tree",
}
GPU_KEYS = {
    "index",
    "name",
    "model",
    "uuid",
    "pci_bus_id",
    "minor",
    "memory_mib",
    "cpu_affinity",
    "numa_node",
    "gpu_numa_id",
    "mig_mode",
    "vendor",
    "nvlink_partners",
}
LINK_KEYS = {
    "a",
    "b",
    "label",
    "pcie_level",
    "nvlinks",
    "p2p",
    "p2p_capable",
    "gbps",
    "gbps_source",
    "measured_gbps",
}
NIC_KEYS = {"name", "alias", "levels", "nearest_gpus", "nearest_level"}


def _tree_nodes(node: dict) -> list[dict]:
    return [node] + [n for child in node["children"] for n in _tree_nodes(child)]


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_json_schema_and_round_trip(path):
    topo = load(path.name)
    doc = json.loads(json.dumps(topology_to_json(topo)))
    assert set(doc) == TOP_KEYS
    assert doc["schema"] == SCHEMA
    assert [g["index"] for g in doc["gpus"]] == list(topo.gpu_indices)
    assert all(set(g) == GPU_KEYS for g in doc["gpus"])
    assert all(set(link) == LINK_KEYS for link in doc["links"])
    assert all(set(nic) == NIC_KEYS for nic in doc["nics"])
    n = len(topo.gpus)
    assert len(doc["links"]) == n * (n - 1) // 2
    tree_gpus = sorted(node["gpu"] for node in _tree_nodes(doc["tree"]) if node["kind"] == "gpu")
    assert tree_gpus == list(topo.gpu_indices)
    assert topology_from_json(doc) == topo


def test_json_round_trip_keeps_model_facts_and_measurements():
    topo = Topology(
        gpus=(
            Gpu(0, model="NVIDIA H100 80GB HBM3", uuid="GPU-a", minor=3, memory_mib=81559),
            Gpu(1, model="NVIDIA H100 80GB HBM3", uuid="GPU-b", minor=0, numa_node=1),
        ),
        links={(0, 1): PairLink(0, 1, PcieLevel.NODE, 18, P2PStatus.OK, 370.5)},
        nics=(Nic("mlx5_0", alias="NIC0"),),
        nic_levels={("mlx5_0", 0): PcieLevel.PIX, ("mlx5_0", 1): PcieLevel.NODE},
        driver_version="550.54.15",
        cuda_version="12.4",
        source="nvml",
    )
    doc = topology_to_json(topo)
    assert doc["links"][0]["gbps_source"] == "measured"
    assert doc["nics"][0]["nearest_gpus"] == [0]
    assert topology_from_json(json.loads(json.dumps(doc))) == topo


_levels = st.sampled_from(list(PcieLevel))


@st.composite
def topologies(draw) -> Topology:
    n = draw(st.integers(1, 6))
    gpus = tuple(Gpu(i, numa_node=draw(st.none() | st.integers(0, 3))) for i in range(n))
    links = {}
    for a in range(n):
        for b in range(a + 1, n):
            nv = draw(st.sampled_from([0, 0, 1, 2, 12, 18]))
            level = draw(st.none() | _levels) if nv else draw(_levels)
            p2p = draw(st.sampled_from(list(P2PStatus)))
            links[(a, b)] = PairLink(a, b, level, nv, p2p)
    return Topology(gpus=gpus, links=links, source="hypothesis")


@settings(max_examples=60, deadline=None)
@given(topologies())
def test_json_round_trip_any_topology(topo):
    doc = json.loads(json.dumps(topology_to_json(topo)))
    assert topology_from_json(doc) == topo


def _doc() -> dict:
    return json.loads(json.dumps(topology_to_json(load(RTX5090))))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(lambda d: d.update(schema="other/9"), "schema", id="wrong-schema"),
        pytest.param(lambda d: d.update(gpus=[]), "gpus is empty", id="no-gpus"),
        pytest.param(lambda d: d["gpus"][0].update(index="0"), "gpus[0].index", id="index-str"),
        pytest.param(lambda d: d["gpus"][1].update(index=0), "repeated index", id="dup-index"),
        pytest.param(lambda d: d["links"][0].update(p2p="MAYBE"), "links[0].p2p", id="bad-p2p"),
        pytest.param(
            lambda d: d["links"][0].update(pcie_level="FAR"), "links[0].pcie_level", id="level"
        ),
        pytest.param(lambda d: d.update(links=[]), "no entry for GPU0-GPU1", id="missing-link"),
        pytest.param(lambda d: d["links"][0].update(a=1, b=0), "a < b", id="pair-order"),
        pytest.param(lambda d: d.update(links={}), "links must be a list", id="links-type"),
        pytest.param(lambda d: d["gpus"].__setitem__(0, 7), "gpus[0] must be an object", id="gpu"),
    ],
)
def test_bad_json_documents_name_the_field(mutate, message):
    doc = _doc()
    mutate(doc)
    with pytest.raises(TopologyParseError) as info:
        topology_from_json(doc)
    assert message in str(info.value)
    assert isinstance(info.value, DlcError)
    assert "\n" not in str(info.value)


def test_json_must_be_an_object():
    with pytest.raises(TopologyParseError, match="must be an object"):
        topology_from_json([1, 2])


# ------------------------------------------------------------------ truncated input


@pytest.mark.parametrize("path", truncated_topo_files(), ids=lambda p: p.name[:40])
def test_truncated_input_says_so_in_summary_and_source(path):
    from dlc.topology.discovery.discover import discover

    topo = discover(from_file=path, allow_truncated=True)
    assert topo.truncated
    facts = analyze(topo)
    assert facts.summary.startswith(f"truncated table, complete rows only: {len(topo.gpus)} GPU")
    flat = " ".join(report_text(topo).split())
    assert "(cut short: the machine has more GPUs or NICs than shown)" in flat


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_complete_input_is_not_marked_truncated(path):
    topo = load(path.name)
    assert not topo.truncated
    assert "truncated" not in analyze(topo).summary and "cut short" not in report_text(topo)
