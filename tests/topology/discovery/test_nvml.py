"""NVML discovery, checked against the text parser on real machines via a fake NVML."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlc.errors import DiscoveryError
from dlc.topology.discovery.nvml import (
    cpu_list_text,
    cuda_version_text,
    normalize_bus_id,
    topology_from_nvml,
)
from dlc.topology.model import P2PStatus, PcieLevel, Topology, parse_cpu_list
from dlc.topology.parse_p2p import parse_p2p
from dlc.topology.parse_topo import parse_topo_m
from tests.fakes.fake_nvml import (
    FakeNvml,
    NVMLError_DriverNotLoaded,
    NVMLError_GpuIsLost,
    NVMLError_LibraryNotFound,
    NVMLError_NotSupported,
    fake_bus_id,
    hidden_level,
)

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "topology"
COMPLETE = sorted(
    p.name
    for p in FIXTURES.glob("*.txt")
    if not p.name.endswith(".p2p.txt") and "TRUNCATED" not in p.name
)
SWITCHED = {
    "hgx-a100_nv12_1nic_numa-affinity_pleiades.txt": 12,
    "hgx-a100-80gb_nv12_8nic-roce_nic-legend.txt": 12,
    "hgx-h100_nv18_gpu-numa-id_thunderkittens.txt": 18,
}


def text_topology(name: str) -> Topology:
    return parse_topo_m((FIXTURES / name).read_text())


def p2p_matrix(name: str) -> dict[tuple[int, int], P2PStatus]:
    return parse_p2p((FIXTURES / name).read_text())


def test_fixture_set_is_complete():
    # Guards the parametrized tests below against an empty or moved fixture folder.
    assert len(COMPLETE) >= 15
    assert set(SWITCHED) <= set(COMPLETE)


@pytest.mark.parametrize("name", COMPLETE, ids=[n.removesuffix(".txt") for n in COMPLETE])
def test_nvml_pairs_match_text_parser(name):
    text = text_topology(name)
    live = topology_from_nvml(FakeNvml(text))

    assert live.gpu_indices == text.gpu_indices
    assert live.source == "nvml"
    for a, b in combinations(text.gpu_indices, 2):
        want, got = text.link(a, b), live.link(a, b)
        assert got.label == want.label, f"GPU{a}-GPU{b}"
        assert got.nvlinks == want.nvlinks, f"GPU{a}-GPU{b}"
        if want.pcie_level is not None:
            assert got.pcie_level == want.pcie_level, f"GPU{a}-GPU{b}"
        else:
            # topo -m hid the PCIe level behind NV#; NVML still reports one.
            assert got.nvlinks > 0
            assert got.pcie_level == hidden_level(text, a, b)


@pytest.mark.parametrize("name", COMPLETE, ids=[n.removesuffix(".txt") for n in COMPLETE])
def test_nvml_gpu_affinity_matches_text_parser(name):
    text = text_topology(name)
    live = topology_from_nvml(FakeNvml(text))

    for want, got in zip(text.gpus, live.gpus, strict=True):
        assert got.cpus() == want.cpus()
        assert got.numa_node == want.numa_node
        assert got.gpu_numa_id is None  # no fixture is a Grace-coherent system


@pytest.mark.parametrize("name,links", SWITCHED.items(), ids=list(SWITCHED))
@pytest.mark.parametrize("remote_type", [True, False], ids=["remote-type", "no-remote-type"])
def test_nvswitch_fabric_gives_nv_count_of_switch_links(name, links, remote_type):
    text = text_topology(name)
    fake = FakeNvml(text, report_remote_type=remote_type)
    live = topology_from_nvml(fake)

    assert fake.nvswitch  # 7 peers x NV12/NV18 cannot be point-to-point
    assert {link.label for link in live.pairs()} == {f"NV{links}"}
    assert fake.calls["nvmlDeviceGetNvLinkRemoteDeviceType"] == (8 * links if remote_type else 0)


def test_nvlinks_to_an_ibm_npu_are_not_a_switch_fabric():
    fake = FakeNvml(text_topology("hgx-h100_nv18_gpu-numa-id_thunderkittens.txt"))
    fake.nvlinks = [
        [(bus, fake.NVML_NVLINK_DEVICE_TYPE_IBMNPU) for bus, _ in links] for links in fake.nvlinks
    ]

    live = topology_from_nvml(fake)

    assert all(link.nvlinks == 0 for link in live.pairs())


def test_unknown_nvlink_far_end_is_not_guessed_to_be_a_switch():
    fake = FakeNvml(
        text_topology("hgx-h100_nv18_gpu-numa-id_thunderkittens.txt"),
        fail={"nvmlDeviceGetNvLinkRemotePciInfo": NVMLError_NotSupported},
        report_remote_type=False,
    )

    live = topology_from_nvml(fake)

    assert all(link.nvlinks == 0 for link in live.pairs())
    assert {link.pcie_level for link in live.pairs()} == {PcieLevel.NODE, PcieLevel.SYS}


def test_point_to_point_nvlink_counts_dgx1_hybrid_cube_mesh():
    live = topology_from_nvml(FakeNvml(text_topology("dgx1-v100_nv1-nv2_mlx5_oneflow.txt")))

    assert [live.link(0, b).label for b in range(1, 8)] == [
        "NV1",
        "NV1",
        "NV2",
        "NV2",
        "SYS",
        "SYS",
        "SYS",
    ]
    # Each V100 has 6 NVLinks in all.
    assert all(sum(live.link(g, p).nvlinks for p in range(8) if p != g) == 6 for g in range(8))


@pytest.mark.parametrize(
    "topo_name,p2p_name,want",
    [
        ("rtx5090-2gpu_phb_tabs.txt", "rtx5090-2gpu_phb_tabs.p2p.txt", P2PStatus.GNS),
        ("rtx3090-2gpu_nv4-bridge_lxc.txt", "rtx3090-2gpu_nv4-bridge_lxc.p2p.txt", P2PStatus.OK),
    ],
    ids=["rtx5090-gns", "rtx3090-ok"],
)
def test_p2p_status_from_real_matrices(topo_name, p2p_name, want):
    text = text_topology(topo_name)
    live = topology_from_nvml(FakeNvml(text, p2p=p2p_matrix(p2p_name)))

    assert live.link(0, 1).p2p is want
    assert live.link(0, 1).p2p_capable is (want is P2PStatus.OK)


@pytest.mark.parametrize(
    "read,write,want",
    [
        (P2PStatus.OK, P2PStatus.OK, P2PStatus.OK),
        (P2PStatus.OK, P2PStatus.DR, P2PStatus.DR),
        (P2PStatus.TNS, P2PStatus.OK, P2PStatus.TNS),
        (P2PStatus.U, P2PStatus.NS, P2PStatus.NS),
        (P2PStatus.OK, P2PStatus.U, P2PStatus.U),
        (P2PStatus.CNS, P2PStatus.CNS, P2PStatus.CNS),
    ],
    ids=["both-ok", "write-disabled", "read-tns", "unknown-vs-ns", "write-unknown", "both-cns"],
)
def test_p2p_worse_of_read_and_write_wins(read, write, want):
    text = text_topology("rtx5090-2gpu_phb_tabs.txt")
    fake = FakeNvml(text, p2p={(0, 1): read, (1, 0): read}, p2p_write={(0, 1): write})

    assert topology_from_nvml(fake).link(0, 1).p2p is want


def test_p2p_derived_by_fake_across_sockets_is_cns():
    live = topology_from_nvml(FakeNvml(text_topology("rtx3090-2gpu_sys_numa-affinity-na_tabs.txt")))

    assert live.link(0, 1).pcie_level is PcieLevel.SYS
    assert live.link(0, 1).p2p is P2PStatus.CNS


def test_gpu_facts_and_minor_numbers():
    text = text_topology("dgx1-v100_nv1-nv2_mlx5_oneflow.txt")
    minors = [1, 0, 3, 2, 5, 4, 7, 6]  # probe order differs from PCI order
    fake = FakeNvml(
        text,
        model="Tesla V100-SXM2-16GB",
        memory_mib=16160,
        minors=minors,
        driver_version="470.57.02",
        cuda_version=11040,
    )

    live = topology_from_nvml(fake)

    assert [g.minor for g in live.gpus] == minors
    assert [g.pci_bus_id for g in live.gpus] == [fake_bus_id(i) for i in range(8)]
    assert {g.model for g in live.gpus} == {"Tesla V100-SXM2-16GB"}
    assert {g.memory_mib for g in live.gpus} == {16160}
    assert all(re.fullmatch(r"GPU-[0-9a-f-]{36}", g.uuid) for g in live.gpus)
    assert len({g.uuid for g in live.gpus}) == 8
    assert (live.driver_version, live.cuda_version) == ("470.57.02", "11.4")
    assert live.gpu(0).cpu_affinity == "0-11,24-35"
    assert fake.initialised == 0  # nvmlShutdown was called


ONE_PAIR = "rtx3090-2gpu_nv4-bridge_lxc.txt"


@pytest.mark.parametrize(
    "missing,fail,field,want",
    [
        ("nvmlDeviceGetNumaNodeId", None, "gpu.gpu_numa_id", None),
        (None, "nvmlDeviceGetMemoryAffinity", "gpu.numa_node", None),
        ("nvmlDeviceGetMemoryAffinity", None, "gpu.numa_node", None),
        (None, "nvmlDeviceGetCpuAffinity", "gpu.cpu_affinity", None),
        (None, "nvmlDeviceGetMinorNumber", "gpu.minor", None),
        (None, "nvmlDeviceGetUUID", "gpu.uuid", None),
        (None, "nvmlDeviceGetPciInfo", "gpu.pci_bus_id", None),
        (None, "nvmlDeviceGetMemoryInfo", "gpu.memory_mib", None),
        ("nvmlSystemGetCudaDriverVersion", None, "cuda_version", None),
        (None, "nvmlSystemGetDriverVersion", "driver_version", None),
        (None, "nvmlDeviceGetNvLinkState", "link.nvlinks", 0),
        ("nvmlDeviceGetNvLinkRemotePciInfo", None, "link.nvlinks", 0),
        (None, "nvmlDeviceGetTopologyCommonAncestor", "link.pcie_level", None),
        (None, "nvmlDeviceGetP2PStatus", "link.p2p", P2PStatus.U),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_optional_facts_degrade_to_unknown(missing, fail, field, want):
    fake = FakeNvml(
        text_topology(ONE_PAIR),
        missing=[missing] if missing else [],
        fail={fail: NVMLError_NotSupported} if fail else None,
    )

    live = topology_from_nvml(fake)

    holder, _, attr = field.rpartition(".")
    obj = {"gpu": live.gpu(1), "link": live.link(0, 1), "": live}[holder]
    assert getattr(obj, attr) == want
    # Everything else still arrives.
    assert live.gpu(1).model == "NVIDIA A100-SXM4-80GB"
    assert live.link(0, 1).label in {"NV4", "NODE"}
    assert fake.initialised == 0


@pytest.mark.parametrize(
    "fail,message",
    [
        (
            {"nvmlInit": NVMLError_LibraryNotFound},
            "NVML unavailable: nvmlInit failed: NVML Shared Library Not Found",
        ),
        (
            {"nvmlInit": NVMLError_DriverNotLoaded},
            "NVML unavailable: nvmlInit failed: Driver Not Loaded",
        ),
        (
            {"nvmlDeviceGetCount": NVMLError_DriverNotLoaded},
            "NVML nvmlDeviceGetCount() failed: Driver Not Loaded",
        ),
        (
            {"nvmlDeviceGetHandleByIndex": NVMLError_GpuIsLost},
            "NVML nvmlDeviceGetHandleByIndex(0) failed: GPU is lost",
        ),
    ],
    ids=["no-library", "no-driver", "count-fails", "gpu-lost"],
)
def test_required_failures_are_one_line_discovery_errors(fail, message):
    fake = FakeNvml(text_topology(ONE_PAIR), fail=fail)

    with pytest.raises(DiscoveryError) as caught:
        topology_from_nvml(fake)

    assert str(caught.value) == message
    assert "\n" not in str(caught.value)
    init_ok = "nvmlInit" not in fail
    assert fake.calls["nvmlShutdown"] == (1 if init_ok else 0)


def test_no_gpu_is_a_discovery_error():
    fake = FakeNvml(text_topology(ONE_PAIR))
    fake.nvmlDeviceGetCount = lambda: 0

    with pytest.raises(DiscoveryError, match="NVML reports no GPU.*--from-file"):
        topology_from_nvml(fake)


def test_real_pynvml_binding():
    """The real binding: a clear DiscoveryError here (no GPU), a topology on a GPU host."""
    import pynvml  # nvidia-ml-py, a declared dependency: its absence is a failure

    try:
        live = topology_from_nvml(pynvml)
    except DiscoveryError as exc:
        assert str(exc).startswith("NVML unavailable: nvmlInit failed: ")
    else:
        assert live.source == "nvml" and len(live.gpus) >= 1
        assert all(g.pci_bus_id and g.uuid for g in live.gpus)


@pytest.mark.parametrize(
    "text,want",
    [
        ("00000000:1A:00.0", "00000000:1A:00.0"),
        ("0000:1a:00.0", "00000000:1A:00.0"),
        ("1a:00.0", "00000000:1A:00.0"),
        (b"00000001:c4:00.1\x00", "00000001:C4:00.1"),
        ("", None),
        (None, None),
        ("GPU-1234", None),
        ("0000:1a:00.9", None),
    ],
    ids=["nvml", "proc", "no-domain", "bytes", "empty", "none", "uuid", "bad-function"],
)
def test_normalize_bus_id(text, want):
    assert normalize_bus_id(text) == want


@pytest.mark.parametrize(
    "words,want",
    [
        ([0xFFF | 0xFFF << 24], "0-11,24-35"),
        ([0, 1], "64"),
        ([1 << 63, 1], "63-64"),
        ([0b1010], "1,3"),
        ([0, 0], ""),
    ],
    ids=["dgx1", "second-word", "word-boundary", "singles", "empty"],
)
def test_cpu_list_text(words, want):
    assert cpu_list_text(words) == want


@given(st.frozensets(st.integers(min_value=0, max_value=511)))
def test_cpu_mask_round_trips_through_cpu_list(cpus):
    words = [0] * 8
    for cpu in cpus:
        words[cpu // 64] |= 1 << (cpu % 64)

    assert parse_cpu_list(cpu_list_text(words)) == cpus


@pytest.mark.parametrize(
    "version,want", [(12040, "12.4"), (11080, "11.8"), (12000, "12.0"), (10010, "10.1")]
)
def test_cuda_version_text(version, want):
    assert cuda_version_text(version) == want
