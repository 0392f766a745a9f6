"""The openb replay: pods only arrive; each is placed by a policy or fails.

After every arrival the allocated and the arrived GPU thousandths are recorded,
as the paper's simulator logs them, so that :mod:`dlc.sim.metrics` can read the
allocation ratio at each 1% of arrived demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dlc.sim.cluster import ClusterState
from dlc.sim.frag import FragModel, FragState
from dlc.sim.policies.base import ClusterView, Policy
from dlc.sim.trace import NodeSpec, PodSpec
from dlc.sim.workload import TargetMix


@dataclass
class ReplayResult:
    """What one replay produced. Event 0 is the empty cluster; event i follows pod i-1."""

    total_gpu_milli: int
    arrived_gpu_milli: np.ndarray
    used_gpu_milli: np.ndarray
    frag_gpu_milli: np.ndarray
    placed: int = 0
    failed: list[int] = field(default_factory=list)
    failed_gpu_milli: int = 0

    @property
    def pods(self) -> int:
        """Pods that arrived."""
        return len(self.arrived_gpu_milli) - 1


def replay(
    nodes: list[NodeSpec],
    arrivals: list[PodSpec],
    policy: Policy,
    mix: TargetMix,
    rng: np.random.Generator,
    progress: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Place ``arrivals`` in order with ``policy``; a pod that fits nowhere fails."""
    cluster = ClusterState(nodes)
    frag = FragState(FragModel(mix, cluster.model_names), cluster)
    view = ClusterView(cluster, frag)
    n = len(arrivals)
    arrived = np.zeros(n + 1, dtype=np.int64)
    used = np.zeros(n + 1, dtype=np.int64)
    frags = np.zeros(n + 1)
    frags[0] = frag.total()
    result = ReplayResult(cluster.total_gpu_milli, arrived, used, frags)
    so_far = 0
    frag_total = frags[0]
    for i, pod in enumerate(arrivals, start=1):
        so_far += pod.total_gpu_milli
        where = policy(pod, view, rng)
        if where is None:
            result.failed.append(i - 1)
            result.failed_gpu_milli += pod.total_gpu_milli
        else:
            cluster.place(pod, where)
            before = frag.node[where.node]
            frag.update(where.node)
            frag_total += frag.node[where.node] - before
            result.placed += 1
        arrived[i] = so_far
        used[i] = cluster.used_gpu_milli
        frags[i] = frag_total
        if progress is not None and i % 256 == 0:
            progress(256)
    if progress is not None:
        progress(n % 256)
    return result
