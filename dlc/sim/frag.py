"""The FGD paper's fragmentation measure, vectorized over node states.

For a node and one target pod shape m, the free GPU thousandths that m cannot
use are fragments: all of them when m cannot run there (no GPU asked, wrong GPU
model, too few CPUs, too few GPUs with room), otherwise those on GPUs with less
room than m asks per GPU. A node's fragmentation is the frequency-weighted sum
over the target mix (Weng et al., ATC'23, section 4).
"""

from __future__ import annotations

import numpy as np

from dlc.sim.workload import TargetMix

# Random odd multipliers to hash a node state (model, CPU, sorted GPUs) into one integer.
_HASH = np.random.default_rng(20230711).integers(1, 2**62, size=10, dtype=np.int64) | 1


class FragModel:
    """Fragmentation of node states against one target mix."""

    def __init__(self, mix: TargetMix, model_names: list[str]) -> None:
        self.mix = mix
        self.access = mix.access(model_names)  # [model, shape]
        self.asks_gpu = mix.gpu_milli > 0

    def of_states(
        self, model: np.ndarray, cpu_left: np.ndarray, gpu_left: np.ndarray
    ) -> np.ndarray:
        """Fragmentation (GPU thousandths) of K node states; ``gpu_left`` is ``[K, 8]``."""
        mix = self.mix
        total = gpu_left.sum(axis=1)
        fits = gpu_left[:, :, None] >= np.maximum(mix.gpu_milli, 1)[None, None, :]
        usable = np.einsum("kg,kgm->km", gpu_left, fits)
        hosts = fits.sum(axis=1) >= mix.num_gpu[None, :]
        runs = hosts & (cpu_left[:, None] >= mix.cpu_milli[None, :])
        runs &= self.access[model] & self.asks_gpu[None, :]
        frag = np.where(runs, total[:, None] - usable, total[:, None])
        return frag @ mix.weight

    def of_states_dedup(
        self, model: np.ndarray, cpu_left: np.ndarray, gpu_left: np.ndarray
    ) -> np.ndarray:
        """As :meth:`of_states`, computing each distinct state once (many nodes are alike)."""
        if len(model) < 64:
            return self.of_states(model, cpu_left, gpu_left)
        gpus = np.sort(gpu_left, axis=1)
        key = model * _HASH[0] + cpu_left * _HASH[1] + gpus @ _HASH[2:]
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        values = self.of_states(model[first], cpu_left[first], gpus[first])
        return values[inverse.reshape(-1)]


class FragState:
    """Fragmentation of every node of a cluster, kept current as pods are placed."""

    def __init__(self, model: FragModel, cluster) -> None:
        self.model = model
        self.cluster = cluster
        self.node = model.of_states_dedup(cluster.model, cluster.cpu_left, cluster.gpu_left)

    def update(self, n: int) -> None:
        """Recompute node ``n`` after a placement changed it."""
        c = self.cluster
        self.node[n] = self.model.of_states(
            c.model[n : n + 1], c.cpu_left[n : n + 1], c.gpu_left[n : n + 1]
        )[0]

    def total(self) -> float:
        """Fragmented GPU thousandths over the cluster."""
        return float(self.node.sum())
