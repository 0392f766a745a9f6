"""The five packing baselines of the FGD paper, re-implemented from its definitions.

Random, DotProd (Tetris-like alignment), GpuClustering, GpuPacking and BestFit
(Weng et al., ATC'23, section 6.1). Scores are computed for every node at once.
"""

from __future__ import annotations

import numpy as np

from dlc.sim.cluster import Placement, affinity_tag
from dlc.sim.policies.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    ClusterView,
    gpus_random,
    scored_policy,
)
from dlc.sim.trace import MILLI, PodSpec


def random_policy(pod: PodSpec, view: ClusterView, rng: np.random.Generator):
    """Random: any node where the pod fits, any GPU with room."""
    candidates = np.flatnonzero(view.cluster.feasible(pod))
    if not len(candidates):
        return None
    node = int(candidates[rng.integers(len(candidates))])
    return Placement(node, gpus_random(pod, view, node, rng))


def dot_product_score(pod: PodSpec, view: ClusterView) -> np.ndarray:
    """DotProd: prefer the node whose free (CPU, GPU) vector is least aligned with the pod's."""
    c = view.cluster
    dot = (c.cpu_left / MAX_SPEC_CPU) * (pod.cpu_milli / MAX_SPEC_CPU)
    dot = dot + (c.gpu_free_total() / MAX_SPEC_GPU) * (pod.total_gpu_milli / MAX_SPEC_GPU)
    return (100 * (1 - dot / 2)).astype(np.int64)


def gpu_clustering_score(pod: PodSpec, view: ClusterView) -> np.ndarray:
    """GpuClustering: put pods of the same GPU size together, then the fuller nodes."""
    c = view.cluster
    if not pod.num_gpu:
        return np.zeros(len(c), dtype=np.int64)
    base = 25 * (MAX_SPEC_GPU - c.gpu_free_total()) // MAX_SPEC_GPU
    kinds = (c.affinity > 0).sum(axis=1)
    same = c.affinity[:, affinity_tag(pod)] > 0
    tier = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
    return base + tier


def gpu_packing_score(pod: PodSpec, view: ClusterView) -> np.ndarray:
    """GpuPacking: shared GPUs first, then free GPUs of used nodes, idle nodes last."""
    c = view.cluster
    if not pod.num_gpu:
        return np.zeros(len(c), dtype=np.int64)
    free = c.fully_free()
    idle = free == c.gpu_count
    idle_score = np.maximum(33 - free, free)
    # the GPU(s) the packing would take: the fullest that fit (a share takes one)
    room = np.where(c.gpu_left >= pod.gpu_milli, c.gpu_left, MILLI + 1)
    if pod.is_share:
        took = room.min(axis=1)
        shared = 100 - (took * 100 // MILLI) // 10
        used_score = np.where(took == MILLI, 49, np.maximum(shared, 50))
    else:
        used_score = np.full(len(c), max(50 - pod.num_gpu, 33))
    return np.where(idle, idle_score, used_score)


def best_fit_score(pod: PodSpec, view: ClusterView) -> np.ndarray:
    """BestFit: the node with the least CPU and GPU left after placing the pod."""
    c = view.cluster
    left = 0.5 * (c.cpu_left - pod.cpu_milli) / MAX_SPEC_CPU
    left = left + 0.5 * (c.gpu_free_total() - pod.total_gpu_milli) / MAX_SPEC_GPU
    return ((1 - left) * 100).astype(np.int64)


dot_product = scored_policy(dot_product_score)
gpu_clustering = scored_policy(gpu_clustering_score)
gpu_packing = scored_policy(gpu_packing_score)
best_fit = scored_policy(best_fit_score)
