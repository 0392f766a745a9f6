"""The openb cluster as simulated Mesos agents, and its pods as jobs for the core.

Each of the 1,213 GPU nodes of ``openb_node_list_gpu_node.csv`` becomes an agent with its
CPUs, memory, ``gpus``/``gpu_ids`` and one ``gpu_mem``/``gpu_core`` block per GPU; each pod
becomes a :class:`~dlc.scheduler.jobs.job.JobSpec`: ``num_gpu`` whole GPUs, or a share of one
GPU (``gpu_fraction = gpu_milli / 1000``: that much compute and memory).
"""

from __future__ import annotations

from dlc.sim.cluster_sim.engine import WorkItem
from dlc.sim.cluster_sim.master import SimAgentSpec
from dlc.sim.openb_jobs import DEFAULT_GPU_MIB, GPU_MIB, spec_of
from dlc.sim.trace import NodeSpec, PodSpec
from dlc.topology import gpu_shares

__all__ = ["DEFAULT_GPU_MIB", "GPU_MIB", "agent_of", "item_of", "spec_of"]


def agent_of(node: NodeSpec) -> SimAgentSpec:
    """The simulated agent of one openb node."""
    gpus = range(node.gpus)
    mib = GPU_MIB.get(node.model, DEFAULT_GPU_MIB)
    text = f"cpus:{node.cpu_milli / 1000:g};mem:{node.memory_mib};disk:1048576"
    if node.gpus:
        mem = gpu_shares.ranges_text(gpu_shares.mem_ranges({i: mib for i in gpus}))
        core = gpu_shares.ranges_text(gpu_shares.core_ranges(gpus))
        text += (f";gpus:{node.gpus};gpu_ids:{{{','.join(map(str, gpus))}}}"
                 f";gpu_mem:{mem};gpu_core:{core}")  # fmt: skip
    return SimAgentSpec(node.name, node.name, text, {"gpu_model": node.model})


def item_of(pod: PodSpec, n: int, at: float) -> WorkItem:
    """A pod as a work item that never ends (pods only arrive, as in the FGD replay); a
    CPU-only pod is a CPU-only job."""
    return WorkItem(f"p{n}-{pod.name}", "pod", "openb", "-", at, spec_of(pod), 1e12)
