"""``dlc topology``: exit codes, outputs and one-line errors, through the real CLI group."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.topology.render.jsonio import SCHEMA
from tests.fixture_files import FIXTURE_DIR, complete_topo_files, truncated_topo_files

DGX1 = FIXTURE_DIR / "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
RTX5090 = FIXTURE_DIR / "rtx5090-2gpu_phb_tabs.txt"
RTX5090_P2P = FIXTURE_DIR / "rtx5090-2gpu_phb_tabs.p2p.txt"


def run(*args: str, width: int = 100):
    # No NVML and no nvidia-smi here: every call names its input with --from-file,
    # except the one test that checks the "no GPU" error.
    return CliRunner().invoke(cli, ["topology", *map(str, args)], env={"COLUMNS": str(width)})


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit)  # handled, not a crash
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_json_for_every_complete_fixture(path):
    result = run("--from-file", path, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == SCHEMA
    header = next(line for line in path.read_text().splitlines() if "GPU0" in line)
    columns = re.findall(r"GPU\d+", header)
    assert [g["name"] for g in doc["gpus"]] == columns


@pytest.mark.parametrize("path", complete_topo_files(), ids=lambda p: p.name[:40])
def test_report_for_every_complete_fixture(path):
    result = run("--from-file", path)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert re.match(r"\d+ GPUs? on \d+ NUMA nodes?", first)
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_report_merges_the_p2p_file():
    result = run("--from-file", RTX5090, "--p2p-file", RTX5090_P2P)
    assert result.exit_code == 0, result.output
    assert "no P2P-capable pair (GNS)" in result.stdout
    without = run("--from-file", RTX5090)
    assert "P2P between the two GPUs" in without.stdout  # PHB alone would suggest P2P


def test_no_bandwidth_leaves_out_the_gbps_matrix():
    assert "GB/s one direction" in run("--from-file", DGX1).stdout
    assert "GB/s one direction" not in run("--from-file", DGX1, "--no-bandwidth").stdout


@pytest.mark.parametrize("path", truncated_topo_files(), ids=lambda p: p.name[:40])
def test_truncated_fixture_is_a_one_line_error_naming_the_line(path):
    result = run("--from-file", path)
    assert_one_line_error(result, path.name)
    assert re.search(r"line \d+", result.stderr)


@pytest.mark.parametrize("path", truncated_topo_files(), ids=lambda p: p.name[:40])
def test_truncated_fixture_accepted_when_allowed(path):
    result = run("--from-file", path, "--allow-truncated", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["gpus"]) >= 1


def test_fixture_lists_are_not_empty():
    assert len(complete_topo_files()) >= 15
    assert len(truncated_topo_files()) >= 2


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        pytest.param(None, ["cannot read", "no-such-file.txt"], id="missing-file"),
        pytest.param("", ["Error: "], id="empty-file"),
        pytest.param("hello\nworld\n", ["line"], id="garbage-text"),
        pytest.param("\x00\x01\xff binary \x02", ["Error: "], id="binary-garbage"),
        pytest.param("{not json", ["not valid JSON"], id="broken-json"),
        pytest.param('{"schema": "x/2"}', ["schema"], id="json-wrong-schema"),
        pytest.param(
            "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tFOO\t X \n", ["line 3"], id="bad-cell-in-table"
        ),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, content, fragments):
    path = tmp_path / "no-such-file.txt"
    if content is not None:
        path.write_text(content, encoding="utf-8", errors="surrogateescape")
    assert_one_line_error(run("--from-file", path), *fragments)


def test_p2p_file_needs_from_file():
    assert_one_line_error(run("--p2p-file", RTX5090_P2P), "--p2p-file")


def test_no_gpu_and_no_file_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi on PATH
    monkeypatch.setitem(sys.modules, "pynvml", None)  # and NVML cannot be imported
    result = run()
    assert_one_line_error(result, "--from-file")


def test_json_output_reads_back_to_the_same_document(tmp_path):
    first = run("--from-file", DGX1, "--json")
    saved = tmp_path / "dgx1.json"
    saved.write_text(first.stdout)
    second = run("--from-file", saved, "--json")
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout) == json.loads(first.stdout)
    report = run("--from-file", saved)
    assert "hybrid cube-mesh" in report.stdout


def test_svg_and_png_written(tmp_path):
    svg, png = tmp_path / "t.svg", tmp_path / "t.png"
    result = run("--from-file", DGX1, "--svg", svg, "--png", png, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["schema"] == SCHEMA  # stdout stays pure JSON
    assert f"wrote {svg}" in result.stderr and f"wrote {png}" in result.stderr
    root = ET.parse(svg).getroot()
    assert len([g for g in root.iter() if "gpu" in (g.get("class") or "").split()]) == 8
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unwritable_svg_is_a_one_line_error(tmp_path):
    result = run("--from-file", DGX1, "--svg", tmp_path / "missing" / "t.svg")
    assert_one_line_error(result, "--svg", "cannot write")
