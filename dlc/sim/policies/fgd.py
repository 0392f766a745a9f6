"""FGD, Fragmentation Gradient Descent (Weng et al., ATC'23, section 5).

Place the pod where the cluster's fragmentation (against the target workload)
grows the least. For a share, every GPU with room on every node is a candidate.
As in the paper's Kubernetes plugin, the decrease is squashed into an integer
score ``int(100 * sigmoid(decrease / 1000))``; ties go to the first node (by name)
and to the lowest GPU index within a node.
"""

from __future__ import annotations

import numpy as np

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


def fgd(pod: PodSpec, view: ClusterView, rng: np.random.Generator):
    """FGD: the node (and GPU) whose placement grows fragmentation the least."""
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
