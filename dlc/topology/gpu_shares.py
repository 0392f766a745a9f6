"""GPU shares as Mesos RANGES: one block per GPU at a fixed stride (pure arithmetic).

Mesos counts ``gpus`` in whole units, but it does exact arithmetic on custom RANGES resources
(``../shared/DESIGN.md``, "GPU sharing on Mesos"). Each agent therefore also advertises, for
GPU index ``i`` and stride ``2**20``:

* ``gpu_mem:[i*2^20 .. i*2^20 + MiB_i - 1]``: GPU i's memory, one range value per MiB;
* ``gpu_core:[i*2^20 .. i*2^20 + 999]``: GPU i's compute in thousandths.

A whole-GPU task consumes ``gpus:k``, its ``gpu_ids`` items and the WHOLE blocks of its GPUs;
a share consumes sub-ranges of ONE GPU's two blocks and no ``gpus``/``gpu_ids``. The master
then guarantees that nothing is given twice, across scheduler crashes. This module builds,
reads and splits those ranges; the agent side (:mod:`dlc.topology.node_config`), the scheduler
and the emulator all use it. No I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dlc.errors import FieldError

#: distance between two GPUs' blocks; a GPU's memory in MiB must fit below it (1 TiB)
STRIDE = 1 << 20
#: compute units per GPU (thousandths, the openb trace's ``gpu_milli``)
CORE_UNITS = 1000
GPU_MEM = "gpu_mem"
GPU_CORE = "gpu_core"
#: the agent attribute naming the node's enforcement backend
ATTR_SHARING = "dlc_sharing"

Ranges = tuple[tuple[int, int], ...]


class SharingMode(enum.StrEnum):
    """How an agent enforces shares (``dlc node-config --sharing``)."""

    MPS = "mps"  #: NVIDIA MPS limits, one control daemon per shared GPU (Volta and later)
    WATCHDOG = "watchdog"  #: NVML memory sampling; a task over its share is ended
    MIG = "mig"  #: existing MIG instances only (DLC never reconfigures MIG)
    NONE = "none"  #: time-slicing, no limits at all
    #: time-slicing with DLC's CUDA shim: memory refused at allocation, faults kept apart
    SHIM = "shim"


# Model names of GPUs older than Volta (no MPS memory or thread limits): Kepler, Maxwell,
# Pascal data-centre parts and the GeForce/Quadro/TITAN series of the same generations.
_PRE_VOLTA = re.compile(
    r"\b(K\d{1,2}m?|GRID K\d|M\d{1,2}|P\d{1,3}|GTX (6|7|9|10)\d\d|Quadro [KMP]\d+"
    r"|TITAN (X|Xp|Black))\b",
    re.IGNORECASE,
)


def default_sharing(models: Iterable[str | None]) -> SharingMode:
    """``mps`` when every GPU is known to be Volta or later, else ``watchdog`` (any GPU).

    An unknown model (``None``) counts as old: the watchdog works everywhere.
    """
    models = list(models)
    if not models or any(m is None or _PRE_VOLTA.search(m) for m in models):
        return SharingMode.WATCHDOG
    return SharingMode.MPS


def parse_sharing(text: str) -> SharingMode:
    """``--sharing`` text -> mode.

    Raises:
        FieldError: not one of the modes.
    """
    try:
        return SharingMode(str(text).strip().lower())
    except ValueError:
        names = "|".join(m.value for m in SharingMode)
        raise FieldError("sharing", f"{text!r} is not a sharing mode; use one of {names}") from None


# -- building ----------------------------------------------------------------------------------
def block(index: int, size: int) -> tuple[int, int]:
    """GPU ``index``'s block of ``size`` units: ``(index*STRIDE, index*STRIDE + size - 1)``.

    Raises:
        FieldError: a negative index, or a size that is not in 1..STRIDE.
    """
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise FieldError("gpu index", f"{index!r} is not a GPU index (0, 1, ...)")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= STRIDE:
        raise FieldError("gpu memory", f"{size!r} is not a size in 1..{STRIDE} (MiB)")
    return index * STRIDE, index * STRIDE + size - 1


def mem_ranges(memory_mib: Mapping[int, int]) -> Ranges:
    """``gpu_mem`` blocks for GPU index -> memory in MiB."""
    return tuple(block(i, memory_mib[i]) for i in sorted(memory_mib))


def core_ranges(indices: Iterable[int]) -> Ranges:
    """``gpu_core`` blocks (``CORE_UNITS`` each) for the GPU indices."""
    return tuple(block(i, CORE_UNITS) for i in sorted(set(indices)))


def ranges_text(ranges: Ranges) -> str:
    """Mesos flag syntax: ``[0-16383,1048576-1064959]`` (no blanks, safe in ``$(...)``)."""
    return "[" + ",".join(f"{b}-{e}" for b, e in ranges) + "]"


def ranges_json(name: str, ranges: Ranges, role: str = "*") -> dict[str, Any]:
    """A v1 JSON RANGES resource, for a TaskInfo."""
    return {
        "name": name,
        "type": "RANGES",
        "ranges": {"range": [{"begin": b, "end": e} for b, e in ranges]},
        "role": role,
    }


# -- reading -----------------------------------------------------------------------------------
def normalise(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged ranges (adjacent or overlapping ones joined), as Mesos keeps them.
    Ranges already so (a tuple of ``(begin, end)`` tuples, sorted, apart) come back as they
    are: most calls read an offer's ranges, normalised at parse (15,000 calls a round at
    openb scale, issue 26)."""
    if type(ranges) is tuple and _is_normal(ranges):
        return ranges
    merged: list[list[int]] = []
    for begin, end in sorted(ranges):
        if merged and begin <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return tuple((b, e) for b, e in merged)


