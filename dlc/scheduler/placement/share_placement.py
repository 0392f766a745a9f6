"""Placing a GPU share: one GPU of one agent, chosen with DLC's fragmentation-aware core.

The offers' ``gpu_mem``/``gpu_core`` RANGES (:mod:`dlc.topology.gpu_shares`) say what each
GPU has left; :func:`dlc.scheduler.allocator.fragscore.place` picks the agent and GPU whose
use grows fragmentation least and, on ties, the fullest GPU: shares pack onto GPUs already
shared, so whole GPUs (and the NVLink groups they form) stay free for whole-GPU jobs.
The chosen sub-ranges are what the task consumes (:func:`gpu_shares.share_take`), so the
master never gives one unit twice.

Exclusive placement (``--exclusive-per-user``/``--exclusive-per-group``): a share that asks
for it goes only on a GPU whose shares are all its user's (or group's), and no other user's
share joins it there (:func:`may_share`, :class:`ShareTenants`). A fault in one MPS client
takes down its co-runners on that GPU; this keeps such a fault within one user or group.

Tenancy under MPS (always, without asking): on an agent whose backend is ``mps`` a GPU's
shares all belong to ONE tenant (:func:`mps_tenancy`: the user, or the group when the job
asks for ``--exclusive-per-group``), because the GPU's one MPS daemon spreads any client's
fatal fault to every client (measured on the H200: docs/sharing.md). Another tenant's share
goes to another GPU, or to an agent with a fault-isolated backend (``shim``, ``watchdog``,
``none``: a context per process) where tenants may mix. The simpler of the two correct rules
was taken: a GPU never runs MPS for one tenant beside time-slicing for another, which would
need a per-share backend and two enforcement paths on one GPU.
Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlc.scheduler.allocator import fragscore, mix_models
from dlc.scheduler.allocator import shares as fgd
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.allocator.host_keep import Guarded, guarded_of
from dlc.scheduler.allocator.mix_models import MODELS, pressure, share_keep_cost
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.frag_state import FragCache
from dlc.scheduler.placement.share_index import KeptFill, RowCache, ShareRoom
from dlc.topology import gpu_shares
from dlc.topology.gpu_shares import STRIDE, GpuRanges
from dlc.topology.model import Topology


@dataclass(frozen=True)
class Tenant:
    """Who holds (or asks for) a share, as exclusive placement sees it.

    Attributes:
        user: the job's user.
        group: the user's group (the user itself when in none).
        exclusive: ``"user"``, ``"group"`` (:attr:`JobSpec.exclusive_per`) or ``None``.
    """

    user: str
    group: str
    exclusive: str | None = None


def _allows(holder: Tenant, other: Tenant) -> bool:
    """Whether ``holder``'s exclusivity lets ``other`` onto its GPU."""
    if holder.exclusive == "user":
        return holder.user == other.user
    if holder.exclusive == "group":
        return holder.group == other.group
    return True


def may_share(a: Tenant, b: Tenant) -> bool:
    """Whether shares of ``a`` and ``b`` may run on one GPU (both exclusivities hold)."""
    return _allows(a, b) and _allows(b, a)


def mps_tenancy(tenant: Tenant) -> tuple[str, str]:
    """Whom a share may meet under one MPS daemon: its group when the job opted into group
    placement (``exclusive_per == "group"``), else its user."""
    return ("group", tenant.group) if tenant.exclusive == "group" else ("user", tenant.user)


def may_share_mps(a: Tenant, b: Tenant) -> bool:
    """:func:`may_share`, and one tenant (:func:`mps_tenancy`): one MPS daemon for both."""
    return may_share(a, b) and mps_tenancy(a) == mps_tenancy(b)


