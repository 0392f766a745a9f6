"""`dlc executor` wires GPU usage sampling: interval flag/env, off for simulated GPUs, reports
through the driver's framework message."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import dlc.cli.executor_cmd as executor_cmd
import dlc.executor.executor as executor_mod
import dlc.executor.runtime as runtime_mod
from dlc.cli.main import cli


@pytest.fixture
def started(monkeypatch, tmp_path):
    """Runs `dlc executor ARGS` up to the driver loop; returns the executor it would serve."""
    seen = {}
    monkeypatch.setattr(executor_cmd, "_configure_logging", lambda path: None)
    monkeypatch.setattr(runtime_mod, "DockerRuntime", lambda: object())
    monkeypatch.setattr(executor_mod, "make_driver", lambda executor: object())
    monkeypatch.setattr(executor_mod, "serve", lambda driver, executor: seen.update(ex=executor))
    env = {"MESOS_FRAMEWORK_ID": "fw", "MESOS_EXECUTOR_ID": "ex", "MESOS_SANDBOX": str(tmp_path),
           "MESOS_AGENT_ENDPOINT": "127.0.0.1:5051", "DLC_GPU_SAMPLE_S": ""}  # fmt: skip

    def run(*args, **extra_env):
        result = CliRunner().invoke(
            cli, ["executor", "--no-reaper", *args], env={**env, **extra_env}
        )
        return result, seen.get("ex")

    return run


def test_sampling_is_on_by_default_and_reports_through_the_driver(started):
    result, executor = started()
    assert result.exit_code == 0, result.output
    usage = executor.runner.usage
    assert usage.interval_s == 10 and usage.send == executor.sink.message


def test_interval_from_the_environment_and_off_with_zero_or_simulated_gpus(started):
    _, executor = started(DLC_GPU_SAMPLE_S="2.5")
    assert executor.runner.usage.interval_s == 2.5
    assert started("--gpu-sample-interval", "0")[1].runner.usage is None
    assert started("--gpu-style", "none")[1].runner.usage is None


def test_a_bad_interval_is_one_line(started):
    result, _ = started(DLC_GPU_SAMPLE_S="often")
    assert result.exit_code == 2 and "--gpu-sample-interval" in result.output
    assert "Traceback" not in result.output
