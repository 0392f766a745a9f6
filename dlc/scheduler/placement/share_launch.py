"""A GPU share placed as a launch, and the waiting reasons around holds and reservations.

:func:`place_share` places one share (:mod:`~dlc.scheduler.placement.share_placement` chooses
the GPU) and appends its :class:`~dlc.scheduler.placement.model.Launch`; :func:`share_fields`
gives a launch's share fields; :func:`held_fit` and :func:`held_tail` word why a job waits
behind a reservation or a share hold; :func:`carries` says whether its failures are carried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

from dlc.scheduler.gangs.rendezvous import ports_needed
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.jobs.launch_spec import GpuShare
from dlc.scheduler.placement.agent_facts import agent_text, gpu_facts
from dlc.scheduler.placement.frag_state import FragCache
from dlc.scheduler.placement.model import Launch, PlacementResult, TopologyOf
from dlc.scheduler.placement.share_hold import HELD_PREFIX, ShareHold
from dlc.scheduler.placement.share_placement import ShareTenants, choose_share
from dlc.scheduler.placement.slots import Slot, share_backend
from dlc.scheduler.placement.whole_score import WorkloadMix
from dlc.topology.node_config import ATTR_DRIVER
from dlc.topology.node_config import ATTR_MODEL as ATTR_GPU_MODEL

#: why a share fails on the agent it chose: another agent might have been chosen instead
SHARE_PORTS = "no offer with a GPU share free has a free port in its ports resource"


def carries(job: Job, share_hold: ShareHold | None) -> bool:
    """Whether ``job``'s failures may be carried
    (:class:`~dlc.scheduler.placement.shape_cache.CarriedFailures` says which)."""
    return job.spec.nodes == 1 and not (job.spec.is_share and share_hold is not None)


def held_fit(
    job: Job, slots: list[Slot], usable: list[Slot], reserved: Mapping[str, str]
) -> str | None:
    """``waiting behind job j1 which reserves agent a1`` when a held agent has the GPUs
    the job wants free (a CPU-only job: its CPUs and memory), so the reservation, not the
    cluster, is what it waits for."""
    if len(usable) == len(slots):
        return None
    inside = {id(s) for s in usable}  # a list's `in` made this O(agents^2) per waiting job
    spec = job.spec
    held = [
        s for s in slots
        if id(s) not in inside and len(s.free) >= spec.gpus
        and (not spec.is_cpu_only or (s.cpus >= spec.cpus and s.mem >= spec.mem_mib))
    ]  # fmt: skip
    if not held:
        return None
    holder = reserved[held[0].agent_id]
    agents = ", ".join(sorted({s.hostname or s.agent_id for s in held}))
    return f"waiting behind job {holder} which reserves agent {agents}"


def held_tail(reason: str, job: Job, share_hold: ShareHold | None) -> str:
    """A hold reason with ``job``'s own remaining wait (the rest is the same for its shape)."""
    if share_hold is None or not reason.startswith(HELD_PREFIX):
        return reason
    return reason + share_hold.tail(job)


class ShareFields(TypedDict, total=False):
    """The share fields of :class:`~dlc.scheduler.jobs.job.TaskPlacement`."""

    share_gpu: int | None
    share_memory_mib: int
    share_core_milli: int


def share_fields(launch: Launch) -> ShareFields:
    """The :class:`~dlc.scheduler.jobs.job.TaskPlacement` share fields of a launch (none: {})."""
    if launch.share is None:
        return {}
    share = launch.share
    return {"share_gpu": share.gpu_index, "share_memory_mib": share.memory_mib,
            "share_core_milli": share.core_milli}  # fmt: skip


def mps_agents(slots: Iterable[Slot]) -> frozenset[str]:
    """The agents among ``slots`` whose share backend is MPS."""
    return frozenset(s.agent_id for s in slots if share_backend(s) == "mps")


def place_share(
    job: Job,
    slots: list[Slot],
    cpus: float,
    mem: float,
    topology_of: TopologyOf,
    result: PlacementResult,
    tenants: ShareTenants,
    share_hold: ShareHold | None,
    mps_agents: frozenset[str],
    mix: WorkloadMix | None = None,
    frag: FragCache | None = None,
) -> str | None:
    """Place a share of one GPU (:mod:`~dlc.scheduler.placement.share_placement`); why not,
    or None.
    ``mix``: the round's expected workload the share is scored against (``None``: more
    shares like it and whole GPUs,
    :func:`~dlc.scheduler.placement.share_placement.choose_share`)."""
    tenant = tenants.tenant(job)
    open_to = None  # nobody exclusive, no other tenant under MPS: every GPU is open
    mps = mps_agents if tenants.by_gpu else frozenset()
    if tenants.restricts(tenant, bool(mps)):
        open_to = lambda agent_id, gpu: tenants.open_to(tenant, agent_id, gpu, agent_id in mps)  # noqa: E731
    hold = None
    if share_hold is not None:

        def hold(milli: int) -> tuple[Callable[[str, int], bool], str] | None:
            barred = share_hold.barred(job, milli)
            return None if barred is None else (barred, share_hold.reason(milli))

    choice = choose_share(
        job.spec, slots, cpus, mem, topology_of,
        lambda slot: agent_text(slot.attributes, ATTR_GPU_MODEL) or "",
        open_to, hold, slots[0].share_room if slots else None, mix, frag,
    )  # fmt: skip
    if isinstance(choice, str):
        return choice
    slot = choice.slot
    ports = slot.take_ports(ports_needed(1, job.spec.interactive))
    if ports is None:
        return SHARE_PORTS
    slot.take(cpus, mem, job.spec.disk_mib, (), +1)
    slot.take_ranges(choice.take)
    tenants.add(slot.agent_id, choice.gpu_index, tenant)
    uuids, minors = gpu_facts(choice.topology, (choice.gpu_index,))
    backend = share_backend(slot)
    share = GpuShare(
        gpu_index=choice.gpu_index,
        gpu_uuid=uuids[0] if uuids else None,
        memory_mib=choice.memory_mib,
        core_milli=choice.core_milli,
        backend=backend,
        gpu_minor=minors[0] if minors else None,
    )
    driver = (choice.topology.driver_version if choice.topology else None) or agent_text(
        slot.attributes, ATTR_DRIVER
    )
    result.launches.append(
        Launch(
            job_id=job.job_id,
            task_id=f"{job.task_prefix()}0",
            rank=0,
            agent_id=slot.agent_id,
            hostname=slot.hostname,
            offer_ids=slot.offer_ids,
            gpu_ids=(),
            policy="share",
            ports=ports,
            driver_version=driver,
            gpu_take=choice.take,
            share=share,
        )  # fmt: skip
    )
    return None
