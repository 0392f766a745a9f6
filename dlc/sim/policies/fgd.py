"""FGD, Fragmentation Gradient Descent (Weng et al., ATC'23, section 5).

Place the pod where the cluster's fragmentation (against the target workload)
grows the least. For a share, every GPU with room on every node is a candidate.
As in the paper's Kubernetes plugin, the decrease is squashed into an integer
score ``int(100 * sigmoid(decrease / 1000))``; ties go to the first node (by name)
and to the lowest GPU index within a node.

A node's score depends on its own state only, so scores are cached per pod shape
and recomputed only for nodes changed since (the scheduler core's
:class:`~dlc.scheduler.allocator.fragscore.IncrementalChooser`); the decisions are
the same as scoring every node each time.
"""

from __future__ import annotations

import numpy as np

from dlc.scheduler.allocator.fragscore import IncrementalChooser
from dlc.scheduler.allocator.shares import ShareRequest
from dlc.sim.cluster import Placement
from dlc.sim.policies.base import ClusterView, exclusive_gpus
from dlc.sim.trace import MILLI, PodSpec


def candidate_states(pod: PodSpec, view: ClusterView, nodes: np.ndarray):
    """Node states after placing ``pod``: ``(node, gpu, model, cpu_left, gpu_left)``.

    One candidate per (node, GPU with room) for a share, one per node otherwise
    (``gpu`` is -1 there: whole GPUs are the first free ones).
    """
    c = view.cluster
    if pod.is_share:
        rows, slots = np.nonzero(c.gpu_left[nodes] >= pod.gpu_milli)
        node = nodes[rows]
        gpu_left = c.gpu_left[node].copy()
        gpu_left[np.arange(len(node)), slots] -= pod.gpu_milli
        return node, slots, c.model[node], c.cpu_left[node] - pod.cpu_milli, gpu_left
    gpu_left = c.gpu_left[nodes].copy()
    if pod.num_gpu:
        full = gpu_left == MILLI
        gpu_left[full & (np.cumsum(full, axis=1) <= pod.num_gpu)] = 0
    slots = np.full(len(nodes), -1)
    return nodes, slots, c.model[nodes], c.cpu_left[nodes] - pod.cpu_milli, gpu_left


def frag_increase(pod: PodSpec, view: ClusterView, nodes: np.ndarray):
    """``(node, gpu, increase)`` for every candidate of ``pod`` among ``nodes``."""
    node, slots, model, cpu_left, gpu_left = candidate_states(pod, view, nodes)
    after = view.frag.model.of_states_dedup(model, cpu_left, gpu_left)
    return node, slots, after - view.frag.node[node]


def _pod_of(req: ShareRequest) -> PodSpec:
    milli = req.gpu_milli if req.num_gpus else 0
    return PodSpec("probe", req.cpu_milli, 0, req.num_gpus, milli, req.gpu_models)


def fgd_costs(view: ClusterView, req: ShareRequest, nodes: np.ndarray) -> np.ndarray:
    """Minus FGD's integer score per (node, GPU) of ``nodes`` (inf: does not fit)."""
    pod = _pod_of(req)
    cost = np.full((len(nodes), view.cluster.gpu_left.shape[1]), np.inf)
    ok = nodes[view.cluster.feasible(pod)[nodes]]
    if not len(ok):
        return cost
    node, slots, increase = frag_increase(pod, view, ok)
    score = (100.0 / (1.0 + np.exp(increase / 1000.0))).astype(np.int64)
    cost[np.searchsorted(nodes, node), np.maximum(slots, 0)] = -score
    return cost


class FgdPolicy:
    """FGD as a callable policy; the score cache is per replay (per view)."""

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self._last: int | None = None

    def __call__(self, pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        """FGD: the node (and GPU) whose placement grows fragmentation the least."""
        if self._view is not view:
            self._view = view
            self._chooser = IncrementalChooser(
                len(view.cluster),
                view.cluster.gpu_left.shape[1],
                lambda req, nodes: fgd_costs(view, req, nodes),
            )
            # FGD takes the lowest GPU index among a node's best: rank slots by index only
            self._first_slot = np.broadcast_to(
                np.arange(view.cluster.gpu_left.shape[1]), view.cluster.gpu_left.shape
            )
            self._last = None
        if self._last is not None:
            self._chooser.touched(self._last)
        req = ShareRequest(
            pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli or MILLI, pod.gpu_models
        )
        best = self._chooser.best(req, view.cluster.mem_left, self._first_slot)
        self._last = None if best is None else best[0]
        if best is None:
            return None
        node, slot = best
        if not pod.num_gpu:
            return Placement(node)
        if not pod.is_share:
            return Placement(node, exclusive_gpus(view.cluster.gpu_left[node], pod.num_gpu))
        return Placement(node, (slot,))


def fgd(pod: PodSpec, view: ClusterView, rng: np.random.Generator):
    """FGD scoring every node each time (reference; :class:`FgdPolicy` caches)."""
    c = view.cluster
    nodes = np.flatnonzero(c.feasible(pod))
    if not len(nodes):
        return None
    node, slots, increase = frag_increase(pod, view, nodes)
    score = (100.0 / (1.0 + np.exp(increase / 1000.0))).astype(np.int64)
    chosen = int(node[np.argmax(score)])
    if not pod.num_gpu:
        return Placement(chosen)
    if not pod.is_share:
        return Placement(chosen, exclusive_gpus(c.gpu_left[chosen], pod.num_gpu))
    mine = node == chosen
    first = np.flatnonzero(mine & (score == score[mine].max()))[0]
    return Placement(chosen, (int(slots[first]),))


__all__ = ["FgdPolicy", "fgd", "fgd_costs", "frag_increase"]
