"""``dlc doctor``: check an agent host, one line per check (ok/FAIL and the fix).

Checks the NVIDIA driver (NVML, else ``nvidia-smi``, else ``/proc/driver/nvidia``), the
Docker engine and how containers get GPUs (the ``nvidia`` runtime, else a legacy driver
volume), that the Mesos agent authenticates its executors and that the firewall keeps containers
away from the agent's and the master's ports (:mod:`dlc.cli.doctor_guard`), and -- with
``--master URL`` -- that the Mesos agent of this host advertises what ``dlc node-config`` says
it should. Exit code 1 when any check fails.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import asdict
from pathlib import Path

import click

from dlc.cli.doctor_check import Check
from dlc.cli.doctor_guard import guard_checks
from dlc.cli.output import emit

PROC_VERSION = Path("/proc/driver/nvidia/version")


def check_driver() -> tuple[Check, str | None]:
    """The driver through NVML, else ``nvidia-smi``, else ``/proc``; and its version."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            version = version.decode() if isinstance(version, bytes) else version
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
        return Check("driver", True, f"NVIDIA {version}, {count} GPU(s) (NVML)"), version
    except Exception:  # noqa: BLE001 - no pynvml, no libnvidia-ml, no driver: try the next way
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        versions = done.stdout.split()
        if done.returncode == 0 and versions:
            detail = f"NVIDIA {versions[0]}, {len(versions)} GPU(s) (nvidia-smi)"
            return Check("driver", True, detail), versions[0]
    if PROC_VERSION.is_file():
        from dlc.executor.host_gpus import parse_driver_version

        try:
            version = parse_driver_version(PROC_VERSION.read_text())
        except Exception:  # noqa: BLE001 - reported as a failed check below
            version = None
        if version:
            detail = f"NVIDIA {version} (/proc; NVML and nvidia-smi did not answer)"
            fix = "install the driver's user-space part (libnvidia-ml, nvidia-smi)"
            return Check("driver", False, detail, fix), version
    return Check("driver", False, "no NVIDIA driver found (NVML, nvidia-smi, /proc)",
                 "install the NVIDIA driver; `nvidia-smi` must list the GPUs"), None  # fmt: skip


def check_docker(driver_version: str | None) -> list[Check]:
    """The Docker engine, and how its containers would get GPUs."""
    try:
        from dlc.executor.runtime import DockerRuntime

        runtime = DockerRuntime()
        version = runtime.client.version().get("Version", "?")
    except Exception as exc:  # noqa: BLE001 - any failure means the executor cannot start
        return [Check("docker", False, f"engine not reachable ({str(exc).splitlines()[0]})",
                      "start dockerd (systemctl start docker) and let the agent's user "
                      "use it (docker group)")]  # fmt: skip
    checks = [Check("docker", True, f"engine {version} reachable")]
    runtimes = runtime.engine_runtimes()
    volume = f"nvidia_driver_{driver_version}" if driver_version else None
    if "nvidia" in runtimes:
        checks.append(Check("gpu runtime", True, "nvidia runtime registered (toolkit style)"))
    elif volume and runtime.volume_exists(volume):
        checks.append(
            Check(
                "gpu runtime",
                True,
                f"legacy driver volume {volume}",
            )
        )
    else:
        have = ", ".join(sorted(runtimes)) or "none"
        checks.append(Check(
            "gpu runtime", False, f"no nvidia runtime (runtimes: {have}) and no legacy volume",
            "install the NVIDIA container toolkit and run `nvidia-ctk runtime configure "
            "--runtime=docker`, then restart dockerd",
        ))  # fmt: skip
    return checks


def check_agent(master: str, hostname: str, from_file: str | None, fetch=None) -> Check:
    """Whether the master's agent for ``hostname`` advertises this host's node-config."""
    from dlc.mesos.master import fetch_agents
    from dlc.topology.discovery.discover import discover
    from dlc.topology.node_config import node_config

    fix = "restart mesos-agent with $(dlc node-config --format args)"
    try:
        want = node_config(discover(from_file=from_file))
    except Exception as exc:  # noqa: BLE001 - the driver check says more
        return Check("node-config", False, f"cannot read this host's GPUs ({exc})", fix)
    agents = (fetch or fetch_agents)(master.rstrip("/"))
    mine = [a for a in agents if a.hostname in (hostname, hostname.split(".")[0])]
    if not mine:
        names = ", ".join(sorted(a.hostname for a in agents)) or "none (is --master right?)"
        detail = f"no agent {hostname} at {master} (agents: {names})"
        start = "start mesos-agent on this host with --master and the node-config flags"
        return Check("node-config", False, detail, start)
    agent = mine[0]
    wrong = [k for k, v in want.attributes.items() if agent.attributes.get(k) != v]
    ids = {int(i) for i in want.resources.split("gpu_ids:{")[-1].rstrip("}").split(",") if i}
    if "gpu_ids" in want.resources and agent.gpu_ids != frozenset(ids):
        wrong.append("gpu_ids")
    if wrong:
        detail = f"agent {agent.hostname} advertises other {', '.join(wrong)}"
        return Check("node-config", False, detail, fix)
    return Check("node-config", True, f"agent {agent.hostname} advertises this host's GPUs")


@click.command("doctor")
@click.option("--master", metavar="URL",
              help="Mesos master (http://HOST:5050): also compare what this host's agent "
              "advertises with `dlc node-config`.")  # fmt: skip
@click.option("--hostname", default=socket.getfqdn, show_default="this host's name",
              help="The agent's hostname as the master lists it.")  # fmt: skip
@click.option("--from-file", metavar="FILE", hidden=True, help="topo -m text instead of NVML.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
def command(master, hostname, from_file, output):
    """Check this agent host: driver, Docker, GPU runtime, executor authentication, the
    firewall in front of Mesos's ports, node-config flags."""
    driver, version = check_driver()
    checks = [driver, *check_docker(version), *guard_checks()]
    if master:
        checks.append(check_agent(master, hostname, from_file))
    if output in ("json", "yaml"):
        emit([asdict(c) for c in checks], output)
    else:
        for check in checks:
            click.echo(check.line())
    if not all(c.ok for c in checks):
        click.get_current_context().exit(1)
