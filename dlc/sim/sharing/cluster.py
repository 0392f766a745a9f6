"""The sharing-cost simulator's cluster: GPUs with their backend, tenants and free room.

Placement is best fit (the GPU, or the node for whole GPUs, left with the least room; ties to
the first), with DLC's tenancy rule taken from the scheduler itself
(:func:`dlc.scheduler.placement.share_placement.may_share_mps`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dlc.scheduler.placement.share_placement import Tenant, may_share_mps
from dlc.sim.sharing.costs import MPS
from dlc.sim.sharing.policy import BackendPolicy
from dlc.sim.sharing.workload import JobSpec
from dlc.sim.trace import MILLI, NodeSpec


@dataclass
class Gpu:
    """One GPU: its backend, free thousandths and the jobs running on it."""

    node: int
    index: int
    backend: str
    free: int = MILLI
    #: running jobs (shares, or the one whole-GPU job) by index
    jobs: list[int] = field(default_factory=list)
    #: tenants of the running shares, one entry per share
    tenants: list[str] = field(default_factory=list)
    whole: bool = False


@dataclass
class Node:
    """One machine's free CPU and memory and its GPUs."""

    cpu: int
    mem: int
    gpus: list[Gpu]


class Cluster:
    """Free resources of the sampled nodes under one backend policy."""

    def __init__(self, nodes: Sequence[NodeSpec], policy: BackendPolicy) -> None:
        self.policy = policy
        self.nodes = [
            Node(
                n.cpu_milli, n.memory_mib, [Gpu(i, g, policy.backend_of(i)) for g in range(n.gpus)]
            )
            for i, n in enumerate(nodes)
        ]
        self.total_gpus = sum(len(n.gpus) for n in self.nodes)

    def _open_to(self, gpu: Gpu, tenant: str) -> bool:
        if not (self.policy.tenancy and gpu.backend == MPS):
            return True
        me = Tenant(tenant, tenant)
        return all(may_share_mps(me, Tenant(t, t)) for t in set(gpu.tenants))

    def place(self, job: JobSpec) -> list[Gpu] | None:
        """The GPUs ``job`` gets (taken), or ``None`` when nothing fits now."""
        best: tuple[int, list[Gpu]] | None = None
        for node in self.nodes:
            if node.cpu < job.cpu_milli or node.mem < job.memory_mib:
                continue
            if job.is_share:
                for gpu in node.gpus:
                    if gpu.whole or gpu.free < job.gpu_milli or not self._open_to(gpu, job.tenant):
                        continue
                    left = gpu.free - job.gpu_milli
                    if best is None or left < best[0]:
                        best = (left, [gpu])
            else:
                free = [g for g in node.gpus if g.free == MILLI]
                if len(free) >= job.num_gpu and (best is None or len(free) < best[0]):
                    best = (len(free), free[: job.num_gpu])
        if best is None:
            return None
        self._take(job, best[1])
        return best[1]

    def _take(self, job: JobSpec, gpus: list[Gpu]) -> None:
        node = self.nodes[gpus[0].node]
        node.cpu -= job.cpu_milli
        node.mem -= job.memory_mib
        for gpu in gpus:
            gpu.free -= job.gpu_milli
            gpu.jobs.append(job.idx)
            if job.is_share:
                gpu.tenants.append(job.tenant)
            else:
                gpu.whole = True

    def release(self, job: JobSpec, gpus: list[Gpu]) -> None:
        """Give back what :meth:`place` took."""
        node = self.nodes[gpus[0].node]
        node.cpu += job.cpu_milli
        node.mem += job.memory_mib
        for gpu in gpus:
            gpu.free += job.gpu_milli
            gpu.jobs.remove(job.idx)
            if job.is_share:
                gpu.tenants.remove(job.tenant)
            else:
                gpu.whole = False

    def room(self) -> tuple[int, int]:
        """The most thousandths free on one shareable GPU, the most whole GPUs on one node."""
        share = whole = 0
        for node in self.nodes:
            free = 0
            for gpu in node.gpus:
                if gpu.free == MILLI:
                    free += 1
                if not gpu.whole and gpu.free > share:
                    share = gpu.free
            whole = max(whole, free)
        return share, whole
