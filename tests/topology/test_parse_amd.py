"""AMD SMI outputs (saved from public threads/docs, tests/fixtures/amd/SOURCES.md) -> Topology."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dlc.errors import TopologyParseError
from dlc.scheduler.allocator import allocate
from dlc.topology.discovery.discover import discover
from dlc.topology.encoding import decode_topology, encode_topology
from dlc.topology.model import AMD, NVIDIA, Gpu, Topology
from dlc.topology.parse_amd import looks_like_amd, parse_amd_smi_text
from dlc.topology.render.jsonio import topology_from_json, topology_to_json
from dlc.topology.render.report import analyze

AMD_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "amd"
MI300 = AMD_DIR / "mi300-series-8gpu_xgmi15_showtopo_ms-swift.txt"
MI250_BW = AMD_DIR / "mi250-8gcd_shownodesbw_toponuma_optimum-amd.txt"
MI250X = AMD_DIR / "mi250x-8gcd_showtopo_CONSTRUCTED.txt"
MI300X_JSON = AMD_DIR / "mi300x-8gpu_amd-smi-topology-static_CONSTRUCTED.json"
PCIE = AMD_DIR / "pcie-4gpu_weight52_hops3_rocm-smi-lib-108.txt"
#: GCD pairs of the MI250 node's --shownodesbw table with their XGMI link count (max / 50 GB/s)
MI250_DIRECT = {
    (0, 1): 4, (2, 3): 4, (4, 5): 4, (6, 7): 4,  # the two dies of one package
    (0, 6): 2, (2, 4): 2,
    (0, 2): 1, (1, 3): 1, (1, 5): 1, (3, 7): 1, (4, 6): 1, (5, 7): 1,
}  # fmt: skip


def test_mi300_series_all_to_all_xgmi_from_showtopo():
    topo = discover(from_file=MI300)
    assert topo.vendor == AMD and topo.source == f"file:{MI300.name}"
    assert all(link.nvlinks == 1 for link in topo.pairs())
    assert [g.numa_node for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {g.memory_mib for g in topo.gpus} == {206141652992 >> 20}
    assert "XGMI all-to-all: XGMI1 between every pair" in analyze(topo).summary


def test_mi250_directness_from_bandwidth_not_hops():
    topo = parse_amd_smi_text(MI250_BW.read_text())
    direct = {(link.a, link.b): link.nvlinks for link in topo.pairs() if link.nvlinks}
    assert direct == MI250_DIRECT
    routed = [link for link in topo.pairs() if not link.nvlinks]
    assert len(routed) == 16 and all(link.p2p_capable for link in routed)
    assert topo.link_label(topo.link(0, 3)) == "XGMI*"
    summary = analyze(topo).summary
    assert "XGMI: 4 dual-die packages {0,1} {2,3} {4,5} {6,7} (XGMI4 inside" in summary


def test_mi250x_directness_from_weights_where_hops_all_say_one():
    topo = parse_amd_smi_text(MI250X.read_text())
    direct = {(link.a, link.b) for link in topo.pairs() if link.nvlinks}
    assert direct == set(MI250_DIRECT)
    assert {g.model for g in topo.gpus} == {"AMD Instinct MI250X"}


def test_allocator_keeps_the_two_dies_of_a_package_together():
    topo = parse_amd_smi_text(MI250_BW.read_text())
    assert set(allocate(topo, set(range(8)), 2)) in ({0, 1}, {2, 3}, {4, 5}, {6, 7})
    assert set(allocate(topo, {0, 2, 3, 5}, 2)) == {2, 3}


def test_amd_smi_json_topology_and_static():
    topo = discover(from_file=MI300X_JSON)
    assert {g.model for g in topo.gpus} == {"AMD Instinct MI300X"}
    assert topo.gpu(7).pci_bus_id == "0000:e5:00.0" and topo.gpu(7).numa_node == 1
    assert all(link.nvlinks == 1 for link in topo.pairs())


def test_amd_smi_old_dict_format_and_rocm_smi_json():
    old = [
        {
            "gpu": g,
            "weight": {"gpu_0": 0 if g == 0 else 40, "gpu_1": 40 if g == 0 else 0},
            "hops": {"gpu_0": 0 if g == 0 else 2, "gpu_1": 2 if g == 0 else 0},
            "link_type": {
                "gpu_0": "SELF" if g == 0 else "PCIE",
                "gpu_1": "PCIE" if g == 0 else "SELF",
            },
        }
        for g in (0, 1)
    ]
    topo = parse_amd_smi_text(json.dumps(old))
    assert topo.link(0, 1).nvlinks == 0 and topo.link(0, 1).pcie_level.name == "NODE"
    rocm = {
        "system": {
            "(Topology) Weight between DRM devices 0 and 1": "15",
            "(Topology) Hops between DRM devices 0 and 1": "1",
            "(Topology) Link type between DRM devices 0 and 1": "XGMI",
        },
        "card0": {"(Topology) Numa Node": "0"},
        "card1": {"(Topology) Numa Node": "1"},
    }
    topo = parse_amd_smi_text(json.dumps(rocm))
    assert topo.link(0, 1).nvlinks == 1 and topo.gpu(1).numa_node == 1


def test_pcie_only_amd_machine():
    topo = parse_amd_smi_text(PCIE.read_text())
    assert all(link.nvlinks == 0 and link.pcie_level.name == "SYS" for link in topo.pairs())


def test_vendor_survives_encoding_and_json():
    topo = parse_amd_smi_text(MI250X.read_text())
    assert decode_topology(encode_topology(topo)) == topo
    assert topology_from_json(json.loads(json.dumps(topology_to_json(topo)))) == topo


def test_old_encodings_and_documents_read_as_nvidia():
    topo = Topology(gpus=(Gpu(0, model="Tesla V100"),))
    assert "V" not in encode_topology(topo).split("/")[2:]  # unchanged for NVIDIA machines
    assert decode_topology("T1/G/MTesla_sV100").gpus[0].vendor == NVIDIA
    doc = topology_to_json(topo)
    del doc["gpus"][0]["vendor"]
    assert topology_from_json(doc).gpus[0].vendor == NVIDIA


def test_detects_amd_output_not_nvidia():
    assert looks_like_amd(MI250_BW.read_text())
    assert not looks_like_amd("        GPU0    GPU1\nGPU0     X      NV1\nGPU1    NV1      X\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("== Weight between two GPUs ==\n   GPU0 GPU1\nGPU0 0 15\n", "1 rows for 2 columns"),
        ("== Weight between two GPUs ==\n   GPU0 GPU1\nGPU0 0 15\nGPU1 15\n", "has 1 cells"),
        ("== Link Type between two GPUs ==\n GPU0 GPU1\nGPU0 0 NVL\nGPU1 NVL 0\n", "XGMI or PCIE"),
        ("ROCm System Management Interface\nnothing here\n", "no GPU matrix"),
        ('[{"gpu": 0, "links": [{"gpu": 1, "link_type": "FOO"}]}]', "link_type 'FOO'"),
        ('[{"gpu": 0, "links": [', "malformed JSON"),
        ("== Weight between two GPUs ==\n   GPU0 GPU2\nGPU0 0 15\nGPU2 15 0\n", "not 0..1"),
    ],
)
def test_bad_or_partial_output_is_a_one_line_error(text, message):
    with pytest.raises(TopologyParseError) as err:
        parse_amd_smi_text(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_node_config_advertises_vendor_model_rocm_and_no_share_ranges():
    from dataclasses import replace

    from dlc.errors import NodeConfigError
    from dlc.topology.node_config import node_config, parse_agent_attributes

    topo = replace(discover(from_file=MI300X_JSON), driver_version="6.4.1")
    config = node_config(topo)
    assert config.attributes["gpu_vendor"] == "vamd"
    assert config.attributes["rocm"] == "v6.4.1" and "nvidia_driver" not in config.attributes
    assert "dlc_sharing" not in config.attributes
    assert "gpu_mem:" not in config.resources and "gpus:8" in config.resources
    info = parse_agent_attributes(config.attributes)
    assert (info.gpu_vendor, info.rocm_version, info.gpu_model) == (
        "amd",
        "6.4.1",
        "AMD_Instinct_MI300X",
    )
    assert info.topology.vendor == AMD
    with pytest.raises(NodeConfigError, match="sharing"):
        node_config(topo, sharing="mps")
    nvidia = node_config(Topology(gpus=(Gpu(0, model="Tesla V100", memory_mib=16384),)))
    assert "gpu_vendor" not in nvidia.attributes  # unchanged for NVIDIA agents
    assert parse_agent_attributes(nvidia.attributes).gpu_vendor == NVIDIA


def test_cli_reads_rocm_smi_json_and_its_own_amd_document(tmp_path):
    from click.testing import CliRunner

    from dlc.cli.main import cli

    rocm = {
        "system": {
            "(Topology) Weight between DRM devices 0 and 1": "15",
            "(Topology) Link type between DRM devices 0 and 1": "XGMI",
        },
        "card0": {"Card Series": "AMD Instinct MI210"},
        "card1": {"Card Series": "AMD Instinct MI210"},
    }
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps(rocm))  # starts with "{" like a dlc-topology/1 document
    out = CliRunner().invoke(cli, ["topology", "--from-file", str(path)]).output
    assert out.startswith("2 GPUs (AMD Instinct MI210) on ")
    assert "XGMI1 between the two GPUs" in out
    doc = CliRunner().invoke(cli, ["topology", "--from-file", str(MI250_BW), "--json"]).output
    (tmp_path / "doc.json").write_text(doc)
    again = CliRunner().invoke(cli, ["topology", "--from-file", str(tmp_path / "doc.json")])
    assert "XGMI: 4 dual-die packages" in again.output
    assert not looks_like_amd(doc)


def test_live_discovery_runs_the_amd_tools_on_an_amd_host(tmp_path, monkeypatch):
    """No NVML, no nvidia-smi, an amd-smi on PATH (printing the fixture): an AMD topology."""
    from dlc.devices.registry import backend_for

    tool = tmp_path / "amd-smi"
    docs = MI300X_JSON.read_text().split("\n[", 1)
    (tmp_path / "topology.json").write_text(docs[0])
    (tmp_path / "static.json").write_text("[" + docs[1])
    tool.write_text(f'#!/bin/sh\nexec /bin/cat "{tmp_path}/$1.json"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML on this host
    topo = discover()
    assert topo.source == "amd-smi" and topo.vendor == AMD and len(topo.gpus) == 8
    assert topo.gpu(0).model == "AMD Instinct MI300X"
    assert backend_for("amd").fingerprint().gpu_indices == tuple(range(8))
