"""The simulated cluster: per-node free CPU, memory and per-GPU free thousandths.

Arrays (numpy, one row per node) so that a policy can score every node at once.
A GPU slot that a node does not have holds 0 free thousandths: it can host
nothing and counts as nothing, so no mask is needed in the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlc.sim.trace import MAX_GPUS_PER_NODE, MILLI, NodeSpec, PodSpec

#: GpuClustering's affinity tags: 0 = a share, k = a pod of k whole GPUs
N_AFFINITY_TAGS = MAX_GPUS_PER_NODE + 1


@dataclass(frozen=True)
class Placement:
    """Where a pod goes: a node (row index) and the GPUs (slot indexes) it takes."""

    node: int
    gpus: tuple[int, ...] = ()


def affinity_tag(pod: PodSpec) -> int:
    """GpuClustering's tag of a GPU pod: 0 for a share, else its GPU count."""
    return 0 if pod.is_share else pod.num_gpu


class ClusterState:
    """Free resources of every node; :meth:`place` is the only mutation."""

    def __init__(self, nodes: list[NodeSpec]) -> None:
        # Sorted by name: the paper's scheduler breaks score ties by the smallest name.
        nodes = sorted(nodes, key=lambda n: n.name)
        self.names = [n.name for n in nodes]
        self.model_names = sorted({n.model for n in nodes})
        index = {m: i for i, m in enumerate(self.model_names)}
        self.model = np.array([index[n.model] for n in nodes], dtype=np.int64)
        self.gpu_count = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.cpu_capacity = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_capacity = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.cpu_left = self.cpu_capacity.copy()
        self.mem_left = self.mem_capacity.copy()
        slots = np.arange(MAX_GPUS_PER_NODE)[None, :]
        self.gpu_exists = slots < self.gpu_count[:, None]
        self.gpu_left = np.where(self.gpu_exists, MILLI, 0).astype(np.int64)
        #: pods per GpuClustering tag on each node
        self.affinity = np.zeros((len(nodes), N_AFFINITY_TAGS), dtype=np.int64)
        self.total_gpu_milli = int(self.gpu_count.sum()) * MILLI
        self.used_gpu_milli = 0
        self._access_cache: dict[frozenset[str], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.names)

    def access(self, models: frozenset[str]) -> np.ndarray:
        """Nodes whose GPU model a pod restricted to ``models`` may use (empty: all)."""
        if not models:
            return np.ones(len(self), dtype=bool)
        mask = self._access_cache.get(models)
        if mask is None:
            by_model = np.array([m in models for m in self.model_names], dtype=bool)
            mask = self._access_cache[models] = by_model[self.model]
        return mask

    def gpus_fitting(self, pod: PodSpec) -> np.ndarray:
        """``[node, slot]`` booleans: can the slot take one GPU's worth of ``pod``."""
        return self.gpu_left >= max(pod.gpu_milli, 1)

    def feasible(self, pod: PodSpec) -> np.ndarray:
        """Nodes where the pod fits: CPU, memory, GPU model and enough GPU room."""
        ok = (self.cpu_left >= pod.cpu_milli) & (self.mem_left >= pod.memory_mib)
        if pod.num_gpu:
            ok &= self.access(pod.gpu_models)
            ok &= self.gpus_fitting(pod).sum(axis=1) >= pod.num_gpu
        return ok

    def fully_free(self) -> np.ndarray:
        """Whole free GPUs per node."""
        return (self.gpu_left == MILLI).sum(axis=1)

    def gpu_free_total(self) -> np.ndarray:
        """Free GPU thousandths per node."""
        return self.gpu_left.sum(axis=1)

    def place(self, pod: PodSpec, where: Placement) -> None:
        """Take the pod's resources on ``where``; a bad placement is a bug, so it raises."""
        n = where.node
        if len(where.gpus) != pod.num_gpu or len(set(where.gpus)) != pod.num_gpu:
            raise ValueError(f"{pod.name}: needs {pod.num_gpu} distinct GPUs, got {where.gpus}")
        if self.cpu_left[n] < pod.cpu_milli or self.mem_left[n] < pod.memory_mib:
            raise ValueError(f"{pod.name}: CPU or memory over-allocated on {self.names[n]}")
        for g in where.gpus:
            if not self.gpu_exists[n, g] or self.gpu_left[n, g] < pod.gpu_milli:
                raise ValueError(f"{pod.name}: GPU {g} of {self.names[n]} over-allocated")
        self.cpu_left[n] -= pod.cpu_milli
        self.mem_left[n] -= pod.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] -= pod.gpu_milli
        if pod.num_gpu:
            self.affinity[n, affinity_tag(pod)] += 1
        self.used_gpu_milli += pod.total_gpu_milli

    def allocation_ratio(self) -> float:
        """Allocated GPU thousandths over all GPU thousandths, in percent."""
        return 100.0 * self.used_gpu_milli / self.total_gpu_milli
