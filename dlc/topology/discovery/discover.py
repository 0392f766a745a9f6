"""Find out a machine's GPU topology: from a file, NVML, ``nvidia-smi`` or the AMD SMIs.

:func:`discover` is what ``dlc node-config``, ``dlc topo`` and ``dlc local`` call.
Order of preference on a live host: NVML (exact facts, NVSwitch-aware), then
``nvidia-smi`` on PATH, then ``amd-smi``/``rocm-smi`` (an AMD host), else a one-line
:class:`~dlc.errors.DiscoveryError` telling the user to describe the machine with
``--from-file``.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from dlc.errors import DiscoveryError, TopologyParseError
from dlc.topology.model import Topology

SMI = "nvidia-smi"


def discover(
    from_file: str | Path | None = None,
    p2p_file: str | Path | None = None,
    allow_truncated: bool = False,
    nvml: Any = None,
    *,
    smi: str = SMI,
) -> Topology:
    """The GPU topology of this host, or of the machine a file describes.

    Args:
        from_file: ``nvidia-smi topo -m`` output, or ``rocm-smi``/``amd-smi`` output (text
            or ``--json``, detected), saved to a file; skips live discovery.
        p2p_file: ``nvidia-smi topo -p2p r`` output to merge (only with ``from_file``).
        allow_truncated: accept a ``topo -m`` table cut mid-row (file input only).
        nvml: an NVML binding to use instead of importing ``pynvml`` (tests).
        smi: the ``nvidia-smi`` executable name or path for the fallback.

    Returns:
        The topology; its ``source`` is ``"file:<name>"``, ``"nvml"`` or
        ``"nvidia-smi"`` (see :func:`describe_source`).

    Raises:
        DiscoveryError: a file cannot be read, or no live source works.
        TopologyParseError: a file's text is malformed; the message names the file.
    """
    if from_file is not None:
        return _from_files(Path(from_file), p2p_file, allow_truncated)
    if p2p_file is not None:
        raise DiscoveryError("--p2p-file needs --from-file: a P2P matrix alone describes no GPUs")
    try:
        return _from_nvml(nvml)
    except DiscoveryError as exc:
        nvml_reason = str(exc).removeprefix("NVML unavailable: ")
    if shutil.which(smi) is None:
        from dlc.topology.discovery.amd_smi import amd_tools_present, topology_from_amd_smi

        if amd_tools_present():  # an AMD host: amd-smi / rocm-smi describe its GPUs
            return topology_from_amd_smi()
        raise DiscoveryError(
            f"no NVIDIA GPU found: NVML unavailable ({nvml_reason}) and {smi} not on PATH; "
            "use --from-file FILE to describe a machine"
        )
    from dlc.topology.discovery.smi import topology_from_smi

    try:
        return topology_from_smi(smi)
    except DiscoveryError as exc:
        raise DiscoveryError(f"{exc} (NVML was unavailable too: {nvml_reason})") from exc


def describe_source(topo: Topology) -> str:
    """A short human phrase for where a topology came from, for reports and logs."""
    source = topo.source
    if source.startswith("file:"):
        return f"file {source.removeprefix('file:')}"
    return {
        "nvml": "NVML (live)",
        "nvidia-smi": "nvidia-smi (live)",
        "topo-m": "nvidia-smi topo -m text",
        "rocm-smi": "rocm-smi / amd-smi output",
        "amd-smi": "amd-smi (live)",
    }.get(source, source)


def _from_nvml(nvml: Any) -> Topology:
    from dlc.topology.discovery.nvml import topology_from_nvml

    if nvml is None:
        try:
            import pynvml  # lazy: DLC must import on hosts without it
        except ImportError as exc:
            raise DiscoveryError("pynvml not installed: pip install nvidia-ml-py") from exc
        nvml = pynvml
    return topology_from_nvml(nvml)


def _from_files(path: Path, p2p_file: str | Path | None, allow_truncated: bool) -> Topology:
    from dlc.topology.parse_amd import looks_like_amd, parse_amd_smi_text
    from dlc.topology.parse_topo import load_topology_text

    topo_text = _read(path, "topology")
    p2p_path = Path(p2p_file) if p2p_file is not None else None
    p2p_text = _read(p2p_path, "P2P") if p2p_path is not None else None
    try:
        if looks_like_amd(topo_text):  # saved rocm-smi / amd-smi output (text or --json)
            if p2p_text is not None:
                raise TopologyParseError(
                    "--p2p-file is an nvidia-smi matrix; AMD SMI output carries its own links",
                    line=1,
                )
            topo = parse_amd_smi_text(topo_text)
        else:
            topo = load_topology_text(topo_text, p2p_text, allow_truncated=allow_truncated)
    except TopologyParseError as exc:
        names = str(path) if p2p_path is None else f"{path} + {p2p_path}"
        located = TopologyParseError(f"{names}: {exc}")
        located.line, located.expected = exc.line, exc.expected
        raise located from exc
    return replace(topo, source=f"file:{path.name}")


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DiscoveryError(f"cannot read {what} file {path}: {reason}") from exc
