"""The array model of GPU shares across agents, and the FGD paper's fragmentation measure.

Plain views of agents (:class:`AgentView`: free CPU, memory, GPU model and the free
thousandths of each GPU, as the inventory reads them from offers), requests
(:class:`ShareRequest`), the expected workload (:class:`WorkloadMix`) and their numpy
arrays. The measure is the FGD paper's (Weng et al., ATC'23): for each expected pod shape,
the free GPU capacity of an agent that shape cannot use is fragmented; an agent's
fragmentation is the frequency-weighted sum.

DLC's scoring over it, which the scheduler and the simulator both run, is
:mod:`dlc.scheduler.allocator.fragscore`; the re-implemented FGD baseline is
:mod:`dlc.sim.policies.fgd`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dlc.scheduler.allocator.base import model_access

#: thousandths of one GPU
MILLI = 1000
#: the most GPUs the array core handles on one agent
MAX_GPUS = 8


@dataclass(frozen=True)
class AgentView:
    """What the placement needs to know about one agent."""

    agent_id: str
    cpu_free_milli: int
    mem_free_mib: int
    gpu_model: str
    #: free thousandths of each GPU (1000 = a whole free GPU)
    gpu_free: tuple[int, ...]


@dataclass(frozen=True)
class ShareRequest:
    """A pod or task: ``num_gpus`` GPUs of ``gpu_milli`` each (< 1000 means a share of one)."""

    cpu_milli: int
    mem_mib: int
    num_gpus: int
    gpu_milli: int = MILLI
    gpu_models: frozenset[str] = frozenset()

    @property
    def is_share(self) -> bool:
        """True when the request is part of one GPU."""
        return self.num_gpus == 1 and self.gpu_milli < MILLI


@dataclass(frozen=True)
class WorkloadMix:
    """Expected pod shapes and their frequencies (the target of the fragmentation measure).

    ``guarded``: whole-GPU shapes whose hosts the host keep term
    (:mod:`~dlc.scheduler.allocator.host_keep`) weighs, rare ones included, with their
    frequencies on the scale of ``weights`` (default: the whole-GPU shapes of ``shapes``).
    """

    shapes: tuple[ShareRequest, ...]
    weights: tuple[float, ...]
    guarded: tuple[ShareRequest, ...] = ()
    guarded_weights: tuple[float, ...] = ()


@dataclass(frozen=True)
class SharePlacement:
    """The chosen agent (index into the views) and GPU indexes on it."""

    agent: int
    gpus: tuple[int, ...]


class MixArrays:
    """A :class:`WorkloadMix` as arrays, with the model access table of a cluster."""

    def __init__(self, mix: WorkloadMix, model_names: Sequence[str]) -> None:
        shapes = mix.shapes
        self.cpu = np.array([s.cpu_milli for s in shapes], dtype=np.int64)
        self.mem = np.array([s.mem_mib for s in shapes], dtype=np.int64)
        self.milli = np.array([s.gpu_milli if s.num_gpus else 0 for s in shapes], dtype=np.int64)
        self.num = np.array([s.num_gpus for s in shapes], dtype=np.int64)
        weight = np.array(mix.weights, dtype=float)
        self.weight = weight / weight.sum()
        self.shapes = shapes
        #: whether some shape allows only some GPU models (else every row of access is alike)
        self.constrained = any(s.gpu_models for s in shapes)
        self.access = np.ones((0, len(shapes)), dtype=bool)
        self.cover(model_names)
        self.asks_gpu = self.num > 0

    def cover(self, model_names: Sequence[str]) -> None:
        """Make :attr:`access` ``[models, shapes]`` hold a row per name of ``model_names``
        (names a shape's ``gpu_models`` choices match as :func:`~dlc.scheduler.allocator.
        base.model_matches` does: ``V100`` allows ``Tesla_V100``); rows already there keep
        their names, so a longer list of the same first names only adds rows."""
        had = len(self.access)
        if len(model_names) <= had:
            return
        new = tuple(model_names[had:])  # only the new rows are matched (model_access)
        access = np.ones((len(model_names), len(self.shapes)), dtype=bool)
        access[:had] = self.access
        for j, s in enumerate(self.shapes):
            if s.gpu_models:
                access[had:, j] = model_access(s.gpu_models, new)
        self.access = access


def fragmentation(
    mix: MixArrays,
    model: np.ndarray,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
) -> np.ndarray:
    """Fragmented GPU thousandths of K agent states (``gpu_left`` is ``[K, G]``)."""
    total = gpu_left.sum(axis=1)
    fits = gpu_left[:, :, None] >= np.maximum(mix.milli, 1)[None, None, :]
    usable = (gpu_left[:, :, None] * fits).sum(axis=1)
    runs = fits.sum(axis=1) >= mix.num[None, :]
    runs &= cpu_left[:, None] >= mix.cpu[None, :]
    runs &= mem_left[:, None] >= mix.mem[None, :]
    runs &= mix.access[model] & mix.asks_gpu[None, :]
    frag = np.where(runs, total[:, None] - usable, total[:, None])
    out: np.ndarray = frag @ mix.weight
    return out


#: hash weights: 3 for model, CPUs, memory, then one per GPU slot (16-GPU agents and more
#: make the arrays wider than MAX_GPUS; 1024 slots are far beyond any machine)
_HASH = np.random.default_rng(1213).integers(1, 2**62, size=1024 + 3, dtype=np.int64) | 1


def fragmentation_dedup(
    mix: MixArrays,
    model: np.ndarray,
    cpu_left: np.ndarray,
    mem_left: np.ndarray,
    gpu_left: np.ndarray,
) -> np.ndarray:
    """As :func:`fragmentation`, each distinct state computed once (agents are often alike)."""
    if len(model) < 64:
        return fragmentation(mix, model, cpu_left, mem_left, gpu_left)
    gpus = np.sort(gpu_left, axis=1)
    key = model * _HASH[0] + cpu_left * _HASH[1] + mem_left * _HASH[2]
    key = key + gpus @ _HASH[3 : 3 + gpus.shape[1]]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    values = fragmentation(mix, model[first], cpu_left[first], mem_left[first], gpus[first])
    return values[inverse.reshape(-1)]


@dataclass
class AgentArrays:
    """Agents as arrays: what :func:`choose` reads. ``frag`` caches each agent's measure."""

    model: np.ndarray
    cpu_left: np.ndarray
    mem_left: np.ndarray
    gpu_left: np.ndarray
    access_of: Callable[[frozenset[str]], np.ndarray]  # models -> bool mask over agents
    frag: np.ndarray | None = None


def candidates(
    req: ShareRequest, agents: AgentArrays, feasible: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """States after placing ``req``: ``(agent, gpu, cpu_left, mem_left, gpu_left)``.

    A share may go to any GPU with room; whole GPUs are the first free ones (gpu -1).
    """
    nodes = np.flatnonzero(feasible)
    if req.is_share:
        rows, slots = np.nonzero(agents.gpu_left[nodes] >= req.gpu_milli)
        node = nodes[rows]
        gpu_left = agents.gpu_left[node].copy()
        gpu_left[np.arange(len(node)), slots] -= req.gpu_milli
    else:
        node, slots = nodes, np.full(len(nodes), -1)
        gpu_left = agents.gpu_left[nodes].copy()
        if req.num_gpus:
            full = gpu_left == MILLI
            gpu_left[full & (np.cumsum(full, axis=1) <= req.num_gpus)] = 0
    cpu_left = agents.cpu_left[node] - req.cpu_milli
    mem_left = agents.mem_left[node] - req.mem_mib
    return node, slots, cpu_left, mem_left, gpu_left


def feasible_agents(req: ShareRequest, agents: AgentArrays) -> np.ndarray:
    """Agents with the CPU, memory, GPU model and GPU room ``req`` needs."""
    ok = (agents.cpu_left >= req.cpu_milli) & (agents.mem_left >= req.mem_mib)
    if req.num_gpus:
        ok &= agents.access_of(req.gpu_models)
        ok &= (agents.gpu_left >= req.gpu_milli).sum(axis=1) >= req.num_gpus
    return ok


def arrays_from_views(views: Sequence[AgentView]) -> tuple[AgentArrays, list[str]]:
    """Pack agent views into arrays (GPUs beyond an agent's count hold 0 free)."""
    models = sorted({v.gpu_model for v in views})
    index = {m: i for i, m in enumerate(models)}
    model = np.array([index[v.gpu_model] for v in views], dtype=np.int64)
    width = max([MAX_GPUS] + [len(v.gpu_free) for v in views])
    gpu_left = np.zeros((len(views), width), dtype=np.int64)
    for i, v in enumerate(views):
        gpu_left[i, : len(v.gpu_free)] = v.gpu_free
    model_names = np.array(models, dtype=object)

    def access_of(allowed: frozenset[str]) -> np.ndarray:
        if not allowed:
            return np.ones(len(views), dtype=bool)
        return np.array([m in allowed for m in model_names], dtype=bool)[model]

    arrays = AgentArrays(
        model=model,
        cpu_left=np.array([v.cpu_free_milli for v in views], dtype=np.int64),
        mem_left=np.array([v.mem_free_mib for v in views], dtype=np.int64),
        gpu_left=gpu_left,
        access_of=access_of,
    )
    return arrays, models


__all__ = [
    "AgentView",
    "MixArrays",
    "SharePlacement",
    "ShareRequest",
    "WorkloadMix",
    "fragmentation",
]
