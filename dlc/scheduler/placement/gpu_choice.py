"""Which GPUs of one agent's slot a whole-GPU job gets.

:func:`pick_gpus` refuses an agent of another vendor, a too old driver or ROCm, or missing
GPU models, and asks the allocator for the GPUs (first-fit, logged once per agent, where the
agent publishes no usable topology). A CPU-only job (``gpus: 0``) gets no GPU on any agent,
and :func:`cpu_only_order` puts the agents that have no GPU first for it.
"""

from __future__ import annotations

import functools
import logging

from dlc.errors import AllocationError, DlcError
from dlc.images import rocm_supports
from dlc.scheduler.allocator import allocate
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.agent_facts import agent_text, agent_vendor
from dlc.scheduler.placement.model import NO_TOPOLOGY_POLICY, DriverCheck, TopologyOf
from dlc.scheduler.placement.slots import Slot
from dlc.topology.model import Gpu, Topology
from dlc.topology.node_config import ATTR_DRIVER, ATTR_ROCM, ATTR_TOPOLOGY
from dlc.topology.node_config import ATTR_MODEL as ATTR_GPU_MODEL

log = logging.getLogger(__name__)

#: what :attr:`~dlc.scheduler.placement.model.Launch.policy` says of a CPU-only task
CPU_ONLY_POLICY = "none (CPU-only job)"


def pick_gpus(
    slot: Slot, job: Job, policy: str, topology_of: TopologyOf, driver_ok: DriverCheck
) -> tuple[tuple[int, ...], str, Topology | None]:
    """Choose GPUs on one agent: ``(ids, policy name, decoded topology or None)``.

    A CPU-only job gets ``((), CPU_ONLY_POLICY, None)`` on any agent: no GPU, no vendor,
    driver or model check (its image's CUDA needs no driver where no GPU is used), and no
    allocator call.

    Raises:
        AllocationError: the agent cannot take the job (driver, model, too few GPUs).
    """
    spec = job.spec
    if spec.is_cpu_only:
        return (), CPU_ONLY_POLICY, None
    attrs = slot.attributes
    topology = topology_of(attrs)
    _check_vendor(spec, slot, topology)
    driver = agent_text(attrs, ATTR_DRIVER)
    if spec.cuda_version and driver and not driver_ok(driver, spec.cuda_version):
        raise AllocationError(
            f"driver {driver} on {slot.hostname} is too old for CUDA {spec.cuda_version}", "driver"
        )
    has_models = topology is not None and any(g.model for g in topology.gpus)
    agent_model = agent_text(attrs, ATTR_GPU_MODEL) or ""
    if spec.gpu_model and not has_models and not model_matches(spec.gpu_model, agent_model):
        raise AllocationError(f"no {spec.gpu_model} GPUs on {slot.hostname}", "model_mismatch")
    free = slot.free
    model = spec.gpu_model if has_models else None
    if model and topology is not None:  # a GPU the topology does not list matches no model
        free = free & frozenset(topology.gpu_indices)
    if topology is None or not set(free) <= set(topology.gpu_indices):
        # Unknown layout: links are unknown, so only first-fit makes sense.
        _note_bare_agent(slot.agent_id, slot.hostname)
        ids = allocate(_bare_topology(frozenset(free)), free, spec.gpus, policy="first-fit")
        return ids, NO_TOPOLOGY_POLICY, topology
    # The per-GPU model filter is the allocator's (AllocationRequest.gpu_model), so every
    # policy sees the same eligible GPUs; only the refusal is worded for the queue here.
    try:
        return allocate(topology, free, spec.gpus, policy=policy, gpu_model=model), policy, topology
    except AllocationError as exc:
        if exc.reason != "model_mismatch" or model is None:
            raise
        matching = sum(
            1 for g in topology.gpus if g.index in free and model_matches(model, g.model or "")
        )
        raise AllocationError(
            f"only {matching} free {spec.gpu_model} GPUs on {slot.hostname}", "model_mismatch"
        ) from None


def cpu_only_order(candidates: list[Slot]) -> list[Slot]:
    """A CPU-only job's agents in best-fit order (fewest free GPUs first), the agents that
    have no GPU at all first among those with none free: the CPU a GPU agent keeps is what
    its GPUs' next jobs need. Stable, so equal agents keep the order they came in (a score
    applied after this one decides over it)."""
    return sorted(candidates, key=_cpu_only_key)


def _cpu_only_key(slot: Slot) -> tuple[int, bool]:
    """``(free GPUs, whether the agent has GPUs)``: cheap facts only (no topology decode)."""
    attrs = slot.attributes
    has_gpus = bool(
        slot.free or slot.gpus > 0 or slot.gpu_mem or ATTR_TOPOLOGY in attrs
        or ATTR_GPU_MODEL in attrs
    )  # fmt: skip
    return len(slot.free), has_gpus


def _check_vendor(spec: JobSpec, slot: Slot, topology: Topology | None) -> None:
    """Refuse an agent of another GPU vendor, or whose ROCm is too far from the image's.

    Raises:
        AllocationError: ``vendor_mismatch`` or ``driver``, worded for the queue.
    """
    vendor = agent_vendor(slot.attributes, topology)
    if spec.gpu_vendor and spec.gpu_vendor != vendor:
        raise AllocationError(
            f"{slot.hostname} has {vendor} GPUs, the job asks for {spec.gpu_vendor}",
            "vendor_mismatch",
        )
    if spec.cuda_version and vendor != "nvidia":
        raise AllocationError(
            f"image {spec.image} is built for NVIDIA CUDA {spec.cuda_version}; "
            f"{slot.hostname} has {vendor} GPUs",
            "vendor_mismatch",
        )
    rocm = agent_text(slot.attributes, ATTR_ROCM)
    if spec.rocm_version and rocm and not _rocm_ok(rocm, spec.rocm_version):
        raise AllocationError(
            f"ROCm {rocm} on {slot.hostname} is more than 2 releases from the image's "
            f"ROCm {spec.rocm_version}",
            "driver",
        )


def _rocm_ok(agent_rocm: str, image_rocm: str) -> bool:
    try:
        return rocm_supports(agent_rocm, image_rocm)
    except DlcError:  # a release the catalog does not list: let the executor decide
        return True


_bare_agents_logged: set[str] = set()


def _note_bare_agent(agent_id: str, hostname: str) -> None:
    """Log once per agent that it gets first-fit (operators expect topology placement)."""
    if agent_id in _bare_agents_logged:
        return
    _bare_agents_logged.add(agent_id)
    log.warning(
        "agent %s (%s) has no usable dlc_topo attribute: its GPUs are placed first-fit; "
        "run `dlc node-config` on it and restart its mesos-agent with the printed --attributes",
        agent_id,
        hostname,
    )


@functools.lru_cache(maxsize=64)
def _bare_topology(ids: frozenset[int]) -> Topology:
    return Topology(gpus=tuple(Gpu(i) for i in sorted(ids)), source="offer")
