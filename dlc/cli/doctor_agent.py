"""``dlc doctor``'s checks of the agent host's Mesos side: the agent binary, where DLC is
installed (the path the scheduler starts executors from) and the address the agent registers
with (docs/install.md, "Agent hosts"). Kept apart from doctor_cmd.py's driver/Docker checks.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from dlc.app.advertise import UNSPECIFIED, is_loopback

#: where docs/install.md installs DLC on every host; the scheduler unit's --executor-command
INSTALL_PREFIX = Path("/opt/dlc/venv")
AGENT_ENV = Path("/etc/dlc/agent.env")


def agent_host_checks(check_type, prefix: Path | None = None, agent_env: Path = AGENT_ENV,
                      which=shutil.which) -> list:  # fmt: skip
    """The Mesos-side checks, as ``check_type`` (doctor_cmd's ``Check``) objects."""
    return [
        _mesos_agent(check_type, which),
        _install_path(check_type, Path(sys.prefix) if prefix is None else prefix),
        _agent_address(check_type, agent_env),
    ]


def _mesos_agent(check_type, which):
    found = which("mesos-agent") or (
        "/usr/sbin/mesos-agent" if Path("/usr/sbin/mesos-agent").exists() else None
    )
    if found:
        return check_type("mesos agent", True, found)
    return check_type("mesos agent", False, "no mesos-agent on PATH or in /usr/sbin",
                      "install Apache Mesos 1.11 (docs/install.md, section 3)")  # fmt: skip


def _install_path(check_type, prefix: Path):
    executor = INSTALL_PREFIX / "bin" / "dlc"
    if prefix.resolve() == INSTALL_PREFIX.resolve() or executor.exists():
        return check_type("executor", True, f"{executor} exists")
    return check_type(
        "executor", False, f"no {executor} (this dlc is in {prefix})",
        "install DLC in /opt/dlc/venv on every host (the scheduler starts "
        "`/opt/dlc/venv/bin/dlc executor`), or match --executor-command",
    )  # fmt: skip


def _agent_address(check_type, agent_env: Path):
    if not agent_env.exists():
        return check_type("agent address", True, f"no {agent_env} (not set up by dlc setup-host)")
    values = dict(
        line.split("=", 1) for line in agent_env.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )  # fmt: skip
    ip = values.get("MESOS_IP", "").strip()
    if not ip or ip in UNSPECIFIED or is_loopback(ip):
        return check_type(
            "agent address", False, f"MESOS_IP in {agent_env} is {ip or 'unset'}",
            "set MESOS_IP and MESOS_HOSTNAME to this host's address on the cluster network",
        )  # fmt: skip
    return check_type("agent address", True, f"MESOS_IP={ip}")
