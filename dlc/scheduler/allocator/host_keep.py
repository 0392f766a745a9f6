"""Host keep: the cost of taking away the ability to host a whole-GPU shape few agents can host.

FGD's measure (:mod:`~dlc.scheduler.allocator.fragscore`) already counts an agent's free GPUs
as fragmented for a shape it can no longer host, weighted by how often that shape comes. It
does not know that *other* agents can host that shape: on openb's ``multigpu40`` the 8-GPU
pods asking 120 cores fit only the 39 G3 nodes (128 cores) of the 609 nodes with 8 GPUs, and
DLC's CPU cap on shares makes a CPU-rich G3 node look the least fragmented home for small
pods, so they spend the G3 nodes and the 120-core pods are refused mid-load
(docs/simulator.md, "Tried for multigpu40").

This term adds, for each whole-GPU shape of the expected workload that an agent hosts now and
would not host after the placement, the shape's GPU thousandths times its frequency times how
concentrated its hosts are: ``agents with the shape's GPUs free / agents that also have its
CPU and memory free``, less one. A shape every agent with the GPUs can host costs nothing
extra (FGD's term is enough); one that only a tenth of them can host costs nine times its
expected GPU demand. Only concentrations of at least ``ScoreParams.host_keep_spread`` (4: a
fifth of those agents or fewer host the shape) count: counting every concentration kept the
last few agents with 8 GPUs free for one 8-GPU shape late on ``default`` and refused others
(docs/simulator.md). The counts are over the decision's candidates, so the term depends on
more than the agent's own state and is added on top of the cached costs, never inside them.
Only shapes of at least the request's GPUs count for a whole-GPU request: its candidates are
the agents with that many GPUs free, which hold every host of those shapes and not
necessarily those of smaller ones. ``ScoreParams.host_keep`` scales it (0: off).

A second term, the same charge with a shape's *packing* hosts in place of its hosts (agents
whose whole free GPUs are exactly the shape's and whose CPU left it takes 85% of or more),
keeps a multi-GPU shape's exact fits for it: on ``multigpu40`` the V100M16 nodes of 8 GPUs and
64 cores for the 8-GPU 64-core pods, and so on (``ScoreParams.host_keep_pair``; 0: off;
docs/simulator.md, "multigpu40: packing hosts").

Concentrated among what? Counted against the agents with the shape's GPUs free alone, a shape
whose every such agent has its CPU and memory is never concentrated: on ``gpushare40/60/80`` the
8-GPU pods (64-88 cores) fit every agent with 8 GPUs free, so nothing kept the last of those
whole, and the measure's own charge (the pods are 0.2-0.5% of the mix: under one bucket) lost to
the CPU cap's one-bucket preference for the CPU-richest agent. Small pods broke them until none
was left at 70-84% of demand, and the 8-GPU pods failed there while FGD still placed them
(docs/simulator.md, "The gpushare mid-load gap"). With ``ScoreParams.host_keep_among=
"candidates"`` (the default) the hosts are also counted against the agents the request being
placed fits on, when those are more: the last agents with 8 GPUs free, among hundreds a 1-GPU
pod or a share could take, are kept. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlc.scheduler.allocator.shares import MILLI, ShareRequest, WorkloadMix


@dataclass(frozen=True)
class Guarded:
    """The whole-GPU shapes the term keeps hosts for, as arrays: CPU thousandths, memory,
    GPUs, and each shape's part of all expected pods."""

    cpu: np.ndarray
    mem: np.ndarray
    num: np.ndarray
    weight: np.ndarray


def guarded_of(mix: WorkloadMix) -> Guarded | None:
    """The whole-GPU shapes of ``mix`` (its ``guarded`` shapes when it lists them: the core's
    mix names every whole-GPU shape it saw, rare ones too), or ``None`` when it has none."""
    total = float(sum(mix.weights))
    pairs = list(zip(mix.guarded, mix.guarded_weights, strict=True)) if mix.guarded else []
    if not pairs:
        pairs = list(zip(mix.shapes, mix.weights, strict=True))
    pairs = [(s, w) for s, w in pairs if s.num_gpus and s.gpu_milli >= MILLI and w > 0]
    if not pairs or total <= 0:
        return None
    shapes: list[ShareRequest] = [s for s, _ in pairs]
    return Guarded(
        cpu=np.array([s.cpu_milli for s in shapes], dtype=np.int64),
        mem=np.array([s.mem_mib for s in shapes], dtype=np.int64),
        num=np.array([s.num_gpus for s in shapes], dtype=np.int64),
        weight=np.array([w for _, w in pairs], dtype=float) / total,
    )


