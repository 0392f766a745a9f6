"""``dlc doctor``'s checks of the doors a container could use to reach Mesos on this host.

Whoever reaches an agent's executor API can send status updates for other users' tasks unless
the agent authenticates its executors, and ``/master/state`` hands out every id needed
(red-team finding 2026-11-26). Three checks, one line each:

* ``executor auth``: the running ``mesos-agent`` (or ``mesos-local-host``) has
  ``--authenticate_http_executors`` (flag or ``MESOS_AUTHENTICATE_HTTP_EXECUTORS``) and a JWT
  key (``--jwt_secret_key``, formerly ``--executor_secret_key``);
* ``firewall``: some drop/reject rule (``nft list ruleset``, else ``iptables -S``) keeps
  bridge-network containers (``docker0``/``br-*``) and host-network ones (their uid or cgroup)
  away from the agent's port and the master's (docs/install.md has the rules);
* ``loopback guard``: nftables holds the table that keeps job uids off 127.0.0.0/8 and ::1,
  which host-network jobs share with the agent's services (:mod:`dlc.executor.loopback_guard`).

Reading another process's flags and the firewall needs root; without it the line says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dlc.cli.doctor_check import Check
from dlc.executor.loopback_guard import TABLE, installed

AGENT_NAMES = ("mesos-agent", "mesos-slave", "mesos-local-host")
DEFAULT_AGENT_PORT = 5051
MASTER_PORT = 5050
_FLAG_TRUE = ("", "true", "1", "yes")
AUTH_FIX = (
    "start mesos-agent with --authenticate_http_executors --jwt_secret_key=FILE "
    "--http_authenticators=jwt (docs/install.md, 'Executor authentication')"
)
FIREWALL_FIX = "add the nftables or iptables rules of docs/install.md ('Keep containers away')"
LOOPBACK_FIX = "sudo dlc setup-host loopback-guard (dlc-mesos-agent.service runs it at each start)"


@dataclass
class AgentProcess:
    """A Mesos agent process found in ``/proc``: its pid, flags and ``MESOS_*`` variables."""

    pid: int
    flags: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    env_readable: bool = True

    def setting(self, name: str) -> str | None:
        """A flag's value (``--name=value`` or a bare ``--name``), else ``MESOS_NAME``."""
        if name in self.flags:
            return self.flags[name]
        return self.env.get(f"MESOS_{name.upper()}")

    @property
    def port(self) -> int:
        """The agent's port (the flag, else 5051)."""
        text = self.setting("port") or ""
        return int(text) if text.isdigit() else DEFAULT_AGENT_PORT


def find_agents(proc: Path = Path("/proc")) -> list[AgentProcess]:
    """The Mesos agent processes of this host, by their command line."""
    found = []
    for entry in _pids(proc):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if not args or Path(args[0]).name not in AGENT_NAMES:
            continue
        agent = AgentProcess(int(entry.name), _flags(args[1:]))
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            pairs = (item.decode(errors="replace").partition("=") for item in environ if item)
            agent.env = {k: v for k, _, v in pairs if k.startswith("MESOS_")}
        except OSError:
            agent.env_readable = False
        found.append(agent)
    return found


def _pids(proc: Path) -> Iterator[Path]:
    try:
        yield from (p for p in proc.iterdir() if p.name.isdigit())
    except OSError:
        return


def _flags(args: list[str]) -> dict[str, str]:
    flags = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            flags[name.replace("-", "_")] = value
    return flags


def check_executor_auth(agents: list[AgentProcess]) -> Check:
    """Whether every agent here authenticates its executors."""
    if not agents:
        return Check("executor auth", False, "no mesos-agent process on this host", AUTH_FIX)
    for agent in agents:
        value = agent.setting("authenticate_http_executors")
        on = value is not None and value.lower() in _FLAG_TRUE
        key = agent.setting("jwt_secret_key") or agent.setting("executor_secret_key")
        if on and key:
            continue
        if not on and not agent.env_readable and "authenticate_http_executors" not in agent.flags:
            detail = f"cannot read the environment of mesos-agent (pid {agent.pid}); run as root"
            return Check("executor auth", False, detail, AUTH_FIX)
        what = "no --jwt_secret_key" if on else "off (any local process may forge updates)"
        return Check("executor auth", False, f"mesos-agent pid {agent.pid}: {what}", AUTH_FIX)
    pids = ", ".join(str(a.pid) for a in agents)
    return Check("executor auth", True, f"on (mesos-agent pid {pids}: JWT executor tokens)")


