"""What every simulator placement policy shares: its signature and GPU choices.

A policy is a function ``policy(pod, view, rng) -> Placement | None``: it reads
the cluster (never changes it) and returns where the pod goes, or ``None`` when it
fits nowhere. Scores are integers where the paper's simulator (Kubernetes score
plugins) makes them integers, and the best node is drawn uniformly among ties,
as Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dlc.sim.cluster import ClusterState, Placement
from dlc.sim.frag import FragState
from dlc.sim.trace import MILLI, PodSpec

#: the normalisers of the paper's DotProd and BestFit scores (a node's largest CPU and GPU)
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8 * MILLI


@dataclass
class ClusterView:
    """What a policy sees: the cluster and its per-node fragmentation."""

    cluster: ClusterState
    frag: FragState


Policy = Callable[[PodSpec, ClusterView, np.random.Generator], "Placement | None"]


def pick_max(scores: np.ndarray, candidates: np.ndarray) -> int:
    """The candidate (node index, ascending) with the highest score; the first on ties."""
    return int(candidates[np.argmax(scores[candidates])])


def exclusive_gpus(gpu_left_row: np.ndarray, count: int) -> tuple[int, ...]:
    """The first ``count`` whole free GPUs of a node, by index."""
    return tuple(int(g) for g in np.flatnonzero(gpu_left_row == MILLI)[:count])


def best_fit_gpu(gpu_left_row: np.ndarray, milli: int) -> int:
    """The GPU with the least room that still fits ``milli`` (first index on ties)."""
    room = np.where(gpu_left_row >= milli, gpu_left_row, MILLI + 1)
    return int(np.argmin(room))


def gpus_best(pod: PodSpec, view: ClusterView, node: int, rng: np.random.Generator):
    """The paper's default GPU choice: tightest GPU for a share, first free ones else."""
    row = view.cluster.gpu_left[node]
    if not pod.num_gpu:
        return ()
    if pod.is_share:
        return (best_fit_gpu(row, pod.gpu_milli),)
    return exclusive_gpus(row, pod.num_gpu)


def gpus_random(pod: PodSpec, view: ClusterView, node: int, rng: np.random.Generator):
    """Random's GPU choice: any GPU with room for a share, first free ones else."""
    row = view.cluster.gpu_left[node]
    if not pod.num_gpu:
        return ()
    if pod.is_share:
        fit = np.flatnonzero(row >= pod.gpu_milli)
        return (int(fit[rng.integers(len(fit))]),)
    return exclusive_gpus(row, pod.num_gpu)


def scored_policy(score: Callable[[PodSpec, ClusterView], np.ndarray], gpus=gpus_best) -> Policy:
    """A policy from an integer node-score function (higher is better)."""

    def policy(pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        candidates = np.flatnonzero(view.cluster.feasible(pod))
        if not len(candidates):
            return None
        node = pick_max(score(pod, view), candidates)
        return Placement(node, gpus(pod, view, node, rng))

    policy.__doc__ = score.__doc__
    return policy