def host_loss(
    req: ShareRequest,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
    guarded: Guarded,
    min_spread: float = 0.0,
    pair: float = 0.0,
    among: str = "gpus",
) -> np.ndarray:
    """``[agents, G]`` GPU thousandths lost by placing ``req`` on each agent (whole-GPU
    requests: the agent's value in every column) among these candidate agents. Shapes whose
    hosts are less concentrated than ``min_spread`` (see :func:`_value`) count nothing.
    ``pair`` weighs the second term, the shapes' packing hosts (:func:`_packing`; 0: off).

    ``among``: the hosts (first term) are counted against the agents with the shape's GPUs
    free ("gpus"), or against those or the agents ``req`` fits on, the more ("candidates")."""
    whole = (gpu_left >= MILLI).sum(axis=1)
    has_gpus = whole[:, None] >= guarded.num[None, :]
    hosts = has_gpus & (cpu_left[:, None] >= guarded.cpu[None, :])
    hosts &= mem_left[:, None] >= guarded.mem[None, :]
    with_gpus = has_gpus.sum(axis=0)
    counted = with_gpus
    if among == "candidates":
        counted = np.maximum(with_gpus, _fitting(req, cpu_left, mem_left, gpu_left, whole))
    value = _value(guarded, counted, hosts.sum(axis=0), min_spread)
    if not req.is_share:
        value = np.where(guarded.num >= req.num_gpus, value, 0.0)
    terms = [(hosts, value)]
    if pair:
        packing, shapes = _packing(req, whole, cpu_left, hosts, guarded)
        # against the agents with the shape's GPUs free, as measured (session 13: the two
        # terms were built and measured apart; ``among`` was not tried on this one)
        packs = _value(guarded, with_gpus, packing.sum(axis=0), min_spread)
        terms.append((packing, pair * np.where(shapes, packs, 0.0)))
    terms = [(where, worth) for where, worth in terms if worth.any()]
    if not terms:
        return np.zeros(gpu_left.shape)
    cpu_after = cpu_left - req.cpu_milli
    mem_after = mem_left - req.mem_mib

    def lost(taken: int) -> np.ndarray:
        after = (whole - taken)[:, None] >= guarded.num[None, :]
        after &= cpu_after[:, None] >= guarded.cpu[None, :]
        after &= mem_after[:, None] >= guarded.mem[None, :]
        out = np.zeros(len(whole))
        for where, worth in terms:
            out = out + (where & ~after) @ worth
        return out

    if not req.is_share:
        return np.repeat(lost(req.num_gpus)[:, None], gpu_left.shape[1], axis=1)
    # a share on a whole free GPU takes one whole GPU away; on a part-used one, none
    return np.where(gpu_left >= MILLI, lost(1)[:, None], lost(0)[:, None])


def _packing(
    req: ShareRequest,
    whole: np.ndarray,
    cpu_left: np.ndarray,
    hosts: np.ndarray,
    guarded: Guarded,
) -> tuple[np.ndarray, np.ndarray]:
    """``[agents, G]`` the agents each shape of 2 GPUs or more packs (it hosts the shape, its
    whole free GPUs are the shape's GPUs and the shape takes 85% of its CPU left or more: the
    half of a 128-core G3 node beside a 4-GPU 60-core pod), and ``[G]`` the shapes counted:
    not the request's own, for which such an agent is the place to go."""
    own = (guarded.num == req.num_gpus) & (guarded.cpu == req.cpu_milli)
    shapes = (guarded.num >= 2) & ~own
    packing = hosts & (whole[:, None] == guarded.num[None, :])
    packing &= guarded.cpu[None, :] >= 0.85 * cpu_left[:, None]
    return packing & shapes[None, :], shapes


def _fitting(
    req: ShareRequest,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
    whole: np.ndarray,
) -> int:
    """How many of these agents ``req`` fits on (its CPU, memory and GPUs)."""
    fits = (cpu_left >= req.cpu_milli) & (mem_left >= req.mem_mib)
    if req.is_share:
        fits &= (gpu_left >= req.gpu_milli).any(axis=1)
    elif req.num_gpus:
        fits &= whole >= req.num_gpus
    return int(fits.sum())


def _value(
    guarded: Guarded, with_gpus: np.ndarray, hosting: np.ndarray, min_spread: float
) -> np.ndarray:
    """Per shape: its expected GPU thousandths x how concentrated its hosts are, the agents
    with its GPUs free per agent hosting it, less one (0 where no agent hosts it, or where
    that is below ``min_spread``)."""
    spread = np.divide(with_gpus, hosting, out=np.ones(len(hosting)), where=hosting > 0) - 1.0
    spread = np.where(spread >= max(min_spread, 1e-9), spread, 0.0)
    out: np.ndarray = guarded.weight * guarded.num * MILLI * spread
    return out


__all__ = ["Guarded", "guarded_of", "host_loss"]
