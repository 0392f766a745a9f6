"""``dlc node-config``: agent flags from a topology, and reading them back from attributes."""

from __future__ import annotations

import json
import re
import shlex
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.errors import NodeConfigError, TopologyEncodingError
from dlc.mesos.resources import attributes_summary, parse_attributes
from dlc.topology.discovery.discover import discover
from dlc.topology.encoding import decode_topology
from dlc.topology.gpu_shares import SharingMode, amounts, parse_ranges_text
from dlc.topology.model import Gpu, PairLink, PcieLevel, Topology
from dlc.topology.node_config import (
    agent_resources,
    node_config,
    parse_agent_attributes,
    topology_from_attributes,
)
from dlc.topology.render.jsonio import topology_from_json
from tests.fixture_files import complete_topo_files
from tests.real_mesos import real_mesos_master

MESOS_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9_/.-]*")
DGX1 = next(p for p in complete_topo_files() if p.name.startswith("dgx1-v100"))


def _nvml_like() -> Topology:
    gpus = tuple(
        Gpu(i, model="Tesla V100-SXM2-16GB", uuid=f"GPU-{i}", minor=i, memory_mib=16160 + i)
        for i in range(2)
    )
    return Topology(
        gpus,
        {(0, 1): PairLink(0, 1, PcieLevel.PIX, 2)},
        driver_version="535.129.03",
        cuda_version="12.2",
        source="nvml",
    )


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["node-config", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", complete_topo_files(), ids=[p.stem for p in complete_topo_files()])
def test_cli_env_output_round_trips_to_same_topology(path: Path):
    out = _run("--from-file", str(path), "--format", "env")
    env = dict(line.split("=", 1) for line in out.splitlines())
    attrs = attributes_summary(parse_attributes(shlex.split(env["MESOS_ATTRIBUTES"])[0]))
    assert all(MESOS_TEXT.fullmatch(v) for v in attrs.values())
    topo = discover(from_file=path)
    assert topology_from_attributes(attrs) == replace(topo, source="file")  # no file name
    n = len(topo.gpus)
    ids = ",".join(map(str, range(n)))
    assert shlex.split(env["MESOS_RESOURCES"]) == [f"gpus:{n};gpu_ids:{{{ids}}}"]


@pytest.mark.parametrize(
    "fmt, check",
    [
        ("flags", lambda out: shlex.split(out)[0].startswith("--resources=cpus:8;mem:4096;gpus:8")),
        ("args", lambda out: out.split()[1].startswith("--attributes=dlc_topo:T1/")),
        ("json", lambda out: json.loads(out)["resources"].endswith("gpu_ids:{0,1,2,3,4,5,6,7}")),
        ("env", lambda out: out.startswith("MESOS_RESOURCES='cpus:8;mem:4096;gpus:8;")),
    ],
    ids=["flags", "args", "json", "env"],
)
def test_cli_formats(fmt, check):
    assert check(_run("--from-file", str(DGX1), "--cpus", "8", "--mem", "4096", "--format", fmt))


def test_cli_p2p_file_is_carried():
    topo_file = next(p for p in complete_topo_files() if p.name.startswith("rtx5090"))
    out = _run(
        "--from-file",
        str(topo_file),
        "--p2p-file",
        str(topo_file.with_suffix(".p2p.txt")),
        "--format",
        "json",
    )
    topo = topology_from_attributes(json.loads(out)["attributes"])
    assert not topo.link(0, 1).p2p_capable


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cpus", "0"], "cpus: 0.0 is not a positive number"),
        (["--mem", "-5"], "mem: -5 is not a positive whole number"),
        (["--format", "xml"], "Invalid value for '-o' / '--format'"),
    ],
    ids=["zero-cpus", "negative-mem", "bad-format"],
)
def test_cli_bad_options_are_one_line_errors(args, message):
    result = CliRunner().invoke(cli, ["node-config", "--from-file", str(DGX1), *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    "cpus, mem, want",
    [
        (
            None,
            None,
            "gpus:2;gpu_ids:{0,1};gpu_mem:[0-16159,1048576-1064736];gpu_core:[0-999,1048576-1049575]",
        ),
        (
            8,
            4096,
            "cpus:8;mem:4096;gpus:2;gpu_ids:{0,1};gpu_mem:[0-16159,1048576-1064736];gpu_core:[0-999,1048576-1049575]",
        ),
        (
            0.5,
            None,
            "cpus:0.5;gpus:2;gpu_ids:{0,1};gpu_mem:[0-16159,1048576-1064736];gpu_core:[0-999,1048576-1049575]",
        ),
        (
            1234567.0,
            None,
            "cpus:1234567;gpus:2;gpu_ids:{0,1};gpu_mem:[0-16159,1048576-1064736];gpu_core:[0-999,1048576-1049575]",
        ),
    ],
    ids=["gpus-only", "cpus-and-mem", "fractional-cpus", "no-exponent"],
)
def test_agent_resources(cpus, mem, want):
    assert agent_resources(_nvml_like(), cpus, mem) == want


def test_resources_use_gpu_indices_not_positions():
    topo = Topology((Gpu(2), Gpu(5)), {(2, 5): PairLink(2, 5, PcieLevel.SYS)})
    assert agent_resources(topo) == "gpus:2;gpu_ids:{2,5}"


@pytest.mark.parametrize(
    "cpus, mem",
    [(0, None), (float("nan"), None), (None, 0), (None, 1.5)],
    ids=["zero-cpus", "nan-cpus", "zero-mem", "fractional-mem"],
)
def test_bad_resources_raise(cpus, mem):
    with pytest.raises(NodeConfigError):
        agent_resources(_nvml_like(), cpus, mem)


def test_attributes_follow_the_prefix_rule_and_read_back():
    topo = _nvml_like()
    config = node_config(topo)
    assert config.attributes == {
        "dlc_topo": config.attributes["dlc_topo"],
        "gpu_model": "vTesla_V100-SXM2-16GB",
        "gpu_mem_mib": "v16160",
        "nvidia_driver": "v535.129.03",
        "cuda": "v12.2",
        "dlc_sharing": "mps",
    }
    assert all(MESOS_TEXT.fullmatch(v) for v in config.attributes.values())
    info = parse_agent_attributes(attributes_summary(parse_attributes(config.attributes_text)))
    assert info.topology == topo
    assert (info.gpu_model, info.gpu_mem_mib) == ("Tesla_V100-SXM2-16GB", 16160)
    assert (info.driver_version, info.cuda_version) == ("535.129.03", "12.2")
    assert info.sharing is SharingMode.MPS


def test_mixed_models_are_listed_once_each():
    topo = Topology(
        (
            Gpu(0, model="GeForce GTX 1070"),
            Gpu(1, model="GeForce GTX 1080"),
            Gpu(2, model="GeForce GTX 1070"),
        ),
        {k: PairLink(*k, PcieLevel.PIX) for k in [(0, 1), (0, 2), (1, 2)]},
    )
    assert node_config(topo).attributes["gpu_model"] == "vGeForce_GTX_1070/GeForce_GTX_1080"


@pytest.mark.parametrize(
    "attrs, want",
    [
        ({}, (None, None, None)),
        ({"gpu_mem_mib": "16384", "nvidia_driver": "v470.82.01"}, (16384, "470.82.01", None)),
        ({"gpu_mem_mib": "16384.0", "cuda": "v11.4"}, (16384, None, "11.4")),
    ],
    ids=["none", "hand-written-number", "mesos-scalar-text"],
)
def test_parse_agent_attributes_lenient_numbers(attrs, want):
    info = parse_agent_attributes(attrs)
    assert info.topology is None
    assert (info.gpu_mem_mib, info.driver_version, info.cuda_version) == want


@pytest.mark.parametrize(
    "attrs",
    [
        {"gpu_mem_mib": "vlots"},
        {"nvidia_driver": "535 beta"},
        {"cuda": "x12"},
        {"dlc_topo": "T1/G/G"},
        {"dlc_topo": "12"},
    ],
    ids=["memory-not-number", "blank", "wrong-prefix", "topo-no-links", "topo-numeric"],
)
def test_bad_attributes_raise_encoding_error(attrs):
    with pytest.raises(TopologyEncodingError):
        parse_agent_attributes(attrs)


@pytest.mark.mesos
def test_real_mesos_accepts_the_flags(tmp_path: Path):
    """The real Mesos 1.11 agent starts with our flags and reports them back unchanged."""
    config = node_config(discover(from_file=DGX1), cpus=2, mem_mib=1024, gpu_mem_mib=16384)
    mesos_vars = config.env() | {"MESOS_RESOURCES": config.resources + ";disk:1024"}
    with real_mesos_master(tmp_path / "run", **mesos_vars) as mesos:
        url = f"http://{mesos.address}/master/slaves"
        agent = json.loads(urllib.request.urlopen(url, timeout=10).read())["slaves"][0]
    assert agent["attributes"]["dlc_topo"] == config.attributes["dlc_topo"]
    assert topology_from_attributes(agent["attributes"]) == replace(
        discover(from_file=DGX1), source="file"
    )
    assert agent["resources"]["gpus"] == 8
    items = agent["resources"]["gpu_ids"].strip("{}").split(",")  # Mesos prints "{0, 1, ...}"
    assert [item.strip() for item in items] == [str(i) for i in range(8)]
    # The master keeps the share ranges exactly as declared (it prints "[a-b, c-d]").
    mem = parse_ranges_text(agent["resources"]["gpu_mem"])
    core = parse_ranges_text(agent["resources"]["gpu_core"])
    assert amounts(mem) == dict.fromkeys(range(8), 16384)
    assert amounts(core) == dict.fromkeys(range(8), 1000)
    assert agent["attributes"]["dlc_sharing"] == config.attributes["dlc_sharing"]


# -- GPU shares: the gpu_mem / gpu_core ranges and the dlc_sharing attribute --------------------
H100_DATA = Path(__file__).parent / "data" / "h100-x1"


def test_h100_nvml_document_gives_its_memory_block_and_mps():
    """The real H100's NVML reading (81,559 MiB, Hopper) -> one block per resource, mps."""
    topo = topology_from_json(json.loads((H100_DATA / "topology_NVML.json").read_text()))
    config = node_config(topo)
    assert config.resources == "gpus:1;gpu_ids:{0};gpu_mem:[0-81558];gpu_core:[0-999]"
    assert config.attributes["dlc_sharing"] == "mps"


@pytest.mark.parametrize(
    "models, want",
    [
        (["Tesla V100-SXM2-16GB"], "mps"),
        (["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"], "mps"),
        (["Tesla T4"], "mps"),
        (["Tesla P100-PCIE-16GB"], "watchdog"),
        (["Tesla K80"], "watchdog"),
        (["GeForce GTX 1080"], "watchdog"),
        ([None], "watchdog"),
        (["Tesla V100-SXM2-16GB", "Tesla P40"], "watchdog"),
    ],
    ids=[
        "volta",
        "ampere-hopper",
        "turing",
        "pascal",
        "kepler",
        "geforce-pascal",
        "unknown",
        "mixed",
    ],
)
def test_default_sharing_is_mps_from_volta_on(models, want):
    topo = Topology(tuple(Gpu(i, model=m, memory_mib=8192) for i, m in enumerate(models)), {})
    assert node_config(topo).attributes["dlc_sharing"] == want


def test_sharing_flag_and_gpu_mem_for_a_saved_topo_file():
    out = _run(
        "--from-file", str(DGX1), "--sharing", "watchdog", "--gpu-mem", "16384", "--format", "json"
    )
    doc = json.loads(out)
    assert doc["attributes"]["dlc_sharing"] == "watchdog"
    resources = dict(item.split(":", 1) for item in doc["resources"].split(";"))
    blocks = ",".join(f"{i << 20}-{(i << 20) + 16383}" for i in range(8))
    assert resources["gpu_mem"] == f"[{blocks}]"
    assert (
        resources["gpu_core"]
        == "[" + ",".join(f"{i << 20}-{(i << 20) + 999}" for i in range(8)) + "]"
    )
    assert doc["notes"] == []


def test_saved_topo_without_memory_leaves_ranges_out_with_a_note():
    result = CliRunner().invoke(cli, ["node-config", "--from-file", str(DGX1)])
    assert result.exit_code == 0
    assert "gpu_mem" not in result.stdout.split("note:")[0]
    assert "note: gpu_mem/gpu_core left out (GPU memory unknown)" in result.output
    doc = json.loads(_run("--from-file", str(DGX1), "--format", "json"))
    assert doc["notes"] and "gpu_mem" not in doc["resources"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sharing", "hami"], "Invalid value for '--sharing'"),
        (["--gpu-mem", "0"], "gpu-mem: 0 is not a GPU memory in MiB"),
        (["--gpu-mem", "2000000"], "gpu-mem: 2000000 is not a GPU memory in MiB"),
    ],
    ids=["unknown-mode", "zero-memory", "memory-past-stride"],
)
def test_bad_sharing_options_are_one_line_errors(args, message):
    result = CliRunner().invoke(cli, ["node-config", "--from-file", str(DGX1), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_bad_sharing_attribute_is_an_encoding_error():
    with pytest.raises(TopologyEncodingError, match="dlc_sharing"):
        parse_agent_attributes({"dlc_sharing": "hami"})


def test_from_file_keeps_the_file_name_out_of_the_attributes():
    result = CliRunner().invoke(cli, ["node-config", "--from-file", str(DGX1), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert DGX1.name not in result.stdout
    assert decode_topology(doc["attributes"]["dlc_topo"]).source == "file"
