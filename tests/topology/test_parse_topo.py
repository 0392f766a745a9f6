"""``nvidia-smi topo -m`` parser: every real fixture, dialect transformations, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlc.errors import TopologyParseError
from dlc.topology.model import Nic, PcieLevel, Topology
from dlc.topology.parse_topo import parse_topo_m
from tests.fixture_files import FIXTURE_DIR, complete_topo_files, truncated_topo_files

PIX, X, H, N, S = PcieLevel.PIX, PcieLevel.PXB, PcieLevel.PHB, PcieLevel.NODE, PcieLevel.SYS

# Facts read off each file by hand: GPU count, NICs (name, alias) in column order,
# several pair labels (incl. the tricky ones), NIC levels, and affinities per GPU as
# (cpu_affinity, numa_node, gpu_numa_id).
EXPECTED: dict[str, dict] = {
    "4gpu_nv4-all-to-all_4nic-pxb_booster.txt": dict(
        gpus=4,
        nics=[("mlx5_0", "NIC0"), ("mlx5_1", "NIC1"), ("mlx5_2", "NIC2"), ("mlx5_3", "NIC3")],
        labels={(0, 1): "NV4", (0, 3): "NV4", (2, 3): "NV4", (1, 2): "NV4"},
        nic_levels={("mlx5_0", 0): X, ("mlx5_1", 0): N, ("mlx5_3", 3): X, ("mlx5_2", 2): X},
        affinity={0: ("0-15", 0, None), 3: ("0-15", 0, None)},
    ),
    "dgx1-p100_nv1_soc_4nic_broken-header_sharc.txt": dict(
        gpus=8,
        nics=[("mlx5_0", None), ("mlx5_2", None), ("mlx5_1", None), ("mlx5_3", None)],
        labels={
            (0, 4): "NV1",
            (0, 5): "SYS",
            (1, 5): "NV1",
            (3, 7): "NV1",
            (2, 3): "NV1",
            (0, 7): "SYS",
            (4, 5): "NV1",
            (2, 5): "SYS",
        },
        nic_levels={
            ("mlx5_0", 0): PIX,
            ("mlx5_2", 4): PIX,
            ("mlx5_1", 0): H,
            ("mlx5_3", 7): PIX,
            ("mlx5_2", 0): S,
        },
        affinity={0: ("1-1", None, None), 7: ("1-1", None, None)},
    ),
    "dgx1-v100_nv1-nv2_mlx5_oneflow.txt": dict(
        gpus=8,
        nics=[("mlx5_0", None)],
        labels={
            (0, 1): "NV1",
            (0, 3): "NV2",
            (0, 4): "NV2",
            (0, 5): "SYS",
            (1, 5): "NV2",
            (2, 6): "NV1",
            (3, 7): "NV1",
            (4, 7): "NV2",
            (5, 7): "NV1",
            (2, 4): "SYS",
        },
        nic_levels={("mlx5_0", 2): PIX, ("mlx5_0", 0): N, ("mlx5_0", 4): S},
        affinity={0: ("0-11,24-35", None, None), 7: ("12-23,36-47", None, None)},
    ),
    "gtx1070-1080-7gpu_pix-phb_single-socket_rossum.txt": dict(
        gpus=7,
        nics=[],
        labels={(0, 1): "PIX", (0, 3): "PHB", (3, 6): "PIX", (2, 3): "PHB", (5, 6): "PIX"},
        nic_levels={},
        affinity={0: ("0-19", None, None), 6: ("0-19", None, None)},
    ),
    "hgx-a100-80gb_nv12_8nic-roce_nic-legend.txt": dict(
        gpus=8,
        nics=[(f"mlx5_{i}", f"NIC{i}") for i in range(8)],
        labels={(0, 1): "NV12", (0, 7): "NV12", (3, 4): "NV12"},
        nic_levels={
            ("mlx5_0", 0): X,
            ("mlx5_2", 0): N,
            ("mlx5_4", 0): S,
            ("mlx5_7", 7): X,
            ("mlx5_4", 6): N,
        },
        affinity={0: ("0-31,64-95", 0, None), 7: ("32-63,96-127", 1, None)},
    ),
    "hgx-a100_nv12_1nic_numa-affinity_pleiades.txt": dict(
        gpus=8,
        nics=[("mlx5_0", None)],
        labels={(0, 1): "NV12", (2, 5): "NV12", (6, 7): "NV12"},
        nic_levels={("mlx5_0", 2): X, ("mlx5_0", 3): X, ("mlx5_0", 0): S, ("mlx5_0", 7): S},
        affinity={
            0: ("48-63", 3, None),
            2: ("16-31", 1, None),
            4: ("112-127", 7, None),
            6: ("80-95", 5, None),
        },
    ),
    "hgx-h100_nv18_gpu-numa-id_thunderkittens.txt": dict(
        gpus=8,
        nics=[],
        labels={(0, 1): "NV18", (3, 4): "NV18", (6, 7): "NV18"},
        nic_levels={},
        affinity={0: ("0-47,96-143", 0, None), 4: ("48-95,144-191", 1, None)},
    ),
    "nimbix-4gpu_pix-soc_mlx5_torch-mpi.txt": dict(
        gpus=4,
        nics=[("mlx5_0", None)],
        labels={(0, 1): "PIX", (0, 2): "SYS", (2, 3): "PIX", (1, 3): "SYS"},
        nic_levels={("mlx5_0", 2): H, ("mlx5_0", 0): S},
        affinity={0: ("0-7", None, None), 2: ("8-15", None, None)},
    ),
    "p40-8gpu_pix-pxb-soc_mlx5_tabs_paddle.txt": dict(
        gpus=8,
        nics=[("mlx5_0", None)],
        labels={(0, 1): "PIX", (0, 4): "PXB", (4, 7): "PIX", (3, 4): "PXB"},
        nic_levels={("mlx5_0", 0): S, ("mlx5_0", 7): S},
        affinity={0: ("0-13", None, None), 7: ("0-13", None, None)},
    ),
    "pcie-8gpu_nv12-bridge-pairs_non-adjacent_all-sys_tabs_k8s-dp-546.txt": dict(
        gpus=8,
        nics=[],
        labels={
            (0, 2): "NV12",
            (1, 3): "NV12",
            (4, 5): "NV12",
            (6, 7): "NV12",
            (0, 1): "SYS",
            (2, 3): "SYS",
            (5, 6): "SYS",
        },
        nic_levels={},
        affinity={0: ("0-31", 0, None), 4: ("32-63", 1, None)},
    ),
    "rtx3090-2gpu_nv4-bridge_lxc.txt": dict(
        gpus=2,
        nics=[],
        labels={(0, 1): "NV4"},
        nic_levels={},
        affinity={0: ("0-5", 0, None), 1: ("0-5", 0, None)},
    ),
    "rtx3090-2gpu_sys_numa-affinity-na_tabs.txt": dict(
        gpus=2,
        nics=[],
        labels={(0, 1): "SYS"},
        nic_levels={},
        affinity={0: ("0-7,16-23", None, None), 1: ("8-15,24-31", 1, None)},
    ),
    "rtx4090-8gpu_all-sys_2nic_gpu-numa-id_tabs.txt": dict(
        gpus=8,
        nics=[("NIC0", None), ("NIC1", None)],
        labels={(0, 1): "SYS", (6, 7): "SYS", (3, 4): "SYS"},
        nic_levels={("NIC0", 6): H, ("NIC1", 6): H, ("NIC0", 0): S, ("NIC1", 7): S},
        affinity={0: ("0-55,112-167", 0, None), 4: ("56-111,168-223", 1, None)},
    ),
    "rtx5090-2gpu_phb_tabs.txt": dict(
        gpus=2,
        nics=[],
        labels={(0, 1): "PHB"},
        nic_levels={},
        affinity={0: ("0-63", 0, None), 1: ("0-63", 0, None)},
    ),
    "tesla-p4-1gpu_numa-na_tabs.txt": dict(
        gpus=1, nics=[], labels={}, nic_levels={}, affinity={0: ("0-7", None, None)}
    ),
    "tf-gdr-readme_4gpu_phb-soc_mlx4_tabs.txt": dict(
        gpus=4,
        nics=[("mlx4_0", None)],
        labels={(0, 1): "PHB", (0, 2): "SYS", (2, 3): "PHB", (1, 3): "SYS"},
        nic_levels={("mlx4_0", 2): H, ("mlx4_0", 0): S},
        affinity={0: ("0-5", None, None), 2: ("6-11", None, None)},
    ),
}


def _read(name: str) -> str:
    return (FIXTURE_DIR / name).read_text()


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_every_complete_fixture_has_expected_facts():
    assert sorted(EXPECTED) == [p.name for p in complete_topo_files()]


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=[n[:-4] for n in sorted(EXPECTED)])
def test_complete_fixture_parses_to_expected_facts(name: str):
    want = EXPECTED[name]
    topo = parse_topo_m(_read(name))
    assert topo.gpu_indices == tuple(range(want["gpus"]))
    assert [(n.name, n.alias) for n in topo.nics] == want["nics"]
    # every pair has a link, every NIC x GPU cell a level, and nothing else
    n = want["gpus"]
    assert set(topo.links) == {(a, b) for a in range(n) for b in range(a + 1, n)}
    assert set(topo.nic_levels) == {(nic.name, g) for nic in topo.nics for g in range(n)}
    for (a, b), label in want["labels"].items():
        link = topo.link(a, b)
        assert (link.a, link.b, link.label) == (a, b, label)
        if label.startswith("NV"):
            assert link.pcie_level is None and link.nvlinks == int(label[2:])
        else:
            assert link.nvlinks == 0 and link.pcie_level is PcieLevel[label]
    for key, level in want["nic_levels"].items():
        assert topo.nic_levels[key] is level, key
    for index, (cpus, numa, gpu_numa) in want["affinity"].items():
        gpu = topo.gpu(index)
        assert (gpu.cpu_affinity, gpu.numa_node, gpu.gpu_numa_id) == (cpus, numa, gpu_numa)
    assert topo.source == "topo-m"


@pytest.mark.parametrize(
    "name, line, last_row, missing",
    [
        ("dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt", 7, "GPU4", "GPU5..GPU15"),
        ("k8s-53497_8gpu_pix-phb-sys_mlx4_TRUNCATED.txt", 7, "GPU4", "GPU5..GPU7"),
    ],
    ids=["dgx2-cut-after-gpu4", "k8s-cut-after-gpu4"],
)
def test_truncated_fixture_names_where_table_stops(name, line, last_row, missing):
    with pytest.raises(TopologyParseError) as info:
        parse_topo_m(_read(name))
    err = info.value
    assert err.line == line
    assert str(err).startswith(f"line {line}: table ends after {last_row}'s row")
    assert missing in err.expected


def test_truncated_fixtures_are_all_covered():
    assert {p.name for p in truncated_topo_files()} == {
        "dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt",
        "k8s-53497_8gpu_pix-phb-sys_mlx4_TRUNCATED.txt",
    }


def test_truncated_dgx2_complete_part():
    topo = parse_topo_m(_read("dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt"), allow_truncated=True)
    assert topo.gpu_indices == (0, 1, 2, 3, 4)
    assert {link.label for link in topo.links.values()} == {"NV6"}
    assert len(topo.links) == 10
    assert [n.name for n in topo.nics] == [f"mlx5_{i}" for i in range(10)]
    assert topo.nic_levels[("mlx5_0", 0)] is PIX and topo.nic_levels[("mlx5_2", 4)] is PIX
    assert topo.nic_levels[("mlx5_9", 4)] is S
    assert topo.gpu(0).cpu_affinity == "0-23,48-71"
    # GPU4's row is the cut last line: its affinity ("0-23,4") cannot be trusted
    assert topo.gpu(4).cpu_affinity is None


def test_truncated_k8s_complete_part():
    topo = parse_topo_m(
        _read("k8s-53497_8gpu_pix-phb-sys_mlx4_TRUNCATED.txt"), allow_truncated=True
    )
    assert topo.gpu_indices == (0, 1, 2, 3, 4)
    got = {k: v.label for k, v in topo.links.items()}
    assert got[(0, 1)] == "PIX" and got[(0, 2)] == "PHB" and got[(2, 3)] == "PIX"
    assert got[(0, 4)] == "SYS" and got[(3, 4)] == "SYS"
    assert topo.nic_levels[("mlx4_0", 0)] is H and topo.nic_levels[("mlx4_0", 4)] is S


def test_allow_truncated_on_complete_text_is_the_same():
    text = _read("dgx1-v100_nv1-nv2_mlx5_oneflow.txt")
    assert parse_topo_m(text, allow_truncated=True) == parse_topo_m(text)


# ---- dialects built from the fixtures -------------------------------------------------


def _tabs_to_spaces(text: str) -> str:
    return "\n".join(line.expandtabs(8) for line in text.split("\n"))


def _spaces_to_tabs(text: str) -> str:
    return "\n".join(re.sub(r"  +", "\t", line) for line in text.split("\n"))


def _trailing_blanks(text: str) -> str:
    return "\n".join(line + " " * 40 for line in text.split("\n"))


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _prompt_lines(text: str) -> str:
    return "srun: job 42 queued\nuser@node:~$ nvidia-smi topo -m\nGPU Topology:\n\n" + text


def _title_on_header(text: str) -> str:
    lines = text.split("\n")
    i = _header_index(lines)
    lines[i] = "GPU Topology:" + lines[i]
    return "\n".join(lines)


def _unindent_header(text: str) -> str:
    lines = text.split("\n")
    i = _header_index(lines)
    lines[i] = lines[i].lstrip()
    return "\n".join(lines)


def _run_together_header(text: str) -> str:
    lines = text.split("\n")
    i = _header_index(lines)
    lines[i] = re.sub(r"(GPU[0-9]+)\s+(?=GPU[0-9]|mlx|NIC)", r"\1", lines[i])
    return "\n".join(lines)


def _no_legend(text: str) -> str:
    return text.split("Legend:")[0].rstrip() if "NIC Legend" not in text else text


def _header_index(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if re.search(r"GPU0\s*GPU1|GPU0\s+CPU", line))


TRANSFORMS = {
    "tabs-to-spaces": _tabs_to_spaces,
    "spaces-to-tabs": _spaces_to_tabs,
    "trailing-blanks": _trailing_blanks,
    "crlf": _crlf,
    "prompt-lines": _prompt_lines,
    "title-on-header": _title_on_header,
    "unindented-header": _unindent_header,
    "run-together-header": _run_together_header,
    "no-legend": _no_legend,
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("path", complete_topo_files(), ids=_ids(complete_topo_files()))
def test_dialect_transform_gives_same_topology(path: Path, transform: str):
    text = path.read_text()
    assert parse_topo_m(TRANSFORMS[transform](text)) == parse_topo_m(text)


@pytest.mark.parametrize(
    "name",
    [
        "dgx1-v100_nv1-nv2_mlx5_oneflow.txt",
        "p40-8gpu_pix-pxb-soc_mlx5_tabs_paddle.txt",
        "dgx1-p100_nv1_soc_4nic_broken-header_sharc.txt",
    ],
    ids=["dgx1-v100", "p40-tabs", "p100-broken-header"],
)
def test_nic_legend_dialect_keeps_real_names(name: str):
    text = _read(name)
    base = parse_topo_m(text)
    names = [nic.name for nic in base.nics]
    for i, nic in enumerate(names):
        text = re.sub(rf"(?<![A-Za-z_]){nic}(?![0-9])", f"NIC{i}", text)
    legend = "\n".join(f"  NIC{i}: {nic}" for i, nic in enumerate(names))
    topo = parse_topo_m(text + "\n\nNIC Legend:\n\n" + legend + "\n")
    assert topo.nics == tuple(Nic(name=nic, alias=f"NIC{i}") for i, nic in enumerate(names))
    assert topo.nic_levels == base.nic_levels and topo.links == base.links


def test_blank_cpu_affinity_takes_the_leading_column():
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t\t0\nGPU1\tPIX\t X \t\t1\n"
    topo = parse_topo_m(text)
    assert [(g.cpu_affinity, g.numa_node) for g in topo.gpus] == [(None, 0), (None, 1)]


def test_numa_affinity_list_keeps_first_node():
    text = (
        "  GPU0  GPU1  CPU Affinity  NUMA Affinity\n"
        "GPU0  X  SYS  0-3  0-1\n"
        "GPU1  SYS  X  4-7  2,3\n"
    )
    topo = parse_topo_m(text)
    assert [(g.cpu_affinity, g.numa_node) for g in topo.gpus] == [("0-3", 0), ("4-7", 2)]


def test_gpu_numa_id_number_is_kept():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-71\t0\t\t2\n"
    assert parse_topo_m(text).gpu(0).gpu_numa_id == 2


def test_generic_nic_names_and_soc():
    text = (
        "\tGPU0\tGPU1\tibp14s0\tCPU Affinity\n"
        "GPU0\t X \tSOC\tPIX\t0-3\n"
        "GPU1\tSOC\t X \tSOC\t4-7\n"
        "ibp14s0\tPIX\tSOC\t X \n"
    )
    topo = parse_topo_m(text)
    assert topo.link(0, 1).pcie_level is S
    assert topo.nics == (Nic("ibp14s0"),)
    assert topo.nic_levels == {("ibp14s0", 0): PIX, ("ibp14s0", 1): S}


# ---- malformed input: one clear error naming the line and what was expected -----------

GOOD = (
    "$ nvidia-smi topo -m\n"  # line 1
    "\tGPU0\tGPU1\tGPU2\tmlx5_0\tCPU Affinity\n"  # line 2
    "GPU0\t X \tNV1\tSYS\tPIX\t0-3\n"  # line 3
    "GPU1\tNV1\t X \tSYS\tPIX\t0-3\n"  # line 4
    "GPU2\tSYS\tSYS\t X \tSYS\t4-7\n"  # line 5
    "mlx5_0\tPIX\tPIX\tSYS\t X \n"  # line 6
    "\nLegend:\n"
)


def test_good_table_parses():
    assert isinstance(parse_topo_m(GOOD), Topology)


@pytest.mark.parametrize(
    "old, new, line, message, expected",
    [
        ("GPU2\tSYS\tSYS", "GPU2\tNV2\tSYS", 5, "GPU2/GPU0 is NV2 but GPU0/GPU2", "symmetric"),
        ("mlx5_0\tPIX\tPIX", "mlx5_0\tPIX\tPXB", 6, "mlx5_0/GPU1 is PXB", "symmetric"),
        ("GPU1\tNV1\t X ", "GPU1\tNV1\tNV1", 4, "GPU1/GPU1 is NV1", "X there"),
        ("GPU0\t X \tNV1\tSYS", "GPU0\t X \tNV1\tQPI", 3, "unknown link 'QPI'", "NV#, PIX"),
        ("GPU1\tNV1\t X \tSYS\tPIX\t0-3", "GPU1\tNV1\t X \tSYS", 4, "GPU1's row has 3", "4"),
        ("GPU1\tNV1", "GPU2\tNV1", 4, "found GPU2's row out of order", "GPU1's row"),
        ("PIX\t0-3\nGPU1", "PIX\tzero\nGPU1", 3, "CPU Affinity 'zero'", "CPU list"),
        ("PIX\t0-3\nGPU1", "PIX\t0-3\t7\nGPU1", 3, "2 values after its 4 link cells", "at most 1"),
        ("X \n\nLegend", "X \tPIX\n\nLegend", 6, "mlx5_0's row has 1 extra", "4 cells"),
        ("\tGPU1\tGPU2", "\tGPU1\tGPU1", 2, "header names column GPU1 twice", "once"),
        ("GPU2\tSYS\tSYS\t X \tSYS\t4-7\n", "", 5, "found mlx5_0's row out", "GPU2's row"),
        ("mlx5_0\tPIX\tPIX\tSYS\t X \n", "", 5, "table ends after GPU2's row", "mlx5_0"),
        ("GPU0\t X", "GPUX\t X", 2, "table ends after its header", "GPU0..GPU2"),
        (
            "X \n\n",
            "X \nmlx5_0\tPIX\tPIX\tSYS\t X \n\n",
            7,
            "mlx5_0's row appears twice",
            "one row",
        ),
        ("X \n\n", "X \nmlx5_1\tPIX\tPIX\tSYS\tSYS\n\n", 7, "row mlx5_1 has no column", "GPU0"),
    ],
    ids=[
        "asymmetric-gpu",
        "asymmetric-nic",
        "no-X-on-diagonal",
        "unknown-token",
        "short-row",
        "rows-out-of-order",
        "bad-cpu-affinity",
        "too-many-affinity-values",
        "nic-row-extra-cell",
        "duplicate-column",
        "missing-gpu-row",
        "missing-nic-row",
        "no-rows",
        "duplicated-last-row",
        "row-without-column",
    ],
)
def test_malformed_table_names_line_and_expectation(old, new, line, message, expected):
    assert old in GOOD
    with pytest.raises(TopologyParseError) as info:
        parse_topo_m(GOOD.replace(old, new, 1))
    err = info.value
    assert err.line == line
    assert str(err).startswith(f"line {line}: ")
    assert message in str(err)
    assert expected in err.expected


@pytest.mark.parametrize(
    "text, expected",
    [("", "topo -m` output"), ("   \n\n", "topo -m` output"), ("hello\nworld\n", "header")],
    ids=["empty", "blank", "no-table"],
)
def test_no_table_is_a_parse_error(text, expected):
    with pytest.raises(TopologyParseError) as info:
        parse_topo_m(text)
    assert info.value.line == 1 and expected in info.value.expected


def test_header_quoted_in_prose_before_the_table_is_skipped():
    text = (
        "- topology: GPU0\tGPU1\tCPU Affinity\n"
        "\n```\n"
        "\tGPU0\tGPU1\tCPU Affinity\n"
        "GPU0\t X \tPXB\t0-3\n"
        "GPU1\tPXB\t X \t4-7\n"
        "```\n"
    )
    topo = parse_topo_m(text)
    assert topo.link(0, 1).pcie_level is X
    assert [g.cpu_affinity for g in topo.gpus] == ["0-3", "4-7"]
