"""Placing a GPU share: one GPU of one agent, chosen with DLC's fragmentation-aware core.

The offers' ``gpu_mem``/``gpu_core`` RANGES (:mod:`dlc.topology.gpu_shares`) say what each
GPU has left; :func:`dlc.scheduler.allocator.fragscore.place` picks the agent and GPU whose
use grows fragmentation least and, on ties, the fullest GPU: shares pack onto GPUs already
shared, so whole GPUs (and the NVLink groups they form) stay free for whole-GPU jobs.
The chosen sub-ranges are what the task consumes (:func:`gpu_shares.share_take`), so the
master never gives one unit twice. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.jobs import JobSpec
from dlc.topology import gpu_shares
from dlc.topology.gpu_shares import STRIDE, GpuRanges
from dlc.topology.model import Topology


@dataclass(frozen=True)
class ShareChoice:
    """Where a share goes: the slot (agent), the GPU, its amounts and the ranges taken."""

    slot: Any
    gpu_index: int
    memory_mib: int
    core_milli: int
    take: GpuRanges
    topology: Topology | None


def gpu_memory_of(index: int, mem: gpu_shares.Ranges, topology: Topology | None) -> int:
    """GPU ``index``'s memory: from the topology, else the end of its offered block.

    Shares take the lowest free MiB, so the top of a block stays offered until the GPU is
    full; a full GPU takes no share whatever its size.
    """
    if topology is not None:
        for gpu in topology.gpus:
            if gpu.index == index and gpu.memory_mib:
                return int(gpu.memory_mib)
    ranges = gpu_shares.per_gpu(mem).get(index, ())
    return ranges[-1][1] - index * STRIDE + 1 if ranges else 0


def _needs(spec: JobSpec, total_mib: int) -> tuple[int, int]:
    return spec.share_memory_mib(total_mib), spec.share_core_milli


def _gpu_model_ok(spec: JobSpec, index: int, topology: Topology | None, agent_model: str) -> bool:
    if not spec.gpu_model:
        return True
    if topology is not None:
        for gpu in topology.gpus:
            if gpu.index == index and gpu.model:
                return model_matches(spec.gpu_model, gpu.model)
    return model_matches(spec.gpu_model, agent_model)


def _fitting_gpus(
    spec: JobSpec, slot: Any, topology: Topology | None, model: str
) -> tuple[dict[int, int], dict[int, int], int]:
    """(GPU -> memory, GPU -> free thousandths where the share fits, the ask in thousandths)."""
    free_mem = gpu_shares.amounts(slot.gpu_mem)
    free_core = gpu_shares.amounts(slot.gpu_core)
    totals = {i: gpu_memory_of(i, slot.gpu_mem, topology) for i in free_core}
    ok, need = {}, 1
    for index, core_left in free_core.items():
        total = totals[index]
        mib, milli = _needs(spec, total)
        fits = total and mib <= free_mem.get(index, 0) and milli <= core_left
        if fits and _gpu_model_ok(spec, index, topology, model):
            ok[index] = min(core_left, free_mem.get(index, 0) * 1000 // total)
            need = max(need, milli, math.ceil(mib * 1000 / total))
    return totals, ok, need


def choose_share(
    spec: JobSpec,
    slots: Sequence[Any],
    cpus: float,
    mem: float,
    topology_of: Callable[[dict[str, str]], Topology | None],
    agent_model: Callable[[Any], str],
) -> ShareChoice | str:
    """The GPU for a share of ``spec`` among ``slots`` (``_Slot`` of placement), or why not.

    Args:
        cpus, mem: what the task needs with the executor's overhead.
        topology_of: agent attributes -> decoded topology.
        agent_model: slot -> its ``gpu_model`` attribute text.
    """
    views, fits, totals_of = [], [], []
    shareable = [s for s in slots if s.gpu_core]
    if not shareable:
        return "no offer has GPU shares (gpu_mem/gpu_core ranges) free"
    need_milli = 1
    for slot in shareable:
        if slot.cpus < cpus - 1e-9 or slot.mem < mem - 1e-9 or slot.disk < spec.disk_mib - 1e-9:
            continue
        topology = topology_of(slot.attributes)
        totals, ok, need = _fitting_gpus(spec, slot, topology, agent_model(slot))
        need_milli = max(need_milli, need)
        if ok:
            fits.append((slot, topology, ok))
            totals_of.append(totals)
    if not fits:
        what = spec.share_text
        return f"no GPU has a share of {what} left (with {spec.cpus:g} cpus/{spec.mem_mib} MiB)"
    for slot, _, ok in fits:
        width = max(ok) + 1
        # GPUs the share does not fit count as full; the ones it fits hold at least the ask
        # (a memory share's ask is in thousandths of the largest GPU)
        free = tuple(max(ok[i], need_milli) if i in ok else 0 for i in range(width))
        views.append(
            fgd.AgentView(slot.agent_id, int(slot.cpus * 1000), int(slot.mem), "gpu", free)
        )
    request = fgd.ShareRequest(int(cpus * 1000), int(mem), 1, min(need_milli, fgd.MILLI - 1))
    # the expected workload: more shares like this one, and whole-GPU jobs; using a whole
    # GPU for a share fragments it for the latter, so shares pack onto shared GPUs, across
    # agents too
    whole = fgd.ShareRequest(request.cpu_milli, request.mem_mib, 1, fgd.MILLI)
    mix = fgd.WorkloadMix(shapes=(request, whole), weights=(0.5, 0.5))
    placed = fragscore.place(request, views, mix)  # the same core as dlc.sim
    if placed is None or placed.gpus[0] not in fits[placed.agent][2]:
        slot, topology, ok = fits[0]  # the measure found nothing: first fit
        index, totals = min(ok), totals_of[0]
    else:
        slot, topology, _ = fits[placed.agent]
        index, totals = placed.gpus[0], totals_of[placed.agent]
    mib, milli = _needs(spec, totals[index])
    take = gpu_shares.share_take(index, mib, milli, slot.gpu_mem, slot.gpu_core)
    return ShareChoice(slot, index, mib, milli, take, topology)
