"""Build and run the native P2P probe (the only part of :mod:`dlc.probe` with side effects).

The probe is built from ``native/p2p_probe`` of a DLC source checkout with its own
Makefile; the binary lands in ``native/p2p_probe/build/``. An installed package (a wheel,
no checkout) carries the same two files as package data (``dlc/probe/native/``) and builds
them in the user's cache, ``~/.cache/dlc/p2p_probe-<version>/build/``. ``DLC_P2P_PROBE``
may name a prebuilt binary instead (e.g. one built with a CUDA 12 ``nvcc`` for V100).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from dlc.errors import ProbeError, ProbeOutputError
from dlc.probe.result import ProbeResult, parse_probe_json

#: environment variable naming a prebuilt probe binary
BINARY_ENV = "DLC_P2P_PROBE"
#: where nvcc lives when it is not on PATH (the CUDA toolkit's default prefix)
NVCC_FALLBACK = Path("/usr/local/cuda/bin/nvcc")
NVCC_MISSING = "nvcc not found: install the CUDA toolkit or pass --probe-json FILE"

_SIZE = re.compile(r"^([1-9][0-9]*)([KMG]?)(?:i?B)?$", re.IGNORECASE)
_MAKE_NOISE = re.compile(r"^make(\[\d+\])?: \*\*\*")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


#: the probe's sources as package data (in a checkout: links to ``native/p2p_probe``)
PACKAGED_SOURCES = Path(__file__).resolve().parent / "native"
_SOURCE_FILES = ("Makefile", "p2p_probe.cu")


def checkout_source_dir() -> Path:
    """``native/p2p_probe`` of the source checkout this package was imported from."""
    return Path(__file__).resolve().parents[2] / "native" / "p2p_probe"


def probe_source_dir() -> Path:
    """Where the probe is built: the checkout's sources, else a cache copy of the packaged ones.

    Raises:
        ProbeError: neither a checkout nor packaged sources (a broken install).
    """
    checkout = checkout_source_dir()
    if (checkout / "Makefile").is_file():
        return checkout
    return cached_sources()


def cached_sources() -> Path:
    """The packaged sources copied to ``$XDG_CACHE_HOME/dlc/p2p_probe-<version>`` (built there:
    site-packages may be read-only and is shared by every user)."""
    from dlc import __version__

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "dlc" / f"p2p_probe-{__version__}"
    if not all((PACKAGED_SOURCES / name).is_file() for name in _SOURCE_FILES):
        raise ProbeError(
            f"probe sources not found in {PACKAGED_SOURCES}: reinstall dlc, "
            "or pass --probe-json FILE"
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in _SOURCE_FILES:
            data = (PACKAGED_SOURCES / name).read_bytes()
            if not (target / name).is_file() or (target / name).read_bytes() != data:
                (target / name).write_bytes(data)
    except OSError as exc:
        raise ProbeError(
            f"cannot prepare the probe build in {target} ({exc.strerror}); set XDG_CACHE_HOME "
            "to a writable directory"
        ) from None
    return target


def default_binary() -> Path:
    """The probe binary: ``$DLC_P2P_PROBE`` if set, else the checkout's build output."""
    override = os.environ.get(BINARY_ENV)
    if override:
        return Path(override)
    return probe_source_dir() / "build" / "p2p_probe"


