"""What the decision-recording bench scripts share: the direct replay's start, labels, loading.

``bench/sim_share_strand.py``, ``bench/sim_model_fill.py`` and ``bench/sim_gap_open.py`` each
walk :func:`dlc.sim.replay.replay`'s loop themselves (same arrivals and random stream as ``dlc
simulate openb``) to record every decision; this module holds the set-up they had each written
out, so each keeps only what it measures. Imported after the script has put the checkout's root
on ``sys.path``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlc.sim import io
from dlc.sim.cluster import ClusterState, Placement
from dlc.sim.frag import FragModel, FragState
from dlc.sim.policies import get_policy
from dlc.sim.policies.base import ClusterView, Policy
from dlc.sim.trace import NodeSpec, PodSpec
from dlc.sim.workload import arrival_sequence, target_mix

#: the arrivals' total GPU demand against the cluster's GPUs, as ``dlc simulate openb``'s
ARRIVED = 1.3


@dataclass
class Replay:
    """One policy's replay at its start: the cluster, its arrivals and what decides them.

    Attributes:
        cluster: the cluster's free resources (placements change it).
        total: the cluster's GPUs, in thousandths.
        rng: the replay's random stream (the arrivals drew from it; the policy draws next).
        arrivals: the pods in arrival order.
        policy: where a pod goes (``None``: it fails).
        view: what the policy reads (the cluster and its fragmentation state).
    """

    cluster: ClusterState
    total: int
    rng: np.random.Generator
    arrivals: list[PodSpec]
    policy: Policy
    view: ClusterView

    def walk(self, at: list[float]) -> Iterator[tuple[PodSpec, float, list[float]]]:
        """Each arrival, with the demand arrived once it is in (percent of the GPUs) and the
        ``at`` checkpoints (percents) it took the demand past, each once and in order: what
        to report before the pod is decided."""
        marks, so_far = sorted(at), 0
        for pod in self.arrivals:
            so_far += pod.total_gpu_milli
            crossed = []
            while marks and so_far > marks[0] / 100 * self.total:
                crossed.append(marks.pop(0))
            yield pod, 100 * so_far / self.total, crossed

    def decide(self, pod: PodSpec) -> Placement | None:
        """The policy's choice for ``pod`` now (the cluster is not changed)."""
        return self.policy(pod, self.view, self.rng)

    def place(self, pod: PodSpec, where: Placement) -> None:
        """Put ``pod`` where the policy chose; its node's fragmentation is updated."""
        self.cluster.place(pod, where)
        self.view.frag.update(where.node)


def start(nodes: list[NodeSpec], pods: list[PodSpec], policy_name: str, seed: int) -> Replay:
    """The replay of ``pods`` on ``nodes`` by ``policy_name`` with seed ``seed``, not yet run."""
    cluster = ClusterState(nodes)
    total = cluster.total_gpu_milli
    rng = np.random.default_rng(seed)
    arrivals = arrival_sequence(pods, total, ARRIVED, rng)
    policy = get_policy(policy_name)
    view = ClusterView(
        cluster, FragState(FragModel(target_mix(pods), cluster.model_names), cluster)
    )
    return Replay(cluster, total, rng, arrivals, policy, view)


def shape(pod: PodSpec, memory: bool = False) -> str:
    """``GPUsxthousandths cores`` (``cpu-only cores`` for a CPU-only pod), then ``GiB`` when
    ``memory``: ``1x810 3.152c``, ``cpu-only 4c 8G``."""
    gpus = f"{pod.num_gpu}x{pod.gpu_milli}" if pod.num_gpu else "cpu-only"
    label = f"{gpus} {pod.cpu_milli / 1000:g}c"
    return f"{label} {pod.memory_mib / 1024:.0f}G" if memory else label


def node_type(cluster: ClusterState, n: int) -> str:
    """Node ``n``'s type, ``MODELxGPUs/coresc``: ``P100x2/16c``."""
    model = cluster.model_names[cluster.model[n]]
    return f"{model}x{cluster.gpu_count[n]}/{cluster.cpu_capacity[n] // 1000}c"


def arguments(
    doc: str, trace: str, seed: int, at: str, policies: str | None = None
) -> argparse.ArgumentParser:
    """The options every such script takes (``--trace``, ``--seed``, ``--policies`` unless
    ``policies`` is ``None``, ``--at`` and the knobs, ``NAME=VALUE``) with these defaults; the
    script adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--trace", default=trace)
    parser.add_argument("--seed", type=int, default=seed)
    if policies is not None:
        parser.add_argument("--policies", default=policies)
    parser.add_argument("--at", default=at, help="percents of the GPUs arrived")
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    return parser


def percents(text: str) -> list[float]:
    """``--at``'s value: ``20,86`` -> ``[20.0, 86.0]``."""
    return [float(a) for a in text.split(",")]


def load(trace: str) -> tuple[list[NodeSpec], list[PodSpec]]:
    """The openb nodes and ``trace``'s pods, from ``$DLC_TRACES`` (default ``traces``)."""
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    return io.load_nodes(root), io.load_pods(root, trace)
