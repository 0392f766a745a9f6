"""openb pods as DLC jobs and openb GPUs' memory: what the replay through the core
(:mod:`dlc.sim.cluster_sim.openb`) and the direct replay's DLC
(:mod:`dlc.sim.policies.engine`) both build on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from dlc.scheduler.jobs.job import JobSpec
from dlc.sim.trace import PodSpec

#: GPU memory (MiB) by openb model; G2/G3 are not public and assumed 16 GiB (a share asks
#: the same fraction of memory as of compute, so the size does not change what fits)
GPU_MIB = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768, "A10": 24576}
DEFAULT_GPU_MIB = 16384


def spec_of(pod: PodSpec) -> JobSpec:
    """The job of one pod (a CPU-only pod: a CPU-only job, ``gpus: 0``)."""
    # a pod allowing several models allows each (``V100M16|V100M32``: JobSpec.gpu_model);
    # a CPU-only pod names none (the spec refuses a model without GPUs)
    model = ("|".join(sorted(pod.gpu_models)) or None) if pod.num_gpu else None
    base = JobSpec(
        image="sim/pod:1", gpus=pod.num_gpu, cpus=max(pod.cpu_milli, 1) / 1000,
        mem_mib=max(32, pod.memory_mib), gpu_model=model, name=pod.name,
    )  # fmt: skip
    if pod.num_gpu and pod.gpu_milli < 1000:
        return JobSpec(**{**base.__dict__, "gpus": 1, "gpu_fraction": pod.gpu_milli / 1000})
    return base


@contextmanager
def quiet_topology() -> Iterator[None]:
    """No "agent has no dlc_topo" warning per agent while placing: none of openb's nodes
    has one (the replay through the core and the direct replay's engine policy)."""
    logger = logging.getLogger("dlc.scheduler.placement.gpu_choice")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