@dataclass
class ShareTenants:
    """Who holds shares on each GPU (``(agent id, GPU index) -> tenants``).

    The core fills it from its running share tasks each round; :func:`place
    <dlc.scheduler.placement.placer.place>` adds the shares it places, so the jobs after them in
    the same round see them.
    """

    by_gpu: dict[tuple[str, int], list[Tenant]] = field(default_factory=dict)
    group_of: Callable[[str], str | None] = field(default=lambda user: None)
    #: how many tenants in ``by_gpu`` are exclusive (:meth:`restricts` asks per share)
    exclusive_count: int = field(default=-1, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.exclusive_count = sum(1 for ts in self.by_gpu.values() for t in ts if t.exclusive)

    def tenant(self, job: Job) -> Tenant:
        """``job`` as a tenant (its user's group from ``group_of``, else the user)."""
        group = self.group_of(job.user) or job.user
        return Tenant(job.user, group, job.spec.exclusive_per)

    def add(self, agent_id: str, gpu: int, tenant: Tenant) -> None:
        """Record a share of ``tenant`` on GPU ``gpu`` of ``agent_id``."""
        self.by_gpu.setdefault((agent_id, gpu), []).append(tenant)
        self.exclusive_count += bool(tenant.exclusive)

    def restricts(self, tenant: Tenant, mps: bool = False) -> bool:
        """Whether exclusivity can keep ``tenant`` off any GPU: it asks for it, or a share
        already placed does, or (``mps``: some agent runs MPS) another tenant holds a share.
        When not, placement skips the per-GPU check (at 1,213 agents that check was a third
        of a share's placement time)."""
        if tenant.exclusive:
            return True
        if self.exclusive_count > 0:
            return True
        if not mps:
            return False
        mine = mps_tenancy(tenant)
        return any(mps_tenancy(t) != mine for ts in self.by_gpu.values() for t in ts)

    def open_to(self, tenant: Tenant, agent_id: str, gpu: int, mps: bool = False) -> bool:
        """Whether ``tenant`` may put a share on that GPU, given the shares already there
        (``mps``: the agent's backend is MPS, so only its own tenant's shares may be there)."""
        check = may_share_mps if mps else may_share
        return all(check(tenant, t) for t in self.by_gpu.get((agent_id, gpu), ()))


def share_room(
    slots: Sequence[Any],
    topology_of: Callable[[dict[str, str]], Any],
    rows: RowCache | None = None,
    kept: KeptFill | None = None,
) -> ShareRoom:
    """The round's :class:`~dlc.scheduler.placement.share_index.ShareRoom` of ``slots`` (``rows``,
    ``kept``: the caller's rows of earlier rounds and its last fill,
    :class:`~dlc.scheduler.placement.round_memo.RoundMemo`)."""
    amounts = lambda slot, topology: _slot_amounts(slot, topology)  # noqa: E731
    return ShareRoom(slots, topology_of, amounts, rows, kept)


@dataclass(frozen=True, kw_only=True)
class ShareChoice:
    """Where a share goes: the slot (agent), the GPU, its amounts and the ranges taken."""

    slot: Any
    gpu_index: int
    memory_mib: int
    core_milli: int
    take: GpuRanges
    topology: Topology | None


def gpu_memory_of(
    index: int,
    mem: gpu_shares.Ranges,
    topology: Topology | None,
    blocks: dict[int, gpu_shares.Ranges] | None = None,
) -> int:
    """GPU ``index``'s memory: from the topology, else the end of its offered block.

    Shares take the lowest free MiB, so the top of a block stays offered until the GPU is
    full; a full GPU takes no share whatever its size. ``blocks``: ``per_gpu(mem)`` when
    the caller has it already (it is the costly part, once per agent is enough).
    """
    if topology is not None:
        for gpu in topology.gpus:
            if gpu.index == index and gpu.memory_mib:
                return int(gpu.memory_mib)
    ranges = (blocks if blocks is not None else gpu_shares.per_gpu(mem)).get(index, ())
    return ranges[-1][1] - index * STRIDE + 1 if ranges else 0


def _needs(spec: JobSpec, total_mib: int) -> tuple[int, int]:
    return spec.share_memory_mib(total_mib), spec.share_core_milli


def share_milli(spec: JobSpec, total_mib: int) -> int:
    """The thousandths of a GPU of ``total_mib`` MiB a share of ``spec`` takes: the larger of
    its compute and its memory part (at least 1)."""
    mib, milli = _needs(spec, total_mib)
    return max(1, milli, math.ceil(mib * 1000 / total_mib) if total_mib else 0)


def _gpu_model_ok(spec: JobSpec, index: int, topology: Topology | None, agent_model: str) -> bool:
    if not spec.gpu_model:
        return True
    if topology is not None:
        for gpu in topology.gpus:
            if gpu.index == index and gpu.model:
                return model_matches(spec.gpu_model, gpu.model)
    return model_matches(spec.gpu_model, agent_model)


#: per GPU of a slot: free MiB, free thousandths, memory (see :func:`_slot_amounts`)
_Amounts = tuple[dict[int, int], dict[int, int], dict[int, int]]
#: an agent a share fits: its slot, topology and GPU -> free thousandths where it fits
_Fit = tuple[Any, Topology | None, dict[int, int]]


def _slot_amounts(slot: Any, topology: Topology | None) -> _Amounts:
    """(GPU -> free MiB, GPU -> free thousandths, GPU -> memory) of ``slot``'s ranges.

    Kept on the slot until its ranges change (taking ranges makes new tuples): one round
    places many shares over the same agents, and reading ranges is the costly part.
    """
    cached = getattr(slot, "_share_amounts", None)
    if cached is not None and cached[0] is slot.gpu_mem and cached[1] is slot.gpu_core:
        amounts: _Amounts = cached[2]
        return amounts
    blocks = gpu_shares.per_gpu(slot.gpu_mem)
    free_mem = {i: sum(e - b + 1 for b, e in rs) for i, rs in blocks.items()}
    free_core = gpu_shares.amounts(slot.gpu_core)
    totals = {i: gpu_memory_of(i, slot.gpu_mem, topology, blocks) for i in free_core}
    slot._share_amounts = (slot.gpu_mem, slot.gpu_core, (free_mem, free_core, totals))
    return free_mem, free_core, totals


def _fitting_gpus(
    spec: JobSpec,
    slot: Any,
    topology: Topology | None,
    model: str,
    open_to: Callable[[int], bool],
) -> tuple[dict[int, int], dict[int, int], int, int]:
    """(GPU -> memory, GPU -> free thousandths where the share fits, the ask in thousandths,
    how many GPUs it fits but ``open_to(index)`` keeps it off)."""
    free_mem, free_core, totals = _slot_amounts(slot, topology)
    ok, need, barred = {}, 1, 0
    asks: dict[int, tuple[int, int]] = {}  # GPU memory -> the ask (GPUs of an agent alike)
    for index, core_left in free_core.items():
        total = totals[index]
        if total not in asks:
            asks[total] = _needs(spec, total)
        mib, milli = asks[total]
        fits = total and mib <= free_mem.get(index, 0) and milli <= core_left
        if not (fits and _gpu_model_ok(spec, index, topology, model)):
            continue
        if not open_to(index):
            barred += 1
            continue
        ok[index] = min(core_left, free_mem.get(index, 0) * 1000 // total)
        need = max(need, share_milli(spec, total))
    return totals, ok, need, barred


def _open_to_all(index: int) -> bool:
    return True


def _fullness(ok: dict[int, int]) -> tuple[int, int]:
    """Sort key of an agent's fitting GPUs (GPU -> free thousandths): whole ones, then room."""
    return sum(v >= fgd.MILLI for v in ok.values()), sum(ok.values())


def _without_barred(
    fits: list[_Fit], totals_of: list[dict[int, int]], barred: Callable[[str, int], bool]
) -> tuple[list[_Fit], list[dict[int, int]]]:
    """``fits`` without the whole GPUs ``barred`` names (a GPU a share took part of earlier in
    this round is whole no more, so it stays open); agents left with none drop out."""
    kept: list[_Fit] = []
    kept_totals: list[dict[int, int]] = []
    for (slot, topology, ok), totals in zip(fits, totals_of, strict=True):
        ok = {i: v for i, v in ok.items() if v < fgd.MILLI or not barred(slot.agent_id, i)}
        if ok:
            kept.append((slot, topology, ok))
            kept_totals.append(totals)
    return kept, kept_totals


def _short_beside_shares(slots: Sequence[Any], cpus: float, mem: float, disk: float) -> str:
    """Why a share waits when no offer with GPU shares free has its cpus, memory or disk:
    names the short resource(s), what the share needs and the most one such offer has."""
    short = [
        name
        for name, need, most in (
            ("cpus", cpus, max(s.cpus for s in slots)),
            ("memory", mem, max(s.mem for s in slots)),
            ("disk", disk, max(s.disk for s in slots)),
        )
        if most < need - 1e-9
    ] or ["cpus or memory"]  # each offer lacks one, but not the same one
    best = max(slots, key=lambda s: (s.cpus, s.mem))
    return (
        f"not enough {' and '.join(short)} beside the free GPU shares: the share needs "
        f"{cpus:g} cpus/{mem:g} MiB (with its executor's), the most an agent with shares "
        f"free has is {best.cpus:g} cpus/{best.mem:g} MiB"
    )


def choose_share(
    spec: JobSpec,
    slots: Sequence[Any],
    cpus: float,
    mem: float,
    topology_of: Callable[[dict[str, str]], Topology | None],
    agent_model: Callable[[Any], str],
    open_to: Callable[[str, int], bool] | None = None,
    hold: Callable[[int], tuple[Callable[[str, int], bool], str] | None] | None = None,
    room: ShareRoom | None = None,
    mix: fgd.WorkloadMix | None = None,
    frag: FragCache | None = None,
) -> ShareChoice | str:
    """The GPU for a share of ``spec`` among ``slots`` (``slots.Slot``), or why not.

    Args:
        cpus, mem: what the task needs with the executor's overhead.
        topology_of: agent attributes -> decoded topology.
        agent_model: slot -> its ``gpu_model`` attribute text.
        open_to: ``(agent id, GPU index) -> bool``: whether exclusive placement lets this
            share onto that GPU (:meth:`ShareTenants.open_to`); default: every GPU.
        hold: the share's size in thousandths -> ``(barred, why)`` when the share hold
            (:mod:`~dlc.scheduler.placement.share_hold`) keeps it off whole free GPUs:
            ``barred(agent id, GPU index)`` names them, ``why`` is the reason if nothing else
            fits; else ``None``. Default: nothing held.
        room: ``slots`` indexed by free compute (:class:`ShareRoom`): only the agents with
            a GPU that has the share's compute free are read; same choice, fewer reads.
        mix: the workload the choice is scored against: the core passes the one it sees
            (queued and running jobs by shape, as for whole-GPU jobs); default: more shares
            like this one and whole GPUs, half and half (:func:`_share_mix`).
        frag: the core's fragmentation values kept across rounds and shares
            (:class:`~dlc.scheduler.placement.frag_state.FragCache`), used with ``mix``: states
            measured before are not measured again; default: measure afresh.
    """
    views, fits, totals_of = [], [], []
    if room is not None and room.covers(slots):
        if not room.shareable():
            return "no offer has GPU shares (gpu_mem/gpu_core ranges) free"
        if open_to is None and not spec.gpu_model:  # nothing asked per GPU: all at once
            return _choose_in_arrays(spec, room, cpus, mem, topology_of, hold, mix, frag)
        # a slot without a GPU of this much compute free fits nowhere below: skip it unread
        shareable = room.at_least(spec.share_core_milli)
    else:
        shareable = [s for s in slots if s.gpu_core]
        if not shareable:
            return "no offer has GPU shares (gpu_mem/gpu_core ranges) free"
    need_milli, barred, roomy = 1, 0, 0
    for slot in shareable:
        if slot.cpus < cpus - 1e-9 or slot.mem < mem - 1e-9 or slot.disk < spec.disk_mib - 1e-9:
            continue
        roomy += 1
        topology = topology_of(slot.attributes)
        gpu_open = (lambda i, a=slot.agent_id: open_to(a, i)) if open_to else _open_to_all
        totals, ok, need, kept_off = _fitting_gpus(
            spec, slot, topology, agent_model(slot), gpu_open
        )
        need_milli, barred = max(need_milli, need), barred + kept_off
        if ok:
            fits.append((slot, topology, ok))
            totals_of.append(totals)
    held = hold(min(need_milli, fgd.MILLI - 1)) if hold is not None and fits else None
    if held is not None:
        fits, totals_of = _without_barred(fits, totals_of, held[0])
        if not fits:
            return held[1]
    if not fits and shareable and not roomy:  # GPUs with room: what is short sits beside them
        return _short_beside_shares(shareable, cpus, mem, spec.disk_mib)
    if not fits:
        why = _no_share_left(spec)
        if barred:
            why += (
                f"; {barred} GPU(s) with room hold shares it may not join "
                "(exclusive per user or group)"
            )
        return why
    # the measure sends ties to the first agent: list first the agents with the fewest whole
    # GPUs, then the fullest, so shares pack across agents as well as within one
    # (measured in bench/share_placement.py, figures in docs/sharing.md)
    order = sorted(range(len(fits)), key=lambda k: _fullness(fits[k][2]))
    fits, totals_of = [fits[k] for k in order], [totals_of[k] for k in order]
    for slot, _, ok in fits:
        width = max(ok) + 1
        # GPUs the share does not fit count as full; the ones it fits hold at least the ask
        # (a memory share's ask is in thousandths of the largest GPU)
        free = tuple(max(ok[i], need_milli) if i in ok else 0 for i in range(width))
        views.append(
            fgd.AgentView(slot.agent_id, int(slot.cpus * 1000), int(slot.mem), "gpu", free)
        )
    request, mix = _share_mix(cpus, mem, need_milli, mix)
    placed = fragscore.place(request, views, mix)  # the same core as dlc.sim
    if placed is None or placed.gpus[0] not in fits[placed.agent][2]:
        slot, topology, ok = fits[0]  # the measure found nothing: first fit
        index, totals = min(ok), totals_of[0]
    else:
        slot, topology, _ = fits[placed.agent]
        index, totals = placed.gpus[0], totals_of[placed.agent]
    mib, milli = _needs(spec, totals[index])
    take = gpu_shares.share_take(index, mib, milli, slot.gpu_mem, slot.gpu_core)
    return ShareChoice(
        slot=slot, gpu_index=index, memory_mib=mib, core_milli=milli, take=take, topology=topology
    )


def _share_mix(
    cpus: float, mem: float, need_milli: int, mix: fgd.WorkloadMix | None = None
) -> tuple[fgd.ShareRequest, fgd.WorkloadMix]:
    """The share as ``fragscore`` sees it, and the workload it is scored against: ``mix``
    when given (the core's queued and running jobs), else more shares like this one and
    whole-GPU jobs; using a whole GPU for a share fragments it for the latter, so shares
    pack onto shared GPUs, across agents too."""
    request = fgd.ShareRequest(
        cpu_milli=int(cpus * 1000),
        mem_mib=int(mem),
        num_gpus=1,
        gpu_milli=min(need_milli, fgd.MILLI - 1),
    )
    if mix is not None:
        return request, mix
    whole = fgd.ShareRequest(
        cpu_milli=request.cpu_milli, mem_mib=request.mem_mib, num_gpus=1, gpu_milli=fgd.MILLI
    )
    return request, fgd.WorkloadMix(shapes=(request, whole), weights=(0.5, 0.5))


def _mix_rows(
    mix: fgd.WorkloadMix, frag: FragCache | None, given: fgd.WorkloadMix | None
) -> fgd.MixArrays:
    """The arrays a share is measured against: the core's held mix (``frag``, when it
    measures with the default knobs and the caller gave the mix), else ``mix`` afresh."""
    if frag is not None and given is not None and frag.params == fragscore.DEFAULT_PARAMS:
        arrays = frag.adopt(given)
        return arrays
    return fragscore.mix_arrays(mix, MODELS.names)


def _guarded(mix: fgd.WorkloadMix, params: fragscore.ScoreParams) -> Guarded | None:
    """The shapes the host keep term weighs for ``mix`` (``None`` when the term is off)."""
    return guarded_of(mix) if params.host_keep else None


def _no_share_left(spec: JobSpec) -> str:
    with_what = f"with {spec.cpus:g} cpus/{spec.mem_mib} MiB"
    return f"no GPU has a share of {spec.share_text} left ({with_what})"


def _choose_in_arrays(
    spec: JobSpec,
    room: ShareRoom,
    cpus: float,
    mem: float,
    topology_of: Callable[[dict[str, str]], Topology | None],
    hold: Callable[[int], tuple[Callable[[str, int], bool], str] | None] | None,
    mix: fgd.WorkloadMix | None = None,
    frag: FragCache | None = None,
) -> ShareChoice | str:
    """:func:`choose_share` over the round's arrays (``room``), for a share that asks no
    GPU model and meets no exclusivity: the same fits, order, measure and reasons as the
    per-agent scan, in array operations over all agents at once (tests compare the two).
    Against a mix with shapes restricted to some GPU models it also reads the agents' models:
    ties go to the least needed model (:func:`~dlc.scheduler.allocator.mix_models.pressure`)
    and a kept model's agents cost more (:func:`~dlc.scheduler.allocator.mix_models.
    share_keep_cost`); the per-agent scan (shares that ask a model or meet exclusivity) does
    neither."""
    milli = spec.share_core_milli
    shareable = room.has_core & (room.room >= milli)
    roomy = shareable & (room.cpus >= cpus - 1e-9) & (room.mem >= mem - 1e-9)
    roomy &= room.disk >= spec.disk_mib - 1e-9
    rows = np.flatnonzero(roomy)
    total = room.total[rows]
    # the ask per GPU size (an agent's GPUs, and the cluster's, come in few sizes)
    sizes, where = np.unique(total, return_inverse=True)
    where = where.reshape(total.shape)
    ask_mib = np.array([spec.share_memory_mib(int(t)) for t in sizes], dtype=np.int64)[where]
    ask = np.array([share_milli(spec, int(t)) for t in sizes], dtype=np.int64)[where]
    free_mem, free_core = room.free_mem[rows], room.free_core[rows]
    fit = room.present[rows] & (total > 0) & (ask_mib <= free_mem) & (milli <= free_core)
    ok = np.minimum(free_core, free_mem * 1000 // np.maximum(total, 1))
    need_milli = max(1, int(ask[fit].max(initial=1)))
    if hold is not None and fit.any():
        held = hold(min(need_milli, fgd.MILLI - 1))
        if held is not None:
            for r, i in zip(*np.nonzero(fit & (ok >= fgd.MILLI)), strict=True):
                if held[0](room.slots[rows[r]].agent_id, int(i)):
                    fit[r, i] = False  # a whole GPU the hold keeps shares off
            if not fit.any():
                return held[1]
    if not fit.any():
        if shareable.any() and not rows.size:  # GPUs with room: what is short sits beside
            found = [room.slots[k] for k in np.flatnonzero(shareable).tolist()]
            return _short_beside_shares(found, cpus, mem, spec.disk_mib)
        return _no_share_left(spec)
    agents = np.flatnonzero(fit.any(axis=1))
    given = mix
    request, mix = _share_mix(cpus, mem, need_milli, mix)
    mix_rows = _mix_rows(mix, frag, given)
    models = MODELS.of_slots(room.slots, mix_rows)
    # a model whose free room is kept for the restricted demand it can host costs more
    # (mix_models.share_keep_cost: its room among the agents the share fits, as for pressure)
    # (off by default: then the whole-array sum is not made, this runs for every share)
    keep = None
    if mix_models.SHARE_KEEP_COST > 0:
        room_left = np.where(room.present[rows] & (total > 0), ok, 0).sum(axis=1)[agents]
        keep = share_keep_cost(mix_rows, models[rows[agents]], room_left)
    fit, ok = fit[agents], np.where(fit[agents], ok[agents], 0)
    # the least needed model first (mix_models.pressure: ties of the measure go by this
    # order), then the fewest whole GPUs, then the fullest, then the round's order
    needed = pressure(mix_rows, models[rows[agents]])  # among the agents it fits
    order = np.lexsort((agents, ok.sum(axis=1), (ok >= fgd.MILLI).sum(axis=1), needed))
    fit, ok, chosen = fit[order], ok[order], rows[agents[order]]
    penalty = keep[order][:, None] if keep is not None and keep.any() else None
    width = max(fgd.MAX_GPUS, ok.shape[1])
    gpu_left = np.zeros((len(chosen), width), dtype=np.int64)
    gpu_left[:, : ok.shape[1]] = np.where(fit, np.maximum(ok, need_milli), 0)
    arrays = fgd.AgentArrays(
        model=models[chosen],
        cpu_left=(room.cpus[chosen] * 1000).astype(np.int64),
        mem_left=room.mem[chosen].astype(np.int64),
        gpu_left=gpu_left,
        access_of=lambda allowed: np.ones(len(chosen), dtype=bool),
    )
    if frag is not None and given is not None and frag.params == fragscore.DEFAULT_PARAMS:
        # the states measured for earlier shares and rounds, under the core's held mix
        frag.adopt(given)
        cost = frag.share_costs(request, arrays)
        extra = fragscore.host_keep_cost(
            request, arrays, np.arange(len(chosen)), _guarded(mix, frag.params), frag.params
        )
        if penalty is not None:
            cost = cost + penalty
        best = fragscore.pick(cost if extra is None else cost + extra, arrays.gpu_left)
        placed = None if best is None else fragscore.placement_of(request, arrays, *best)
    else:
        guarded = _guarded(mix, fragscore.DEFAULT_PARAMS)
        placed = fragscore.choose(request, arrays, mix_rows, guarded=guarded, extra=penalty)
    if placed is None or placed.gpus[0] >= fit.shape[1] or not fit[placed.agent, placed.gpus[0]]:
        at, index = 0, int(np.flatnonzero(fit[0])[0])  # the measure found nothing: first fit
    else:
        at, index = placed.agent, placed.gpus[0]
    slot = room.slots[chosen[at]]
    mib, core_milli = _needs(spec, int(room.total[chosen[at], index]))
    take = gpu_shares.share_take(index, mib, core_milli, slot.gpu_mem, slot.gpu_core)
    return ShareChoice(
        slot=slot,
        gpu_index=index,
        memory_mib=mib,
        core_milli=core_milli,
        take=take,
        topology=topology_of(slot.attributes),
    )
