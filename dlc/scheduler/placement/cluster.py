"""The cluster as one picture: per agent and per GPU, what exists and what is free.

:class:`~dlc.scheduler.placement.inventory.Inventory` keeps the facts (totals from the master,
offers, DLC's own tasks); :func:`agent_view` joins them with who holds which GPU into
:class:`AgentView` / :class:`GpuView`, the one model that placement's reasons, the
metrics, the dashboard and the benchmark read. Pure data, no I/O.

Partial GPUs: every GPU carries ``free_memory_mib`` and ``free_compute_milli`` (thousandths
of its compute). A whole GPU is free (all of both) or taken (none); GPU sharing fills the
values in between from the agents' ``gpu_mem``/``gpu_core`` resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dlc.scheduler.gangs.topology import Locality
from dlc.topology.gpu_shares import Ranges, amounts
from dlc.topology.model import PairLink, Topology

#: a GPU no task holds
GPU_FREE = "free"
#: a GPU one of DLC's live tasks holds
GPU_TAKEN = "taken"
#: a GPU kept out of offers until an ended task is confirmed gone
GPU_DRAINING = "draining"
#: the compute of one whole GPU, in thousandths
WHOLE_GPU_MILLI = 1000


@dataclass(frozen=True)
class Holder:
    """The task holding a GPU."""

    job_id: str
    task_id: str
    user: str


@dataclass(frozen=True)
class GpuView:
    """One GPU of an agent.

    Attributes:
        index: nvidia-smi / NVML index (what ``gpu_ids`` carries).
        uuid, minor, model, memory_mib: from the agent's decoded ``dlc_topo`` (``None``
            when it does not say).
        links: ``(other index, link)`` per other GPU, e.g. ``(1, "NV12")`` or ``(2, "PIX")``.
        state: :data:`GPU_FREE`, :data:`GPU_TAKEN` or :data:`GPU_DRAINING`.
        holder: the task holding it (taken only).
        free_memory_mib: memory not promised to any task (``None``: size unknown).
        free_compute_milli: compute not promised to any task, in thousandths.
    """

    index: int
    uuid: str | None = None
    minor: int | None = None
    model: str | None = None
    memory_mib: int | None = None
    links: tuple[tuple[int, str], ...] = ()
    state: str = GPU_FREE
    holder: Holder | None = None
    free_memory_mib: int | None = None
    free_compute_milli: int = WHOLE_GPU_MILLI


@dataclass(frozen=True)
class AgentView:
    """One agent: identities, totals, what its latest offers left free, and its GPUs.

    Attributes:
        agent_id, hostname, attributes: as the master or offers give them.
        pool: placeholder for agent pools (not used yet).
        role: the Mesos role (one of DLC's) the agent's GPUs are reserved for, if any.
        cpus, mem_mib, disk_mib: totals (lower bounds unless ``exact``).
        exact: totals come from the master.
        free_cpus, free_mem_mib, free_disk_mib: what its latest offers held (``None``:
            no offer seen).
        offered_at: when that offer came (clock seconds), or ``None``.
        topology: the decoded ``dlc_topo`` attribute, or ``None``.
        gpus: per GPU, by index.
        domain: the Mesos fault domain ``(region, zone)``; with the ``dlc_rack`` and
            ``dlc_switch`` attributes it makes :attr:`locality`.
    """

    agent_id: str
    hostname: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    pool: str | None = None
    role: str | None = None
    cpus: float = 0.0
    mem_mib: float = 0.0
    disk_mib: float = 0.0
    exact: bool = False
    free_cpus: float | None = None
    free_mem_mib: float | None = None
    free_disk_mib: float | None = None
    offered_at: float | None = None
    topology: Topology | None = None
    model: str = "unknown"
    gpus: tuple[GpuView, ...] = ()
    domain: tuple[str, str] = ("", "")

    @property
    def locality(self) -> Locality:
        """Where the agent stands: fault domain, rack and switch."""
        return Locality(*self.domain).with_attributes(self.attributes)

    @property
    def gpu_ids(self) -> frozenset[int]:
        """Every GPU index of the agent."""
        return frozenset(g.index for g in self.gpus)

    def gpu(self, index: int) -> GpuView | None:
        """One GPU by index."""
        return next((g for g in self.gpus if g.index == index), None)

    def in_state(self, state: str) -> list[GpuView]:
        """The GPUs in ``state``."""
        return [g for g in self.gpus if g.state == state]


def link_text(link: PairLink | None) -> str:
    """``NV12`` for NVLinks, else the PCIe level (``PIX``, ``SYS``), else ``?``."""
    if link is None:
        return "?"
    if link.nvlinks:
        return f"NV{link.nvlinks}"
    return link.pcie_level.name if link.pcie_level is not None else "?"


def gpu_views(
    gpu_ids: frozenset[int],
    topology: Topology | None,
    taken: Mapping[int, Holder],
    draining: frozenset[int],
    ranges: tuple[Ranges, Ranges] | None = None,
    memories: Mapping[int, int] | None = None,
) -> tuple[GpuView, ...]:
    """The GPUs ``gpu_ids`` (plus any the topology lists) with their facts and states.

    ``ranges``: the ``gpu_mem``/``gpu_core`` ranges the agent's latest offers held, where it
    advertises them: a GPU's free memory and compute are then read from them (shares).
    ``memories``: GPU index -> MiB from the agent's ``gpu_mem`` blocks (when the topology
    does not say).
    """
    known = {g.index: g for g in topology.gpus} if topology is not None else {}
    free_mem = amounts(ranges[0]) if ranges is not None else None
    free_core = amounts(ranges[1]) if ranges is not None else None
    out = []
    for index in sorted(set(gpu_ids) | set(known)):
        gpu = known.get(index)
        links: tuple[tuple[int, str], ...] = ()
        if topology is not None and gpu is not None:
            links = tuple(
                (other, link_text(topology.links.get((min(index, other), max(index, other)))))
                for other in sorted(known)
                if other != index
            )
        holder = taken.get(index)
        state = GPU_TAKEN if holder else GPU_DRAINING if index in draining else GPU_FREE
        memory = (gpu.memory_mib if gpu else None) or (memories or {}).get(index)
        whole_free = state == GPU_FREE
        out.append(
            GpuView(
                index=index,
                uuid=gpu.uuid if gpu else None,
                minor=gpu.minor if gpu else None,
                model=gpu.model if gpu else None,
                memory_mib=memory,
                links=links,
                state=state,
                holder=holder,
                free_memory_mib=(
                    free_mem.get(index, 0)
                    if free_mem is not None and whole_free
                    else (memory if whole_free else 0)
                    if memory is not None
                    else None
                ),
                free_compute_milli=(
                    free_core.get(index, 0)
                    if free_core is not None and whole_free
                    else WHOLE_GPU_MILLI
                    if whole_free
                    else 0
                ),
            )
        )
    return tuple(out)
