"""Live AMD discovery: run ``amd-smi`` (else ``rocm-smi``) and parse what it prints.

The parsing is :mod:`dlc.topology.parse_amd`'s, on the same text a saved file holds, so
``dlc topology --from-file`` and live discovery read the tools' output one way.
"""

from __future__ import annotations

import shutil
import subprocess

from dlc.errors import DiscoveryError
from dlc.topology.model import Topology
from dlc.topology.parse_amd import parse_amd_smi_text

#: commands whose combined ``--json`` output :func:`parse_amd_smi_text` reads, best first
SMI_COMMANDS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("amd-smi", "topology", "--json"), ("amd-smi", "static", "--json")),
    (("rocm-smi", "--showtopo", "--showtoponuma", "--showbus", "--showproductname",
      "--showmeminfo", "vram", "--json"),),
)  # fmt: skip


def amd_tools_present() -> bool:
    """Whether ``amd-smi`` or ``rocm-smi`` is on PATH."""
    return any(shutil.which(commands[0][0]) for commands in SMI_COMMANDS)


def topology_from_amd_smi(timeout_s: float = 30.0) -> Topology:
    """This host's AMD GPUs from ``amd-smi``, else ``rocm-smi`` (``source="amd-smi"``).

    Raises:
        DiscoveryError: neither tool is on PATH, or every one present fails.
        TopologyParseError: a tool's output is malformed.
    """
    problems = []
    for commands in SMI_COMMANDS:
        tool = commands[0][0]
        if shutil.which(tool) is None:
            problems.append(f"{tool} not on PATH")
            continue
        try:
            text = "\n".join(_run(cmd, timeout_s) for cmd in commands)
        except DiscoveryError as exc:
            problems.append(str(exc))
            continue
        topo = parse_amd_smi_text(text)
        return Topology(
            gpus=topo.gpus,
            links=topo.links,
            driver_version=topo.driver_version,
            source="amd-smi",
        )
    raise DiscoveryError(f"no AMD GPU found: {'; '.join(problems)}")


def _run(cmd: tuple[str, ...], timeout_s: float) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiscoveryError(f"{' '.join(cmd)} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DiscoveryError(f"{' '.join(cmd)} exited {done.returncode}: {tail[0]}")
    return done.stdout