def _is_normal(ranges: tuple[Any, ...]) -> bool:
    """Whether :func:`normalise` would give ``ranges`` back as they are (equal items)."""
    last = None
    for item in ranges:
        if type(item) is not tuple or len(item) != 2:
            return False
        begin, end = item
        if end < begin or (last is not None and begin <= last + 1):
            return False
        last = end
    return True


def parse_ranges_text(text: str) -> Ranges:
    """``[0-4095, 8192-16383]`` (``/master/state`` writes blanks, flags do not) -> ranges.

    Raises:
        FieldError: not a bracketed list of BEGIN-END items.
    """
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        raise FieldError("ranges", f"{text[:60]!r} is not [BEGIN-END,...]")
    out = []
    for part in filter(None, (p.strip() for p in inner[1:-1].split(","))):
        match = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if not match or int(match.group(1)) > int(match.group(2)):
            raise FieldError("ranges", f"{part!r} is not BEGIN-END with BEGIN <= END")
        out.append((int(match.group(1)), int(match.group(2))))
    return normalise(out)


def ranges_from_resources(resources: Iterable[Mapping[str, Any]], name: str) -> Ranges:
    """The union of the RANGES resources called ``name`` in v1 JSON resources (an offer)."""
    found = []
    for res in resources:
        if res.get("name") == name and res.get("type") == "RANGES":
            found += [(int(r["begin"]), int(r["end"])) for r in res["ranges"].get("range", [])]
    return normalise(tuple(found))  # a tuple: the master's ranges, normalised, come back


def per_gpu(ranges: Ranges) -> dict[int, Ranges]:
    """Split ranges by GPU block: GPU index -> its ranges (a range never spans two blocks).
    Normalised ranges come in block order, so the split does too (no sort)."""
    out: dict[int, Ranges] = {}
    get = out.get
    for item in normalise(ranges):
        begin, end = item
        index = begin // STRIDE
        if begin <= end < (index + 1) * STRIDE:  # inside one block (every offer's range)
            had = get(index)
            out[index] = (item,) if had is None else (*had, item)
            continue
        while begin <= end:
            index = begin // STRIDE
            stop = min(end, (index + 1) * STRIDE - 1)
            had = get(index)
            out[index] = ((begin, stop),) if had is None else (*had, (begin, stop))
            begin = stop + 1
    return out


def amounts(ranges: Ranges) -> dict[int, int]:
    """GPU index -> how many units (MiB, or thousandths) the ranges hold on it."""
    out = {}
    for index, rs in per_gpu(ranges).items():
        if len(rs) == 1:
            begin, end = rs[0]
            out[index] = end - begin + 1
        else:
            out[index] = sum(e - b + 1 for b, e in rs)
    return out


# -- what a task consumes ------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuRanges:
    """The ``gpu_mem``/``gpu_core`` ranges one task consumes."""

    mem: Ranges = ()
    core: Ranges = ()

    def resources_json(self, role: str = "*") -> list[dict[str, Any]]:
        """The two RANGES resources (left out when empty), for a TaskInfo."""
        out = []
        if self.mem:
            out.append(ranges_json(GPU_MEM, self.mem, role))
        if self.core:
            out.append(ranges_json(GPU_CORE, self.core, role))
        return out


