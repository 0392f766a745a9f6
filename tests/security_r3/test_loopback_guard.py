"""Red-team session 13, finding 59: a CPU-only gang shares the agent's loopback services.

Every member of a gang (``--nodes 2``, ``gpus: 0`` included) runs with the host's network, so
a user with no GPU right reached what the agent serves on 127.0.0.1 only: DCGM's
``nv-hostengine`` (127.0.0.1:5555, unauthenticated), Fabric Manager, ``dlc local``'s emulator.
The gang needs the host network (its peers connect to the rendezvous port and to the ports
NCCL/gloo open themselves, on the agent's address), so DLC keeps it and installs an nftables
table that refuses job uids' new traffic to 127.0.0.0/8 and ::1, except DNS and the Mesos
port range (:mod:`dlc.executor.loopback_guard`).

Shown for real in network namespaces the tests create: :mod:`loopback_probe` stands a root
listener in for nv-hostengine and tries it from processes under job uids, before and after
the guard is installed (with the executor's own installer), and in a container of the real
engine that shares such a namespace, as a host-network container shares the agent's.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dlc.app.local import LocalCluster, LocalConfig
from dlc.cli.doctor_guard import check_loopback_guard, read_ruleset
from dlc.errors import DlcError
from dlc.executor.loopback_guard import TABLE, GuardMode, GuardSettings, LoopbackGuard, ruleset
from tests.app.test_local import DGX1, STAND_IN
from tests.multihost.netns import bare_namespace

PROBE = Path(__file__).with_name("loopback_probe.py")


@pytest.fixture
def netns():
    """A fresh network namespace (its own loopback and an empty firewall); removed after."""
    if shutil.which("ip") is None or shutil.which("nft") is None:
        pytest.fail("`ip` and `nft` are needed for the loopback guard tests", pytrace=False)
    with bare_namespace("dlc-lo") as name:
        yield name


def _probe(ns: str) -> dict[str, str]:
    done = subprocess.run(["ip", "netns", "exec", ns, sys.executable, str(PROBE)],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(done.stdout)


def _in(ns: str):
    def run(argv, stdin: str = "") -> tuple[int, str]:
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], input=stdin,
                              capture_output=True, text=True, timeout=20, check=False)  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    return run


def test_job_uids_lose_the_agents_loopback_services_and_keep_their_own_and_dns(netns):
    before = _probe(netns)
    # the finding: a job uid reads the stand-in's banner on every loopback address
    for name in ("127.0.0.1:5555", "127.0.1.1:5555", "[::1]:5555"):
        assert before[f"job 65534 {name}"] == "ok"

    guard = LoopbackGuard(GuardMode.ENFORCE, run=_in(netns))
    assert guard.present() is False
    guard.before_host_network("t1")
    assert guard.present() is True
    after = _probe(netns)

    refused = ["job 65534 127.0.0.1:5555", "job 1000 127.0.0.1:5555", "job 65534 127.0.1.1:5555",
               "job 65534 [::1]:5555", "job 65534 ::ffff:127.0.0.1:5555"]  # fmt: skip
    # refused at once (a TCP reset), not left to time out
    assert {name: after[name] for name in refused} == dict.fromkeys(refused, "ECONNREFUSED")
    assert after["job 65534 udp 127.0.0.1:5555"] == "EPERM"
    # the price: a job's own loopback listener outside the open ports is refused to it as well
    assert before["job 65534 own 127.0.0.1:6000"] == "ok"
    assert after["job 65534 own 127.0.0.1:6000"] == "ECONNREFUSED"
    # what stays: root and system accounts, DNS, a job's own listener on its Mesos port,
    # replies to connections others open to a job
    kept = ["root 127.0.0.1:5555", "system uid 999 127.0.0.1:5555", "job 65534 dns 127.0.0.53:53",
            "job 65534 own 127.0.0.1:31005", "root to job's 127.0.0.1:6000"]  # fmt: skip
    assert {name: after[name] for name in kept} == dict.fromkeys(kept, "ok")


def test_reinstalling_replaces_the_table_and_leaves_other_tables_alone(netns):
    run = _in(netns)
    run(["nft", "add table inet operators_own"])
    guard = LoopbackGuard(GuardMode.ENFORCE, GuardSettings("65534", ("53",)), run=run)
    guard.install()
    guard.install()  # a second executor, or the same one after a firewall reload
    code, tables = run(["nft", "list", "tables"])
    assert code == 0
    assert tables.split("\n").count(f"table inet {TABLE}") == 1
    assert "table inet operators_own" in tables
    code, text = run(["nft", "list", "table", "inet", TABLE])
    assert "meta skuid 65534" in text and "31000" not in text


def test_a_firewall_reload_is_undone_before_the_next_host_network_task(netns):
    run = _in(netns)
    guard = LoopbackGuard(GuardMode.ENFORCE, run=run)
    guard.before_host_network("t1")
    run(["nft", "flush", "ruleset"])  # what `systemctl reload nftables` does first
    assert guard.present() is False
    guard.before_host_network("t2")
    assert guard.present() is True


def test_enforce_fails_when_nft_cannot_load_the_rules():
    guard = LoopbackGuard(GuardMode.ENFORCE, run=lambda argv, stdin: (1, "Permission denied"))
    with pytest.raises(DlcError, match="cannot install the loopback guard.*Permission denied"):
        guard.before_host_network("t1")


def test_warn_logs_once_when_the_guard_is_missing(caplog):
    calls = []

    def run(argv, stdin):
        calls.append(argv)
        return 1, "Error: No such file or directory"

    guard = LoopbackGuard(GuardMode.WARN, run=run)
    guard.before_host_network("t1")
    guard.before_host_network("t2")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "is not installed" in warnings[0] and "t1" in warnings[0]
    assert all(argv[:2] == ["nft", "list"] for argv in calls)  # warn never changes the firewall


def test_off_does_nothing():
    def run(argv, stdin):
        raise AssertionError("nft called")

    LoopbackGuard(GuardMode.OFF, run=run).before_host_network("t1")


def test_settings_refuse_what_is_not_a_number_or_range():
    with pytest.raises(DlcError, match="not a number"):
        GuardSettings("1000-", ("53",))
    with pytest.raises(DlcError, match="not a number"):
        GuardSettings(open_ports=("53; flush ruleset",))
    assert "th dport { 53, 8000-8100 }" in ruleset(GuardSettings(open_ports=("53", "8000-8100")))


def test_doctor_reports_the_guard_missing_then_installed(netns):
    run = _in(netns)
    run(["nft", "add table inet other"])
    missing = check_loopback_guard(read_ruleset(lambda argv: run(argv)))
    assert not missing.ok and "no nft table inet dlc_loopback_guard" in missing.detail
    LoopbackGuard(GuardMode.ENFORCE, run=run).install()
    present = check_loopback_guard(read_ruleset(lambda argv: run(argv)))
    assert present.ok, present.detail


def test_dlc_local_executors_leave_the_hosts_firewall_alone(tmp_path):
    # its emulated agents are 127.0.0.N: a gang's members meet on loopback there
    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path), api_port=0, executor_command=STAND_IN
    )
    cluster = LocalCluster(config).start()
    try:
        agents = cluster.emulator.master.agents.values()
        assert agents and all(dict(a.executor_env)["DLC_LOOPBACK_GUARD"] == "off" for a in agents)
    finally:
        cluster.stop()


def test_the_shipped_agent_unit_loads_the_guard_before_each_start(netns):
    systemd = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
    unit = (systemd / "dlc-mesos-agent.service").read_text()
    pre = next(line for line in unit.splitlines() if line.startswith("ExecStartPre="))
    argv = shlex.split(pre.removeprefix("ExecStartPre="))
    assert argv == [
        "/opt/dlc/venv/bin/dlc",
        "setup-host",
        "loopback-guard",
        "$DLC_LOOPBACK_GUARD_ARGS",
    ]
    settings = dict(
        line.split("=", 1)
        for line in (systemd / "agent.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # as systemd runs it: the unbraced variable split into words, the installed dlc
    command = [
        sys.executable,
        "-m",
        "dlc",
        *argv[1:3],
        *settings["DLC_LOOPBACK_GUARD_ARGS"].split(),
    ]
    code, out = _in(netns)(command)
    assert code == 0, out
    assert LoopbackGuard(run=_in(netns)).present() is True
    assert _probe(netns)["job 65534 127.0.0.1:5555"] == "ECONNREFUSED"


@pytest.fixture
def two_hosts():
    """Two namespaces joined by a veth pair: agents at 198.51.100.1 and 198.51.100.2."""
    tag = uuid.uuid4().hex[:6]
    hosts = [f"dlc-lo-a-{tag}", f"dlc-lo-b-{tag}"]
    for name in hosts:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        a, b = (_in(name) for name in hosts)
        # made inside the first namespace, its peer moved straight to the second
        assert a(["ip", "link", "add", "va", "type", "veth", "peer", "name", "vb",
                  "netns", hosts[1]])[0] == 0  # fmt: skip
        for run, link, address in ((a, "va", "198.51.100.1/24"), (b, "vb", "198.51.100.2/24")):
            for argv in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", address,
                         "dev", link], ["ip", "link", "set", link, "up"]):  # fmt: skip
                code, out = run(argv)
                assert code == 0, out
        yield hosts
    finally:
        for name in hosts:
            subprocess.run(["ip", "netns", "del", name], check=False)


def test_a_gangs_own_traffic_between_agent_addresses_is_untouched(two_hosts):
    probe = str(Path(__file__).with_name("gang_probe.py"))
    for host in two_hosts:
        LoopbackGuard(GuardMode.ENFORCE, run=_in(host)).install()
    serve = ["ip", "netns", "exec", two_hosts[0], sys.executable, probe, "serve", "198.51.100.1"]
    node0 = subprocess.Popen(serve, stdout=subprocess.PIPE, text=True)
    try:
        assert node0.stdout is not None
        ephemeral = node0.stdout.readline().strip()
        assert int(ephemeral) not in range(31000, 32001)  # outside every open port
        for host in two_hosts:  # a local rank of node 0, then node 1 on the other agent
            code, out = _in(host)([sys.executable, probe, "connect", "198.51.100.1",
                                   "31000", ephemeral])  # fmt: skip
            assert code == 0, out
            assert json.loads(out) == ["ok", "ok"]
    finally:
        node0.kill()
        node0.wait(10)


def test_a_container_uid_the_rules_do_not_hold_is_named_once(caplog):
    guard = LoopbackGuard(GuardMode.ENFORCE, run=lambda argv, stdin: (0, ""))
    for task, uid in (("t1", 65534), ("t2", 1000), ("t3", 0), ("t4", 0)):
        guard.before_host_network(task, uid)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "task t3 runs on the host network as uid 0, which the loopback guard "
        "(uids 1000-4294967294) does not hold"
    ]
