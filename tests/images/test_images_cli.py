"""`dlc images list` and `dlc images check` through the real CLI entry."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_list_one_framework_as_json():
    result = run("images", "list", "--framework", "tensorflow", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and {r["framework"] for r in rows} == {"tensorflow"}
    assert any(r["image"] == "tensorflow/tensorflow:2.15.0-gpu" for r in rows)


def test_list_table_has_header_and_rows():
    result = run("images", "list")
    lines = result.output.splitlines()
    assert lines[0].split() == ["framework", "version", "cuda", "rocm", "min", "driver", "image"]
    assert any(line.startswith("pytorch") and "2.3.1" in line for line in lines)


@pytest.mark.parametrize(
    ("driver", "runs", "not_runs"),
    [
        pytest.param("535.104.05", "2.3.1", "2.5.1", id="r535"),
        pytest.param("550.54.14", "2.5.1", "2.6.0", id="r550"),
    ],
)
def test_check_driver(driver, runs, not_runs):
    result = run("images", "check", "--driver", driver, "--json")
    assert result.exit_code == 0, result.output
    verdict = {
        r["version"]: r["runs"] for r in json.loads(result.output) if r["framework"] == "pytorch"
    }
    assert verdict[runs] is True
    assert verdict[not_runs] is False


def test_unknown_framework_is_one_line_error():
    result = run("images", "list", "--framework", "caffe")
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: framework: 'caffe' is not in the image catalog")
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_bad_driver_is_one_line_error():
    result = run("images", "check", "--driver", "new")
    assert result.exit_code == 1
    assert "dotted numbers" in result.output