def whole_gpu_take(indices: Iterable[int], mem: Ranges, core: Ranges) -> GpuRanges:
    """What a whole-GPU task on ``indices`` consumes: each GPU's entire blocks as offered.

    Args:
        indices: the GPUs the task gets (with ``gpus:k`` and ``gpu_ids``).
        mem, core: the ``gpu_mem``/``gpu_core`` ranges of the offer.

    Raises:
        FieldError: a GPU's blocks are not whole in the offer (a share holds part of it).
    """
    mem_by, core_by = per_gpu(mem), per_gpu(core)
    take_mem: list[tuple[int, int]] = []
    take_core: list[tuple[int, int]] = []
    for index in sorted(set(indices)):
        m, c = mem_by.get(index, ()), core_by.get(index, ())
        if len(m) != 1 or m[0][0] != index * STRIDE or c != (block(index, CORE_UNITS),):
            raise FieldError(
                "gpu_ids", f"GPU {index} is not whole in this offer (shared); pick another GPU"
            )
        take_mem += m
        take_core += c
    return GpuRanges(normalise(take_mem), normalise(take_core))


def is_whole(index: int, mem: Ranges, core: Ranges, memory_mib: int | None = None) -> bool:
    """True when GPU ``index`` is fully free in the ranges (no share holds any of it)."""
    m, c = per_gpu(mem).get(index, ()), per_gpu(core).get(index, ())
    if c != (block(index, CORE_UNITS),) or len(m) != 1 or m[0][0] != index * STRIDE:
        return False
    return memory_mib is None or m[0][1] - m[0][0] + 1 == memory_mib


def whole_of(indices: Iterable[int], mem: Ranges, core: Ranges) -> frozenset[int]:
    """The GPUs of ``indices`` fully free in the ranges (:func:`is_whole` of each, with the
    ranges split by GPU once instead of once per GPU)."""
    mems, cores = per_gpu(mem), per_gpu(core)
    out = []
    for index in indices:
        m, c = mems.get(index, ()), cores.get(index, ())
        if c == (block(index, CORE_UNITS),) and len(m) == 1 and m[0][0] == index * STRIDE:
            out.append(index)
    return frozenset(out)


def _take(free: Ranges, count: int) -> Ranges:
    """The lowest ``count`` units of ``free`` (any sub-ranges; they need not be contiguous)."""
    taken = []
    for begin, end in free:
        if count <= 0:
            break
        stop = min(end, begin + count - 1)
        taken.append((begin, stop))
        count -= stop - begin + 1
    return tuple(taken)


def share_take(
    index: int, memory_mib: int, core_milli: int, mem: Ranges, core: Ranges
) -> GpuRanges:
    """What a share of GPU ``index`` consumes: its lowest free sub-ranges of that GPU's blocks.

    Args:
        index: the GPU the share lives on.
        memory_mib: MiB of its memory (0: none reserved).
        core_milli: thousandths of its compute (0: compute shared without a floor).
        mem, core: the ``gpu_mem``/``gpu_core`` ranges of the offer.

    Raises:
        FieldError: a negative amount, or more than GPU ``index`` has left.
    """
    for name, amount, most in (
        ("gpu memory", memory_mib, STRIDE),
        ("gpu core", core_milli, CORE_UNITS),
    ):
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= most:
            raise FieldError(name, f"{amount!r} is not a whole number in 0..{most}")
    free_mem, free_core = per_gpu(mem).get(index, ()), per_gpu(core).get(index, ())
    left_mem = sum(e - b + 1 for b, e in free_mem)
    left_core = sum(e - b + 1 for b, e in free_core)
    if memory_mib > left_mem or core_milli > left_core:
        raise FieldError(
            "gpu share",
            f"GPU {index} has {left_mem} MiB and {left_core}/1000 compute left; the share asks "
            f"{memory_mib} MiB and {core_milli}/1000; ask for less or another GPU",
        )
    return GpuRanges(_take(free_mem, memory_mib), _take(free_core, core_milli))


def subtract(have: Ranges, take: Ranges) -> Ranges:
    """``have`` without ``take`` (what the next offer holds)."""
    out = list(normalise(have))
    for t_begin, t_end in normalise(take):
        nxt = []
        for begin, end in out:
            if t_end < begin or t_begin > end:
                nxt.append((begin, end))
                continue
            if begin < t_begin:
                nxt.append((begin, t_begin - 1))
            if t_end < end:
                nxt.append((t_end + 1, end))
        out = nxt
    return normalise(tuple(out))  # as a tuple: normalised pieces come back as they are
