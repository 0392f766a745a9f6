"""DLC's own placement in the simulator: the scheduler's core, fed from the sim state.

:mod:`dlc.scheduler.allocator.fragscore` decides (the same :func:`node_costs` that
:func:`dlc.scheduler.allocator.shares.place` runs in the scheduler); this adapter
only hands it the cluster's arrays (shared, not copied) and the target mix, and
tells its incremental chooser which agent the last placement changed.
"""

from __future__ import annotations

import numpy as np

from dlc.scheduler.allocator.fragscore import (
    DEFAULT_PARAMS,
    IncrementalChooser,
    ScoreParams,
    frag_dedup,
    gap_squares_delta,
    mix_arrays,
    node_costs,
    node_frag,
    placement_of,
    share_hold,
)
from dlc.scheduler.allocator.shares import (
    AgentArrays,
    ShareRequest,
    WorkloadMix,
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

    def __init__(self, params: ScoreParams = DEFAULT_PARAMS) -> None:
        self.params = params
        self._view: ClusterView | None = None
        self._last: int | None = None

    def _bind(self, view: ClusterView) -> None:
        c = view.cluster
        self._view = view  # held, so that a later view cannot reuse its id
        self._mix = mix_arrays(workload_mix(view.frag.model.mix), c.model_names, self.params)
        agents = AgentArrays(c.model, c.cpu_left, c.mem_left, c.gpu_left, c.access)
        agents.frag = frag_dedup(
            self._mix,
            agents.model,
            agents.cpu_left,
            agents.mem_left,
            agents.gpu_left,
            self.params,
        )
        self._agents = agents
        m = self._mix
        share_cpu = m.cpu[(m.milli > 0) & (m.milli < 1000)]
        self._live_cpu = int(share_cpu.min()) if len(share_cpu) else 0
        self._chooser = IncrementalChooser(
            len(c),
            c.gpu_left.shape[1],
            lambda req, nodes: node_costs(req, agents, self._mix, nodes, self.params),
        )
        self._last = None

    def _refresh(self) -> None:
        n = self._last
        if n is not None:
            assert self._agents.frag is not None  # measured in _bind
            self._agents.frag[n] = node_frag(self._mix, self._agents, np.array([n]), self.params)[0]
            self._chooser.touched(n)
            self._last = None

    def __call__(self, pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        """Place ``pod`` at the lowest :func:`node_costs` agent (the scheduler's scoring)."""
        if self._view is not view:
            self._bind(view)
        self._refresh()
        req = request_of(pod)
        extra = None
        if self.params.ss_weight and req.is_share:
            a = self._agents
            extra = self.params.ss_weight * gap_squares_delta(
                a.gpu_left, a.cpu_left, req.gpu_milli, self._live_cpu
            )
        if self.params.hold_reserve and req.is_share:
            hold = share_hold(req.gpu_milli, self._agents.gpu_left, self._mix, self.params)
            if hold is not None:
                extra = hold if extra is None else extra + hold
        best = self._chooser.best(req, self._agents.mem_left, self._agents.gpu_left, extra)
        if best is None:
            return None
        agent, slot = best
        self._last = agent
        chosen = placement_of(req, self._agents, agent, slot)
        return Placement(agent, chosen.gpus)
