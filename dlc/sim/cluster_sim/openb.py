"""The openb cluster as simulated Mesos agents, and its pods as jobs for the core.

Each of the 1,213 GPU nodes of ``openb_node_list_gpu_node.csv`` becomes an agent with its
CPUs, memory, ``gpus``/``gpu_ids`` and one ``gpu_mem``/``gpu_core`` block per GPU; each pod
becomes a :class:`~dlc.scheduler.jobs.JobSpec`: ``num_gpu`` whole GPUs, or a share of one
GPU (``gpu_fraction = gpu_milli / 1000``: that much compute and memory).
"""

from __future__ import annotations

from dlc.scheduler.jobs import JobSpec
from dlc.sim.cluster_sim.engine import WorkItem
from dlc.sim.cluster_sim.master import SimAgentSpec
from dlc.sim.trace import NodeSpec, PodSpec
from dlc.topology import gpu_shares

#: GPU memory (MiB) by openb model; G2/G3 are not public and assumed 16 GiB (a share asks
#: the same fraction of memory as of compute, so the size does not change what fits)
GPU_MIB = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768, "A10": 24576}
DEFAULT_GPU_MIB = 16384


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


def spec_of(pod: PodSpec) -> JobSpec | None:
    """The job of one pod (``None``: a CPU-only pod, which DLC jobs cannot be)."""
    if pod.num_gpu == 0:
        return None
    model = next(iter(pod.gpu_models)) if len(pod.gpu_models) == 1 else None
    base = JobSpec(
        image="sim/pod:1", gpus=pod.num_gpu, cpus=max(pod.cpu_milli, 1) / 1000,
        mem_mib=max(32, pod.memory_mib), gpu_model=model, name=pod.name,
    )  # fmt: skip
    if pod.gpu_milli < 1000:
        return JobSpec(**{**base.__dict__, "gpus": 1, "gpu_fraction": pod.gpu_milli / 1000})
    return base


def item_of(pod: PodSpec, n: int, at: float) -> WorkItem | None:
    """A pod as a work item that never ends (pods only arrive, as in the FGD replay)."""
    spec = spec_of(pod)
    if spec is None:
        return None
    return WorkItem(f"p{n}-{pod.name}", "pod", "openb", "-", at, spec, 1e12)