def find_nvcc() -> str | None:
    """Path of ``nvcc`` (PATH first, then the CUDA toolkit's default prefix), or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    return str(NVCC_FALLBACK) if NVCC_FALLBACK.is_file() else None


def build_probe(force: bool = False, *, timeout: float = 600.0) -> Path:
    """Build the probe with ``make`` when ``nvcc`` exists and return the binary's path.

    Args:
        force: rebuild even when the binary is up to date (``make -B``).
        timeout: seconds allowed for the compile.

    Raises:
        ProbeError: no ``nvcc`` and no prebuilt binary, no probe sources, or the build failed.
    """
    binary = default_binary()
    if os.environ.get(BINARY_ENV):
        if not binary.is_file():
            raise ProbeError(f"{BINARY_ENV}={binary}: no such file; unset it or fix the path")
        return binary
    nvcc = find_nvcc()
    if nvcc is None:
        if binary.is_file() and not force:
            return binary
        raise ProbeError(NVCC_MISSING)
    source = probe_source_dir()
    if not (source / "Makefile").is_file():
        raise ProbeError(
            f"probe sources not found at {source}: run DLC from a source checkout "
            "or pass --probe-json FILE"
        )
    if shutil.which("make") is None:
        raise ProbeError("make not found: install make (Debian: apt-get install make)")
    cmd = ["make", "-C", str(source), f"NVCC={nvcc}"] + (["-B"] if force else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"building the probe took longer than {timeout:.0f}s") from None
    if proc.returncode != 0 or not binary.is_file():
        detail = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit {proc.returncode}"
        raise ProbeError(f"building the probe failed: {detail}")
    return binary


def parse_size(text: str | int) -> int:
    """Bytes of a transfer size such as ``64M``, ``512K``, ``1G`` (binary units) or ``4096``.

    Raises:
        ProbeError: not a positive size; the message names ``--size``.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise ProbeError(f"--size: must be positive, got {text}")
        return text
    match = _SIZE.match(str(text).strip())
    if match is None:
        raise ProbeError(f"--size: expected a size such as 64M, 512K or 1G, got {text!r}")
    value = int(match.group(1)) * _SCALE[match.group(2).upper()]
    if value > 64 << 30:
        raise ProbeError(f"--size: at most 64G, got {text!r}")
    return value


def format_gpus(gpus: Sequence[int]) -> str:
    """``--gpus`` argument text; raises ProbeError on negative or repeated indices."""
    if any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise ProbeError(f"--gpus: expected distinct GPU indices >= 0, got {list(gpus)}")
    return ",".join(str(g) for g in gpus)


def run_probe(
    binary: str | Path,
    gpus: Sequence[int] | None = None,
    size: str | int = "64M",
    timeout: float = 900.0,
    *,
    iters: int | None = None,
    repeats: int | None = None,
) -> ProbeResult:
    """Run the probe binary and read its JSON.

    Args:
        binary: the probe executable (see :func:`build_probe`).
        gpus: CUDA device indices (PCI bus order) to measure; ``None`` for all.
        size: bandwidth transfer size (``"64M"`` or bytes).
        timeout: seconds before the run is abandoned (8 GPUs: about two minutes).
        iters: copies per timed run (probe default when ``None``).
        repeats: timed runs per figure, the median is kept (probe default when ``None``).

    Raises:
        ProbeRunError: the probe reported no GPU, no driver or a CUDA failure.
        ProbeError: the binary is missing, timed out, or printed no readable JSON.
    """
    cmd = [str(binary), "--size", str(parse_size(size))]
    if gpus is not None:
        cmd += ["--gpus", format_gpus(gpus)]
    if iters is not None:
        cmd += ["--iters", str(iters)]
    if repeats is not None:
        cmd += ["--repeats", str(repeats)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise ProbeError(
            f"probe binary {binary} not found: build it with `make -C native/p2p_probe`"
        ) from None
    except PermissionError:
        raise ProbeError(f"probe binary {binary} is not executable") from None
    except subprocess.TimeoutExpired:
        raise ProbeError(
            f"the probe ran longer than {timeout:.0f}s; measure fewer GPUs with --gpus"
        ) from None
    try:
        result = parse_probe_json(proc.stdout)
    except ProbeOutputError as exc:
        if proc.returncode == 0:
            raise
        detail = _last_line(proc.stderr) or _last_line(proc.stdout) or "no output"
        raise ProbeError(f"the probe failed with exit code {proc.returncode}: {detail}") from exc
    if proc.returncode != 0:
        raise ProbeError(f"the probe exited {proc.returncode} although it printed a result")
    return result


def _last_line(text: str | None) -> str:
    """The last informative line: make's own "*** [target] Error 1" says nothing."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    useful = [line for line in lines if not _MAKE_NOISE.match(line)]
    return (useful or lines or [""])[-1][:300]
