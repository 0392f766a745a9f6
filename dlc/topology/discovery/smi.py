"""GPU discovery through the ``nvidia-smi`` command (the fallback when NVML is missing).

:func:`topology_from_smi` runs three commands and merges what they print:

* ``nvidia-smi topo -m``: the pair matrix, CPU/NUMA affinity (the text parser);
* ``nvidia-smi topo -p2p r``: P2P read status per pair (optional: old drivers lack it);
* ``nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version
  --format=csv,noheader,nounits``: model, UUID, bus id, memory, driver;

plus the ``CUDA Version`` from the plain ``nvidia-smi`` banner (optional). The
minor number (``/dev/nvidia<minor>``) is not in any query field; it is read from
``/proc/driver/nvidia/gpus/<bus id>/information`` when that file exists.
"""

from __future__ import annotations

import csv
import re
import subprocess
from dataclasses import replace
from pathlib import Path

from dlc.errors import DiscoveryError
from dlc.topology.discovery.nvml import normalize_bus_id
from dlc.topology.model import Gpu, Topology
from dlc.topology.parse_topo import load_topology_text

QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version")
QUERY_ARGS = (f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
DEFAULT_TIMEOUT_S = 30.0

_CUDA_BANNER = re.compile(r"CUDA Version:\s*(\d+\.\d+)")
_MINOR_LINE = re.compile(r"^\s*Device Minor:\s*(\d+)\s*$", re.MULTILINE)
_UNSET = {"", "[n/a]", "n/a", "[not supported]", "[unknown error]"}


def topology_from_smi(
    smi: str = "nvidia-smi",
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    proc_gpus: Path = PROC_GPUS,
    allow_truncated: bool = False,
) -> Topology:
    """Discover this host's GPUs by running ``nvidia-smi``.

    Args:
        smi: the ``nvidia-smi`` executable (name on PATH or path).
        timeout_s: limit for each command; a hung driver makes nvidia-smi block.
        proc_gpus: the driver's ``/proc`` GPU folder (tests point it elsewhere).
        allow_truncated: accept a ``topo -m`` table that stops mid-row.

    Returns:
        A topology with ``source="nvidia-smi"``.

    Raises:
        DiscoveryError: nvidia-smi is missing, fails (e.g. cannot talk to the
            driver), times out, or its answers disagree on the GPUs.
        TopologyParseError: ``topo -m`` or ``topo -p2p`` text is malformed.
    """
    topo_text = run_smi(smi, ["topo", "-m"], timeout_s)
    try:
        p2p_text: str | None = run_smi(smi, ["topo", "-p2p", "r"], timeout_s)
    except DiscoveryError:
        p2p_text = None  # drivers before ~R450 have no -p2p; P2P stays unknown
    query_text = run_smi(smi, list(QUERY_ARGS), timeout_s)
    topo = load_topology_text(topo_text, p2p_text, allow_truncated=allow_truncated)
    rows = parse_query_gpu(query_text)
    gpus = merge_query(topo.gpus, rows, proc_gpus)
    migs = read_mig_modes(smi, timeout_s)
    gpus = tuple(replace(g, mig_mode=migs.get(g.index, g.mig_mode)) for g in gpus)
    drivers = {row["driver_version"] for row in rows.values() if row["driver_version"] is not None}
    return replace(
        topo,
        gpus=gpus,
        driver_version=min(drivers) if drivers else topo.driver_version,
        cuda_version=_cuda_version(smi, timeout_s) or topo.cuda_version,
        source="nvidia-smi",
    )


def run_smi(smi: str, args: list[str], timeout_s: float) -> str:
    """Run ``smi args`` and return its stdout.

    Raises:
        DiscoveryError: not found, timed out, or non-zero exit; the message quotes
            the command and nvidia-smi's own first line of complaint.
    """
    shown = " ".join(["nvidia-smi", *args])
    try:
        done = subprocess.run(
            [smi, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError as exc:
        raise DiscoveryError(
            f"`{shown}`: {smi} not found; is the NVIDIA driver installed?"
        ) from exc
    except PermissionError as exc:
        raise DiscoveryError(f"`{shown}`: {smi} is not executable ({exc.strerror})") from exc
    except subprocess.TimeoutExpired as exc:
        raise DiscoveryError(
            f"`{shown}` did not answer within {timeout_s:g}s; the NVIDIA driver may be hung"
        ) from exc
    if done.returncode != 0:
        # nvidia-smi prints its complaints on stdout, not stderr.
        reason = _first_line(done.stdout) or _first_line(done.stderr) or "no output"
        raise DiscoveryError(f"`{shown}` failed (exit {done.returncode}): {reason}")
    return done.stdout


def parse_query_gpu(text: str) -> dict[int, dict[str, str | None]]:
    """Parse ``--query-gpu`` CSV (``noheader,nounits``) into rows keyed by GPU index.

    ``[N/A]``/``[Not Supported]`` cells become ``None``.

    Raises:
        DiscoveryError: a row has the wrong number of fields or a bad index.
    """
    rows: dict[int, dict[str, str | None]] = {}
    for number, fields in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), 1):
        if not fields or not "".join(fields).strip():
            continue
        if len(fields) != len(QUERY_FIELDS):
            raise DiscoveryError(
                f"nvidia-smi --query-gpu line {number}: expected {len(QUERY_FIELDS)} fields "
                f"({','.join(QUERY_FIELDS)}), got {len(fields)}"
            )
        cells = {
            k: (None if v.strip().lower() in _UNSET else v.strip())
            for k, v in zip(QUERY_FIELDS, fields, strict=True)
        }
        index = cells["index"]
        if index is None or not index.isdigit():
            raise DiscoveryError(f"nvidia-smi --query-gpu line {number}: bad GPU index {index!r}")
        rows[int(index)] = cells
    return rows


def merge_query(
    gpus: tuple[Gpu, ...], rows: dict[int, dict[str, str | None]], proc_gpus: Path = PROC_GPUS
) -> tuple[Gpu, ...]:
    """Add model, UUID, bus id, memory and minor number to the ``topo -m`` GPUs.

    Raises:
        DiscoveryError: the two commands list different GPU indices.
    """
    if set(rows) != {g.index for g in gpus}:
        raise DiscoveryError(
            f"nvidia-smi topo -m lists GPUs {sorted(g.index for g in gpus)} but --query-gpu "
            f"lists {sorted(rows)}; GPUs changed between the calls, run it again"
        )
    merged = []
    for gpu in gpus:
        row = rows[gpu.index]
        bus_id = normalize_bus_id(row["pci.bus_id"])
        memory = row["memory.total"]
        merged.append(
            replace(
                gpu,
                model=row["name"] or gpu.model,
                uuid=row["uuid"] or gpu.uuid,
                pci_bus_id=bus_id or gpu.pci_bus_id,
                memory_mib=int(float(memory)) if memory else gpu.memory_mib,
                minor=read_minor(bus_id, proc_gpus) if bus_id else gpu.minor,
            )
        )
    return tuple(merged)


def read_mig_modes(smi: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[int, str]:
    """Current MIG mode per GPU index (``enabled``/``disabled``); empty when not answered.

    A separate, optional query: drivers older than R450 reject the ``mig.mode.current``
    field, and pre-Ampere GPUs answer ``[N/A]`` (left out of the result).
    """
    try:
        text = run_smi(
            smi, ["--query-gpu=index,mig.mode.current", "--format=csv,noheader"], timeout_s
        )
    except DiscoveryError:
        return {}
    modes = {}
    for fields in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(fields) == 2 and fields[0].strip().isdigit():
            value = fields[1].strip().lower()
            if value in ("enabled", "disabled"):
                modes[int(fields[0])] = value
    return modes


def read_minor(bus_id: str, proc_gpus: Path = PROC_GPUS) -> int | None:
    """``Device Minor`` from the driver's ``/proc`` entry of a GPU, or ``None``.

    The driver names the folder ``0000:3b:00.0`` (4-digit domain, lower case),
    while nvidia-smi prints ``00000000:3B:00.0``.
    """
    domain, bus, rest = bus_id.split(":")
    folder = f"{int(domain, 16):04x}:{bus.lower()}:{rest.lower()}"
    try:
        text = (proc_gpus / folder / "information").read_text(errors="replace")
    except OSError:
        return None
    match = _MINOR_LINE.search(text)
    return int(match.group(1)) if match else None


def _cuda_version(smi: str, timeout_s: float) -> str | None:
    try:
        banner = run_smi(smi, [], timeout_s)
    except DiscoveryError:
        return None
    match = _CUDA_BANNER.search(banner)
    return match.group(1) if match else None


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