Runner = Callable[[list[str]], tuple[int, str]]


def _run(argv: list[str]) -> tuple[int, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    return done.returncode, done.stdout + done.stderr


def read_ruleset(run: Runner = _run, which=shutil.which) -> tuple[str, str] | None:
    """``(tool, text)`` of the firewall's rules, or None when no tool answered."""
    for tool, argv in (("nft", ["nft", "list", "ruleset"]), ("iptables", ["iptables", "-S"])):
        if which(tool) is None:
            continue
        code, text = run(argv)
        if code == 0 and text.strip():
            return tool, text
    return None


_VERDICT = re.compile(r"\b(drop|reject)\b", re.IGNORECASE)
_BRIDGE = re.compile(r"docker0|\bbr-|\bbr\+|\"br-\*\"")
_HOST_NET = re.compile(r"skuid|uid-owner|cgroup", re.IGNORECASE)


def guarded(rules: str, port: int) -> tuple[bool, bool]:
    """Whether some drop/reject rule for ``port`` selects bridge traffic, and host-network
    traffic (a socket's uid or cgroup)."""
    bridge = host_net = False
    mentions = re.compile(rf"(?<!\d){port}(?!\d)")
    for rule in _rules(rules):
        if not _VERDICT.search(rule) or not mentions.search(rule):
            continue
        bridge = bridge or bool(_BRIDGE.search(rule))
        host_net = host_net or bool(_HOST_NET.search(rule))
    return bridge, host_net


def _rules(text: str) -> Iterator[str]:
    """Rules one per line; nft's ``define``d sets are inlined so ``$mesos_ports`` counts."""
    defines = dict(re.findall(r"^\s*define\s+(\w+)\s*=\s*(.+)$", text, re.MULTILINE))
    for line in text.splitlines():
        for name, value in defines.items():
            line = line.replace(f"${name}", value)
        yield line


def check_firewall(agents: list[AgentProcess], ruleset: tuple[str, str] | None) -> Check:
    """Whether the firewall keeps containers away from the agent's and the master's ports."""
    if ruleset is None:
        return Check("firewall", False, "cannot read nft or iptables rules (run as root)",
                     FIREWALL_FIX)  # fmt: skip
    tool, text = ruleset
    ports = sorted({a.port for a in agents} | {DEFAULT_AGENT_PORT, MASTER_PORT})
    missing = []
    for port in ports:
        bridge, host_net = guarded(text, port)
        if not bridge:
            missing.append(f"{port} from the docker bridge")
        if not host_net:
            missing.append(f"{port} from host-network containers (uid/cgroup)")
    if missing:
        return Check("firewall", False, f"{tool}: nothing drops {'; '.join(missing)}",
                     FIREWALL_FIX)  # fmt: skip
    shown = ", ".join(map(str, ports))
    return Check("firewall", True, f"{tool} drops container traffic to ports {shown}")


def check_loopback_guard(ruleset: tuple[str, str] | None) -> Check:
    """Whether nftables keeps job uids off this host's loopback (host-network jobs)."""
    if ruleset is None:
        return Check("loopback guard", False, "cannot read nft rules (run as root)", LOOPBACK_FIX)
    tool, text = ruleset
    if tool == "nft" and installed(text):
        detail = f"nft table inet {TABLE} refuses job uids' traffic to 127.0.0.0/8 and ::1"
        return Check("loopback guard", True, detail)
    detail = f"no nft table inet {TABLE}: host-network jobs reach every loopback service here"
    return Check("loopback guard", False, detail, LOOPBACK_FIX)


def guard_checks(proc: Path = Path("/proc"), run: Runner = _run, which=shutil.which) -> list[Check]:
    """The three checks, for ``dlc doctor`` (:mod:`dlc.cli.doctor_cmd`)."""
    agents = find_agents(proc)
    rules = read_ruleset(run, which)
    return [check_executor_auth(agents), check_firewall(agents, rules), check_loopback_guard(rules)]
