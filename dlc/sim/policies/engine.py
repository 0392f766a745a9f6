"""DLC in the direct replay through production's placement engine (issue 26).

Each pod is placed by :func:`dlc.scheduler.placement.placer.place`, the function the scheduler's
offer round calls, on one offer per openb node that this policy keeps as the master would
(what a launch took is gone from the next offer). The placement settings are those of
``--mode core`` (:func:`dlc.sim.cluster_sim.openb_core.core_engine`: first-fit within an
agent, no executor overhead) and the mix it scores against is the one the core builds
(:meth:`~dlc.scheduler.core.share_hold.ShareHolds.placement_mix`): the queued pod and
every placed pod, by shape. So the direct replay and the core differ only in what the core
adds around placement: pods arrive in batches between offer rounds and a round considers a
bounded number of jobs. A CPU-only pod is a CPU-only job (``gpus: 0``), placed by the same
measure (:meth:`~dlc.scheduler.placement.whole_score.WholeScore.order`): the agent where its
CPU and memory cost the mix's GPU shapes least.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from dlc.scheduler.allocator.shares import WorkloadMix
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.model import Launch, OfferView, PlacementConfig
from dlc.scheduler.placement.placer import place
from dlc.scheduler.placement.whole_score import Shape, counted_mix, shape_models
from dlc.sim.cluster import ClusterState, Placement
from dlc.sim.openb_jobs import DEFAULT_GPU_MIB, GPU_MIB, quiet_topology, spec_of
from dlc.sim.policies.base import ClusterView
from dlc.sim.trace import MILLI, PodSpec
from dlc.topology import gpu_shares
from dlc.topology.gpu_shares import STRIDE

#: the placement settings of ``--mode core`` (openb_core.core_engine)
CONFIG = PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0)


def offer_of(cluster: ClusterState, n: int) -> OfferView:
    """Node ``n`` of ``cluster`` as one offer of its simulated agent
    (:func:`dlc.sim.cluster_sim.openb.agent_of`'s resources and attributes) holding what is
    free now: a GPU part-used by shares offers the rest of its compute and as much of its
    memory (a share takes the same fraction of both)."""
    name, model = cluster.names[n], cluster.model_names[int(cluster.model[n])]
    gpus = range(int(cluster.gpu_count[n]))
    mib = GPU_MIB.get(model, DEFAULT_GPU_MIB)
    left = {i: int(cluster.gpu_left[n, i]) for i in gpus}
    ids = frozenset(i for i in gpus if left[i] > 0)  # Mesos's: GPUs no whole task took
    used = {i: MILLI - left[i] for i in ids}
    mem = tuple(
        (i * STRIDE + mib * u // MILLI, i * STRIDE + mib - 1) for i, u in sorted(used.items())
    )
    core = tuple((i * STRIDE + u, i * STRIDE + MILLI - 1) for i, u in sorted(used.items()))
    return OfferView(
        offer_id=f"o-{name}",
        agent_id=name,
        hostname=name,
        cpus=int(cluster.cpu_left[n]) / 1000,
        mem_mib=float(cluster.mem_left[n]),
        disk_mib=1048576.0,
        gpus=float(len(ids)),
        gpu_ids=ids,
        attributes={"gpu_model": model},
        gpu_mem=mem,
        gpu_core=core,
        shares_accounted=bool(gpus),  # as the core marks agents whose totals hold blocks
    )


def shape_of(job: Job) -> Shape:
    """The job's task shape as the core's mix counts it (a share: its compute), with the
    GPU models it allows (a ``gpu_spec`` pod's)."""
    spec = job.spec
    milli = round((spec.gpu_fraction or 0) * 1000) if spec.is_share else 1000 * bool(spec.gpus)
    return int(spec.cpus * 1000), milli, 1 if spec.is_share else spec.gpus, shape_models(spec)


class EnginePolicy:
    """Callable policy (:mod:`dlc.sim.policies.base`); state is per cluster view."""

    def __init__(self) -> None:
        self._view: ClusterView | None = None

    def _bind(self, view: ClusterView) -> None:
        c = view.cluster
        self._view = view  # held, so that a later view cannot reuse its id
        self._offers = [offer_of(c, n) for n in range(len(c))]
        self._index = {name: n for n, name in enumerate(c.names)}
        self._running: Counter[Shape] = Counter()
        self._count = 0

    def mix(self, job: Job) -> WorkloadMix | None:
        """The core's mix: the queued pod and every placed pod, by shape."""
        counts = self._running.copy()
        counts[shape_of(job)] += 1
        return counted_mix(counts)

    def __call__(self, pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        """Place ``pod`` with :func:`~dlc.scheduler.placement.placer.place` (``None``: it waits)."""
        if self._view is not view:
            self._bind(view)
        spec = spec_of(pod)
        self._count += 1
        job = Job(job_id=f"p{self._count}", user="openb", spec=spec)
        live = [self._offers[n] for n in np.flatnonzero(_may_fit(view.cluster, pod))]
        with quiet_topology():
            result = place(live, [job], CONFIG, mix=lambda: self.mix(job))
        if not result.launches:
            return None
        launch = result.launches[0]
        n = self._index[launch.agent_id]
        self._offers[n] = _after(self._offers[n], spec.cpus, spec.mem_mib, launch)
        self._running[shape_of(job)] += 1
        if launch.share is not None:
            return Placement(n, (launch.share.gpu_index,))
        return Placement(n, tuple(launch.gpu_ids))


def _may_fit(cluster: ClusterState, pod: PodSpec) -> np.ndarray:
    """The nodes with room for ``pod`` (CPUs, memory, GPUs), whatever their GPU model: the
    only agents placement could choose, so offering only them changes no choice (the
    scores compare candidates, ties keep the offers' order) and saves building 1,213 slots
    a pod. The model is left to placement, which reads it as the core does."""
    ok = (cluster.cpu_left >= max(pod.cpu_milli, 1)) & (cluster.mem_left >= pod.memory_mib)
    return ok & ((cluster.gpu_left >= max(pod.gpu_milli, 1)).sum(axis=1) >= pod.num_gpu)


def _after(offer: OfferView, cpus: float, mem: float, launch: Launch) -> OfferView:
    """The agent's next offer: ``offer`` less what ``launch`` took (as the master's)."""
    take = launch.gpu_take
    return replace(
        offer,
        cpus=offer.cpus - cpus,
        mem_mib=offer.mem_mib - mem,
        gpus=offer.gpus - len(launch.gpu_ids),
        gpu_ids=offer.gpu_ids - set(launch.gpu_ids),
        gpu_mem=gpu_shares.subtract(offer.gpu_mem, take.mem),
        gpu_core=gpu_shares.subtract(offer.gpu_core, take.core),
    )
