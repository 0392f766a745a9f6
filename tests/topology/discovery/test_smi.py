"""nvidia-smi discovery through the real subprocess path, with a fake nvidia-smi on PATH."""

from __future__ import annotations

import os
from itertools import combinations
from pathlib import Path

import pytest

from dlc.errors import DiscoveryError
from dlc.topology.discovery.smi import parse_query_gpu, read_minor, topology_from_smi
from dlc.topology.model import P2PStatus
from dlc.topology.parse_topo import parse_topo_m

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "topology"
FAKES = Path(__file__).resolve().parents[2] / "fakes"
DGX1 = "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
RTX5090 = "rtx5090-2gpu_phb_tabs.txt"


@pytest.fixture
def smi_env(monkeypatch, tmp_path):
    """Put the fake nvidia-smi first on PATH; returns a setter for its FAKE_SMI_* knobs."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in [v for v in os.environ if v.startswith("FAKE_SMI_")]:
        monkeypatch.delenv(var)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))

    def configure(**values: str) -> Path:
        for key, value in values.items():
            monkeypatch.setenv(f"FAKE_SMI_{key.upper()}", str(value))
        return log

    return configure


def test_fake_is_executable():
    assert os.access(FAKES / "nvidia-smi", os.X_OK)


@pytest.mark.parametrize(
    "name",
    [
        DGX1,
        "hgx-h100_nv18_gpu-numa-id_thunderkittens.txt",
        "dgx1-p100_nv1_soc_4nic_broken-header_sharc.txt",
        "tesla-p4-1gpu_numa-na_tabs.txt",
    ],
    ids=["dgx1-v100", "hgx-h100", "dgx1-p100-broken-header", "single-p4"],
)
def test_smi_merges_topology_and_query(smi_env, tmp_path, name):
    log = smi_env(topo=FIXTURES / name, model="Tesla V100-SXM2-16GB", memory=16160)
    text = parse_topo_m((FIXTURES / name).read_text())

    topo = topology_from_smi(proc_gpus=tmp_path / "no-proc")

    assert topo.source == "nvidia-smi"
    assert topo.gpu_indices == text.gpu_indices
    for a, b in combinations(text.gpu_indices, 2):
        assert topo.link(a, b).label == text.link(a, b).label
    assert [g.cpu_affinity for g in topo.gpus] == [g.cpu_affinity for g in text.gpus]
    assert {g.model for g in topo.gpus} == {"Tesla V100-SXM2-16GB"}
    assert {g.memory_mib for g in topo.gpus} == {16160}
    assert topo.gpu(0).pci_bus_id == "00000000:07:00.0"
    assert all(g.uuid.startswith("GPU-") and g.minor is None for g in topo.gpus)
    assert (topo.driver_version, topo.cuda_version) == ("535.129.03", "12.2")
    calls = log.read_text().splitlines()
    assert calls[:2] == ["topo -m", "topo -p2p r"]
    assert calls[2].startswith("--query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version")


@pytest.mark.parametrize(
    "p2p_file,want",
    [("rtx5090-2gpu_phb_tabs.p2p.txt", P2PStatus.GNS), (None, P2PStatus.U)],
    ids=["p2p-matrix-gns", "old-driver-without-p2p"],
)
def test_smi_p2p_status(smi_env, tmp_path, p2p_file, want):
    smi_env(topo=FIXTURES / RTX5090, **({"p2p": FIXTURES / p2p_file} if p2p_file else {}))

    topo = topology_from_smi(proc_gpus=tmp_path)

    assert topo.link(0, 1).p2p is want
    assert topo.link(0, 1).label == "PHB"


def test_minor_numbers_from_proc(smi_env, tmp_path):
    smi_env(topo=FIXTURES / DGX1)
    minors = [1, 0, 3, 2, 5, 4, 7, 6]
    for index, minor in enumerate(minors):
        folder = tmp_path / f"0000:{0x07 + 0x0E * index:02x}:00.0"  # the driver's spelling
        folder.mkdir()
        (folder / "information").write_text(
            f"Model: \t\t Tesla V100-SXM2-16GB\nIRQ:   \t\t 90\nDevice Minor: \t {minor}\n"
        )

    topo = topology_from_smi(proc_gpus=tmp_path)

    assert [g.minor for g in topo.gpus] == minors


def test_custom_query_with_unavailable_fields(smi_env, tmp_path):
    query = tmp_path / "query.csv"
    query.write_text(
        "0, NVIDIA GeForce RTX 5090, GPU-aaaa, 00000000:01:00.0, [N/A], 575.51.02\n"
        "1, NVIDIA GeForce RTX 5090, [N/A], 00000000:41:00.0, 32607, 575.51.02\n"
    )
    smi_env(topo=FIXTURES / RTX5090, query=query, cuda="12.9")

    topo = topology_from_smi(proc_gpus=tmp_path)

    assert [g.memory_mib for g in topo.gpus] == [None, 32607]
    assert [g.uuid for g in topo.gpus] == ["GPU-aaaa", None]
    assert [g.pci_bus_id for g in topo.gpus] == ["00000000:01:00.0", "00000000:41:00.0"]
    assert (topo.driver_version, topo.cuda_version) == ("575.51.02", "12.9")


@pytest.mark.parametrize(
    "fail_on,message",
    [
        (
            "",
            "`nvidia-smi topo -m` failed (exit 9): NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver.",
        ),
        ("topo-m", "`nvidia-smi topo -m` failed (exit 9): NVIDIA-SMI has failed"),
        (
            "query",
            "`nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,"
            "driver_version --format=csv,noheader,nounits` failed (exit 9): NVIDIA-SMI has failed",
        ),
    ],
    ids=["every-call", "topo-call", "query-call"],
)
def test_driver_failure_is_a_one_line_discovery_error(smi_env, tmp_path, fail_on, message):
    smi_env(topo=FIXTURES / DGX1, fail="driver", fail_on=fail_on)

    with pytest.raises(DiscoveryError) as caught:
        topology_from_smi(proc_gpus=tmp_path)

    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "fail_on,want_p2p,want_cuda",
    [("p2p", P2PStatus.U, "12.2"), ("banner", P2PStatus.GNS, None)],
    ids=["p2p-fails", "banner-fails"],
)
def test_optional_calls_degrade(smi_env, tmp_path, fail_on, want_p2p, want_cuda):
    smi_env(
        topo=FIXTURES / RTX5090,
        p2p=FIXTURES / "rtx5090-2gpu_phb_tabs.p2p.txt",
        fail="driver",
        fail_on=fail_on,
    )

    topo = topology_from_smi(proc_gpus=tmp_path)

    assert topo.link(0, 1).p2p is want_p2p
    assert topo.cuda_version == want_cuda
    assert topo.gpu_indices == (0, 1)


def test_timeout_is_a_discovery_error(smi_env, tmp_path):
    smi_env(topo=FIXTURES / DGX1, sleep=5)

    with pytest.raises(DiscoveryError, match=r"`nvidia-smi topo -m` did not answer within 0.5s"):
        topology_from_smi(timeout_s=0.5, proc_gpus=tmp_path)


def test_gpu_count_mismatch_is_reported(smi_env, tmp_path):
    query = tmp_path / "query.csv"
    query.write_text("0, A100, GPU-a, 00000000:07:00.0, 81920, 535.129.03\n")
    smi_env(topo=FIXTURES / RTX5090, query=query)

    with pytest.raises(
        DiscoveryError, match=r"topo -m lists GPUs \[0, 1\] but --query-gpu lists \[0\]"
    ):
        topology_from_smi(proc_gpus=tmp_path)


def test_missing_executable(tmp_path):
    with pytest.raises(DiscoveryError, match="not found; is the NVIDIA driver installed"):
        topology_from_smi(str(tmp_path / "nvidia-smi"))


@pytest.mark.parametrize(
    "text,message",
    [
        ("0, A100, GPU-a, 00000000:07:00.0, 81920\n", "line 1: expected 6 fields"),
        ("\nx, A100, GPU-a, 00000000:07:00.0, 81920, 535\n", "line 2: bad GPU index 'x'"),
    ],
    ids=["too-few-fields", "bad-index"],
)
def test_parse_query_gpu_errors(text, message):
    with pytest.raises(DiscoveryError, match=message):
        parse_query_gpu(text)


@pytest.mark.parametrize(
    "content,want",
    [
        ("Model: A100\nDevice Minor: \t 3\n", 3),
        ("Model: A100\n", None),
        ("Device Minor: N/A\n", None),
        (None, None),
    ],
    ids=["present", "no-line", "not-a-number", "no-file"],
)
def test_read_minor(tmp_path, content, want):
    if content is not None:
        (tmp_path / "0001:c4:00.0").mkdir()
        (tmp_path / "0001:c4:00.0" / "information").write_text(content)

    assert read_minor("00000001:C4:00.0", tmp_path) == want
