"""``dlc doctor``: one line per check, the fix on failures, exit 1 when any fails.

The driver comes from a fake NVML built from a real machine's topology (no GPU here);
Docker is the real engine; the master's agent list is what ``/master/slaves`` holds.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest
from click.testing import CliRunner

from dlc.cli import doctor_cmd
from dlc.cli.main import cli
from dlc.mesos.master import MasterAgent
from dlc.topology.discovery.discover import discover
from dlc.topology.node_config import node_config
from tests.fakes.fake_nvml import FakeNvml
from tests.fixture_files import FIXTURE_DIR

DGX1 = FIXTURE_DIR / "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"


@pytest.fixture
def fake_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(discover(from_file=str(DGX1)),
                                                        driver_version="535.104.05"))  # fmt: skip


def test_driver_through_nvml(fake_nvml):
    check, version = doctor_cmd.check_driver()
    assert check.ok and version == "535.104.05"
    assert check.line() == "ok    driver: NVIDIA 535.104.05, 8 GPU(s) (NVML)"


def test_no_driver_is_a_failure_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as without the binding
    monkeypatch.setattr(doctor_cmd.shutil, "which", lambda name: None)
    monkeypatch.setattr(doctor_cmd, "PROC_VERSION", tmp_path / "none")
    check, version = doctor_cmd.check_driver()
    assert not check.ok and version is None
    assert check.line().startswith("FAIL  driver: no NVIDIA driver found")
    assert "; fix: install the NVIDIA driver" in check.line()


def test_the_real_engine_is_found_and_its_gpu_runtime_judged(fake_nvml):
    result = CliRunner().invoke(cli, ["doctor", "-o", "json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["driver"]["ok"] and checks["docker"]["ok"]
    assert "reachable" in checks["docker"]["detail"]
    runtime = checks["gpu runtime"]
    assert runtime["ok"] or "nvidia-ctk runtime configure" in runtime["fix"]
    assert result.exit_code == (0 if all(c["ok"] for c in checks.values()) else 1)


def _agent(hostname: str, topo=None) -> MasterAgent:
    config = node_config(topo or discover(from_file=str(DGX1)))
    return MasterAgent("a1", hostname, dict(config.attributes), frozenset(range(8)))


def test_agent_flags_match():
    check = doctor_cmd.check_agent("http://m:5050", "gpu1.example.org", str(DGX1),
                                   fetch=lambda url: [_agent("gpu1")])  # fmt: skip
    assert check.ok, check.line()


def test_agent_flags_that_differ_are_named_with_the_fix():
    other = discover(from_file=str(FIXTURE_DIR / "p40-8gpu_pix-pxb-soc_mlx5_tabs_paddle.txt"))
    agent = replace(_agent("gpu1", other), gpu_ids=frozenset(range(4)))
    check = doctor_cmd.check_agent("http://m:5050", "gpu1", str(DGX1), fetch=lambda url: [agent])
    assert not check.ok
    assert "advertises other dlc_topo" in check.line() and "gpu_ids" in check.line()
    assert check.line().endswith("fix: restart mesos-agent with $(dlc node-config --format args)")


def test_agent_missing_lists_the_ones_there():
    check = doctor_cmd.check_agent("http://m:5050", "gpu9", str(DGX1),
                                   fetch=lambda url: [_agent("gpu1")])  # fmt: skip
    assert not check.ok and "no agent gpu9 at http://m:5050 (agents: gpu1)" in check.line()
