"""``dlc probe``: saved runs (--probe-json), a stand-in probe binary, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import dlc.probe.runner as runner
from dlc.cli.main import cli
from dlc.probe import compare_with_nominal, parse_probe_json
from dlc.topology.model import Topology

from .helpers import SAMPLE_PATH, fake_probe, recorded_argv


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["probe", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_output_matches_the_comparison(dgx1: Topology, dgx1_path: Path) -> None:
    code, out, err = _invoke(
        "--probe-json", str(SAMPLE_PATH), "--from-file", str(dgx1_path), "--json"
    )
    assert (code, err) == (0, "")
    doc = json.loads(out)
    rows = compare_with_nominal(dgx1, parse_probe_json(SAMPLE_PATH.read_text()))
    assert [(r["a"], r["b"], r["label"]) for r in doc["comparison"]] == [
        (r.a, r.b, r.label) for r in rows
    ]
    assert [r["measured_gbps"] for r in doc["comparison"]] == [
        round(r.measured_gbps, 3) for r in rows
    ]
    assert doc["topology_source"] == dgx1.source
    assert len(doc["probe"]["pairs"]) == 56


def test_table_shows_pairs_links_and_ratios(dgx1: Topology, dgx1_path: Path) -> None:
    code, out, _ = _invoke("--probe-json", str(SAMPLE_PATH), "--from-file", str(dgx1_path))
    assert code == 0
    row = next(line for line in out.splitlines() if "GPU0-GPU3" in line)
    nv2 = next(
        r
        for r in compare_with_nominal(dgx1, parse_probe_json(SAMPLE_PATH.read_text()))
        if (r.a, r.b) == (0, 3)
    )
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:6] == [
        "GPU0-GPU3",
        "NV2",
        "yes",
        f"{nv2.nominal_gbps:.1f}",
        f"{nv2.measured_gbps:.1f}",
        f"{nv2.ratio:.2f}",
    ]


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        pytest.param(
            {"version": 1, "error": {"exit_code": 3, "kind": "no_device", "message": "none"}},
            "Error: P2P probe: none; without a GPU here, pass --probe-json FILE",
            id="saved-no-gpu-error",
        ),
        pytest.param({"version": 1, "devices": []}, "Error: probe JSON: pairs: missing", id="bad"),
    ],
)
def test_bad_saved_run_is_one_error_line(
    tmp_path: Path, dgx1_path: Path, doc: dict, needle: str
) -> None:
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(doc))
    code, out, err = _invoke("--probe-json", str(saved), "--from-file", str(dgx1_path))
    assert code == 1
    assert out == ""
    assert err.startswith(needle) and err.count("\n") == 1


def test_probe_of_another_machine_is_refused(fixture_dir: Path) -> None:
    two_gpus = fixture_dir / "rtx3090-2gpu_nv4-bridge_lxc.txt"
    code, _, err = _invoke("--probe-json", str(SAMPLE_PATH), "--from-file", str(two_gpus))
    assert code == 1
    assert err.startswith("Error: probe GPU 2 is not in the topology")


def test_runs_the_built_probe_with_the_options(
    tmp_path: Path, dgx1_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = fake_probe(tmp_path, stdout=SAMPLE_PATH.read_text())
    monkeypatch.setattr(runner, "build_probe", lambda: binary)
    code, out, err = _invoke(
        "--gpus", "0,1", "--size", "8M", "--iters", "3", "--from-file", str(dgx1_path), "--json"
    )
    assert (code, err) == (0, "")
    assert recorded_argv(tmp_path) == ["--size", str(8 << 20), "--gpus", "0,1", "--iters", "3"]
    assert len(json.loads(out)["comparison"]) == 28


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--gpus", "0,x"], "Error: --gpus: expected GPU indices", id="gpus"),
        pytest.param(["--gpus", "1,1"], "Error: --gpus: a GPU is listed twice", id="gpus-twice"),
        pytest.param(["--size", "lots"], "Error: --size: expected a size", id="size"),
    ],
)
def test_bad_flags_fail_before_building(
    args: list[str], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_build() -> Path:
        raise AssertionError("built the probe despite a bad flag")

    monkeypatch.setattr(runner, "build_probe", must_not_build)
    code, _, err = _invoke(*args)
    assert code == 1
    assert err.startswith(needle)


def test_missing_nvcc_is_one_error_line(monkeypatch: pytest.MonkeyPatch, dgx1_path: Path) -> None:
    monkeypatch.delenv(runner.BINARY_ENV, raising=False)
    monkeypatch.setattr(runner, "find_nvcc", lambda: None)
    monkeypatch.setattr(runner, "default_binary", lambda: dgx1_path.parent / "no-probe")
    code, _, err = _invoke("--from-file", str(dgx1_path))
    assert code == 1
    assert err == "Error: nvcc not found: install the CUDA toolkit or pass --probe-json FILE\n"
