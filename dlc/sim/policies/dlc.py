"""DLC's own placement in the simulator: the scheduler's core, fed from the sim state.

:mod:`dlc.scheduler.allocator.shares` decides; this adapter only hands it the
cluster's arrays (shared, not copied) and the target mix, and keeps the
per-agent fragmentation cache current between decisions.
"""

from __future__ import annotations

import numpy as np

from dlc.scheduler.allocator.shares import (
    AgentArrays,
    MixArrays,
    ShareRequest,
    WorkloadMix,
    choose,
    fragmentation,
)
from dlc.sim.cluster import Placement
from dlc.sim.policies.base import ClusterView
from dlc.sim.trace import PodSpec
from dlc.sim.workload import TargetMix


def workload_mix(mix: TargetMix) -> WorkloadMix:
    """The simulator's target mix as the scheduler's :class:`WorkloadMix`."""
    shapes = tuple(
        ShareRequest(
            cpu_milli=int(mix.cpu_milli[j]),
            mem_mib=0,
            num_gpus=int(mix.num_gpu[j]),
            gpu_milli=int(mix.gpu_milli[j]) or 1000,
            gpu_models=mix.models[j],
        )
        for j in range(len(mix))
    )
    return WorkloadMix(shapes=shapes, weights=tuple(float(w) for w in mix.weight))


def request_of(pod: PodSpec) -> ShareRequest:
    """A trace pod as the scheduler's request."""
    return ShareRequest(
        cpu_milli=pod.cpu_milli,
        mem_mib=pod.memory_mib,
        num_gpus=pod.num_gpu,
        gpu_milli=pod.gpu_milli or 1000,
        gpu_models=pod.gpu_models,
    )


class DlcPolicy:
    """Callable policy; one instance may serve many replays (state is per view)."""

    def __init__(self) -> None:
        self._view: ClusterView | None = None
        self._agents: AgentArrays | None = None
        self._mix: MixArrays | None = None
        self._last: int | None = None

    def _bind(self, view: ClusterView) -> None:
        c = view.cluster
        self._view = view  # held, so that a later view cannot reuse its id
        self._mix = MixArrays(workload_mix(view.frag.model.mix), c.model_names)
        self._agents = AgentArrays(c.model, c.cpu_left, c.mem_left, c.gpu_left, c.access)
        self._last = None

    def _refresh(self) -> None:
        a, n = self._agents, self._last
        if a is not None and a.frag is not None and n is not None:
            sl = slice(n, n + 1)
            a.frag[n] = fragmentation(
                self._mix, a.model[sl], a.cpu_left[sl], a.mem_left[sl], a.gpu_left[sl]
            )[0]

    def __call__(self, pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        """Place ``pod`` with :func:`dlc.scheduler.allocator.shares.choose`."""
        if self._view is not view:
            self._bind(view)
        self._refresh()
        chosen = choose(request_of(pod), self._agents, self._mix)
        if chosen is None:
            self._last = None
            return None
        self._last = chosen.agent
        return Placement(chosen.agent, chosen.gpus if pod.num_gpu else ())
