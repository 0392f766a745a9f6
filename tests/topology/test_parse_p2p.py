"""``nvidia-smi topo -p2p`` parser and its merge into the topology."""

from __future__ import annotations

import pytest

from dlc.errors import TopologyParseError
from dlc.topology.model import P2PStatus, PcieLevel
from dlc.topology.parse_p2p import parse_p2p
from dlc.topology.parse_topo import load_topology_text
from tests.fixture_files import FIXTURE_DIR


def _read(name: str) -> str:
    return (FIXTURE_DIR / name).read_text()


@pytest.mark.parametrize(
    "name, status",
    [
        ("rtx5090-2gpu_phb_tabs.p2p.txt", P2PStatus.GNS),
        ("rtx3090-2gpu_nv4-bridge_lxc.p2p.txt", P2PStatus.OK),
    ],
    ids=["rtx5090-gns", "rtx3090-ok"],
)
def test_fixture_matrices(name, status):
    assert parse_p2p(_read(name)) == {(0, 1): status, (1, 0): status}


def test_rtx5090_phb_is_not_p2p_capable_with_gns():
    plain = load_topology_text(_read("rtx5090-2gpu_phb_tabs.txt"))
    merged = load_topology_text(
        _read("rtx5090-2gpu_phb_tabs.txt"), _read("rtx5090-2gpu_phb_tabs.p2p.txt")
    )
    assert plain.link(0, 1).p2p_capable  # PHB alone would suggest P2P ...
    link = merged.link(0, 1)
    assert link.pcie_level is PcieLevel.PHB and link.p2p is P2PStatus.GNS
    assert not link.p2p_capable  # ... but the GeForce driver says GPU not supported


def test_rtx3090_nvlink_bridge_is_p2p_ok():
    topo = load_topology_text(
        _read("rtx3090-2gpu_nv4-bridge_lxc.txt"), _read("rtx3090-2gpu_nv4-bridge_lxc.p2p.txt")
    )
    link = topo.link(0, 1)
    assert (link.nvlinks, link.p2p, link.p2p_capable) == (4, P2PStatus.OK, True)


def test_every_status_code_and_worse_direction_wins():
    codes = ["OK", "CNS", "GNS", "TNS", "NS", "DR", "U"]
    n = len(codes) + 1
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n))
    rows = []
    for r in range(n):
        cells = ["X" if c == r else (codes[c - 1] if r == 0 else "OK") for c in range(n)]
        rows.append(f" GPU{r}\t" + "\t".join(cells) + "\t")
    status = parse_p2p("\n".join([header, *rows, "", "Legend:", "  X    = Self"]))
    assert [status[(0, c)] for c in range(1, n)] == [P2PStatus(c) for c in codes]
    assert status[(3, 0)] is P2PStatus.OK


def test_merge_keeps_worse_direction():
    topo_text = "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n"
    p2p_text = "\tGPU0\tGPU1\nGPU0\tX\tOK\nGPU1\tCNS\tX\n"
    assert load_topology_text(topo_text, p2p_text).link(0, 1).p2p is P2PStatus.CNS


GOOD = "        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      X\n"


@pytest.mark.parametrize(
    "text, line, message, expected",
    [
        (GOOD.replace("OK      X", "OK      OK"), 3, "GPU1/GPU1 is OK", "X"),
        (GOOD.replace("X       OK", "X       YES"), 2, "unknown status 'YES'", "GNS"),
        (GOOD.replace(" GPU1   OK      X\n", ""), 2, "ends early", "rows for GPU1"),
        (GOOD.replace(" GPU1 ", " GPU0 "), 3, "GPU0's row out of order", "GPU1's row"),
        (GOOD.replace("OK      X", "X"), 3, "has 1 cells", "2"),
        ("no matrix here\n", 1, "no `nvidia-smi topo -p2p` matrix", "GPU0 GPU1"),
        ("", 1, "empty", "topo -p2p"),
    ],
    ids=[
        "no-X-diagonal",
        "unknown-code",
        "missing-row",
        "out-of-order",
        "short-row",
        "no-header",
        "empty",
    ],
)
def test_malformed_p2p(text, line, message, expected):
    with pytest.raises(TopologyParseError) as info:
        parse_p2p(text)
    err = info.value
    assert err.line == line and message in str(err) and expected in err.expected


def test_p2p_for_other_gpus_is_rejected():
    topo_text = "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n"
    p2p_text = "\tGPU0\tGPU1\tGPU2\nGPU0\tX\tOK\tOK\nGPU1\tOK\tX\tOK\nGPU2\tOK\tOK\tX\n"
    with pytest.raises(TopologyParseError, match="disagree about GPU2"):
        load_topology_text(topo_text, p2p_text)
