"""The scheduler process's GIL switch interval (dlc/app/interpreter.py, issue 26)."""

from __future__ import annotations

import gc
import sys

import pytest
from click.testing import CliRunner

import dlc.app.service
from dlc.app.interpreter import DEFAULT_SWITCH_INTERVAL_S, GC_THRESHOLDS, tune_interpreter
from dlc.cli.main import cli
from dlc.errors import DlcError


@pytest.fixture(autouse=True)
def _restore_interval():
    before = sys.getswitchinterval(), gc.get_threshold()
    yield
    sys.setswitchinterval(before[0])
    gc.set_threshold(*before[1])


def test_tune_sets_the_interval_and_returns_the_old_one():
    sys.setswitchinterval(0.005)
    assert tune_interpreter() == pytest.approx(0.005)
    assert sys.getswitchinterval() == pytest.approx(DEFAULT_SWITCH_INTERVAL_S)
    assert gc.get_threshold() == GC_THRESHOLDS
    assert tune_interpreter(0.002) == pytest.approx(DEFAULT_SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == pytest.approx(0.002)


@pytest.mark.parametrize("bad", [0.0, 0.00001, 0.5])
def test_tune_refuses_an_interval_out_of_bounds_and_keeps_the_old(bad):
    sys.setswitchinterval(0.005)
    gc.set_threshold(700, 10, 10)
    with pytest.raises(ValueError, match="outside"):
        tune_interpreter(bad)
    assert sys.getswitchinterval() == pytest.approx(0.005)
    assert gc.get_threshold() == (700, 10, 10)


class _Seen(DlcError):
    pass


def _scheduler(tmp_path, monkeypatch, *extra: str):
    seen: list[float] = []

    def service(config, *args, **kwargs):
        seen.append((sys.getswitchinterval(), gc.get_threshold()))
        raise _Seen("stopped before starting")

    monkeypatch.setattr(dlc.app.service, "SchedulerService", service)
    args = ["scheduler", "--master", "127.0.0.1:5050", "--db", str(tmp_path / "d.db"), *extra]
    return CliRunner().invoke(cli, args), seen


def test_dlc_scheduler_runs_its_service_with_the_interval_asked(tmp_path, monkeypatch):
    sys.setswitchinterval(0.005)
    result, seen = _scheduler(tmp_path, monkeypatch, "--gil-switch-interval", "0.002")
    assert "stopped before starting" in result.output
    assert seen == [(pytest.approx(0.002), GC_THRESHOLDS)]
    result, seen = _scheduler(tmp_path, monkeypatch)
    assert seen == [(pytest.approx(DEFAULT_SWITCH_INTERVAL_S), GC_THRESHOLDS)]


def test_dlc_scheduler_refuses_a_bad_interval_in_one_line(tmp_path, monkeypatch):
    result, seen = _scheduler(tmp_path, monkeypatch, "--gil-switch-interval", "1")
    assert result.exit_code == 2 and not seen
    assert "--gil-switch-interval" in result.output and "Traceback" not in result.output
