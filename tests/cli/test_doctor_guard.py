"""`dlc doctor`'s executor-authentication and firewall checks: against a real Mesos agent
process, and against real nftables/iptables rules loaded in a network namespace of the test's
own (the rules are the ones docs/install.md gives)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlc.cli.doctor_guard import (
    AgentProcess,
    check_executor_auth,
    check_firewall,
    find_agents,
    read_ruleset,
)
from tests.multihost.netns import bare_namespace
from tests.real_mesos import real_mesos_master

ROOT = Path(__file__).resolve().parents[2]
INSTALL = (ROOT / "docs" / "install.md").read_text()


def _nft_rules() -> str:
    start = INSTALL.index("    table inet dlc_guard {")
    end = INSTALL.index("\n    }\n", start) + len("\n    }\n")
    return "\n".join(line[4:] for line in INSTALL[start:end].splitlines()) + "\n"


def _iptables_rules() -> list[list[str]]:
    return [line.split()[1:] for line in re.findall(r"^    (iptables -I .+)$", INSTALL, re.M)]


@pytest.fixture
def netns():
    """A fresh network namespace (its own, empty firewall); removed afterwards."""
    if shutil.which("ip") is None:
        pytest.fail("`ip` (iproute2) is needed for the firewall tests", pytrace=False)
    with bare_namespace("dlc-guard") as name:
        yield name


def _in(ns: str):
    def run(argv: list[str]) -> tuple[int, str]:
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                              text=True, timeout=20, check=False)  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    run.namespace = ns
    return run


def _nft_only(tool: str) -> str | None:
    return shutil.which(tool) if tool == "nft" else None


def test_the_guides_nftables_rules_pass_and_an_empty_ruleset_fails(netns, tmp_path):
    run = _in(netns)
    agents = [AgentProcess(1, {"port": "5051"})]
    assert check_firewall(agents, read_ruleset(run, _nft_only)).ok is False
    rules = tmp_path / "guard.nft"
    rules.write_text(_nft_rules())
    assert run(["nft", "-f", str(rules)])[0] == 0
    check = check_firewall(agents, read_ruleset(run, _nft_only))
    assert check.ok, check.line()
    assert check.line() == "ok    firewall: nft drops container traffic to ports 5050, 5051"
    _host_network_job_is_kept_away(run)
    # without the output chain, host-network gangs reach the ports: named
    assert run(["nft", "delete", "chain", "inet", "dlc_guard", "output"])[0] == 0
    check = check_firewall(agents, read_ruleset(run, _nft_only))
    assert not check.ok and "5051 from host-network containers" in check.line()
    assert "docker bridge" not in check.line()


_CONNECT = (
    "import os, socket, sys\n"
    "if sys.argv[1] != '0':\n"
    "    os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))\n"
    "try:\n"
    "    s = socket.socket(); s.settimeout(1); s.connect(('127.0.0.1', 5051)); s.close()\n"
    "except OSError:\n"
    "    sys.exit(3)\n"
)


def _host_network_job_is_kept_away(run) -> None:
    """A listener on the agent's port in the namespace: root (the agent's side) still reaches
    it, a job's uid (65534, as DLC runs containers) no longer does."""
    assert run(["ip", "link", "set", "lo", "up"])[0] == 0
    listen = "import socket, time; s = socket.create_server(('127.0.0.1', 5051)); time.sleep(30)"
    server = subprocess.Popen(["ip", "netns", "exec", run.namespace, sys.executable, "-c", listen])
    try:
        deadline = time.monotonic() + 10
        while run([sys.executable, "-c", _CONNECT, "0"])[0] != 0:
            assert time.monotonic() < deadline, "the test listener did not come up"
            time.sleep(0.05)
        assert run([sys.executable, "-c", _CONNECT, "65534"])[0] == 3
    finally:
        server.kill()
        server.wait()


def test_the_guides_iptables_rules_pass(netns):
    run = _in(netns)
    for rule in _iptables_rules():
        code, text = run(["iptables", *rule])
        assert code == 0, text
    tool, text = read_ruleset(run, lambda t: shutil.which(t) if t == "iptables" else None)
    check = check_firewall([], (tool, text))
    assert check.ok, check.line()


def test_agent_flags_and_environment_decide_executor_auth(tmp_path):
    def proc(pid: int, argv: list[str], env: dict[str, str]) -> None:
        folder = tmp_path / str(pid)
        folder.mkdir()
        (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (folder / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))

    proc(10, ["/usr/sbin/mesos-agent", "--authenticate_http_executors",
              "--jwt_secret_key=/etc/dlc/k", "--port=5151"], {})  # fmt: skip
    proc(11, ["/usr/bin/python3", "mesos-agent"], {})
    [agent] = find_agents(tmp_path)
    assert agent.port == 5151 and check_executor_auth([agent]).ok
    proc(12, ["mesos-slave"], {"MESOS_AUTHENTICATE_HTTP_EXECUTORS": "false"})
    check = check_executor_auth(find_agents(tmp_path))
    assert not check.ok and "pid 12: off" in check.line() and "--jwt_secret_key" in check.line()
    assert "no mesos-agent process" in check_executor_auth([]).line()


@pytest.mark.mesos
@pytest.mark.parametrize("auth", ["true", "false"])
def test_a_real_agent_is_judged_by_its_executor_auth(tmp_path, auth):
    with real_mesos_master(tmp_path / "mesos", MESOS_AUTHENTICATE_HTTP_EXECUTORS=auth) as mesos:
        pid = int((mesos.run_dir / "host.pid").read_text())
        mine = [a for a in find_agents() if a.pid == pid]
        assert mine, "the mesos-local-host process was not found in /proc"
        check = check_executor_auth(mine)
    assert check.ok is (auth == "true"), check.line()
