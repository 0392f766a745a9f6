"""`dlc doctor --master`: the agent host's Mesos side (binary, install path, registered address)."""

from __future__ import annotations

from pathlib import Path

from dlc.cli.doctor_agent import agent_host_checks
from dlc.cli.doctor_cmd import Check


def _by_name(checks):
    return {c.name: c for c in checks}


def test_a_host_set_up_as_the_guide_says_passes(tmp_path):
    env = tmp_path / "agent.env"
    env.write_text("# MESOS_IP=127.0.0.1\nMESOS_IP=198.51.100.11\n")
    found = _by_name(agent_host_checks(Check, Path("/opt/dlc/venv"), env,
                                       which=lambda name: "/usr/sbin/mesos-agent"))  # fmt: skip
    assert all(c.ok for c in found.values()), found


def test_missing_agent_other_install_path_and_loopback_address_fail_with_fixes(tmp_path):
    env = tmp_path / "agent.env"
    env.write_text("MESOS_IP=127.0.0.1\n")
    found = _by_name(agent_host_checks(Check, tmp_path / "venv", env, which=lambda name: None))
    if not Path("/usr/sbin/mesos-agent").exists():
        assert not found["mesos agent"].ok and "section 3" in found["mesos agent"].fix
    if not Path("/opt/dlc/venv/bin/dlc").exists():
        assert not found["executor"].ok and "--executor-command" in found["executor"].fix
    assert not found["agent address"].ok
    assert (
        "MESOS_IP in" in found["agent address"].detail
        and "127.0.0.1" in found["agent address"].detail
    )
    env.write_text("MESOS_IP=0.0.0.0\n")
    assert not _by_name(agent_host_checks(Check, None, env))["agent address"].ok
