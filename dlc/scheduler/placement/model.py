"""Placement's public types: what it reads, what it decides and how it is set.

:class:`OfferView` (an agent's offer as placement reads it), :class:`Launch` and
:class:`PlacementResult` (what :func:`~dlc.scheduler.placement.placer.place` decides),
:class:`PlacementConfig` (its knobs) and the callables it is given (:data:`TopologyOf`,
:data:`DriverCheck`, :data:`MixSource`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dlc.errors import ConfigError
from dlc.scheduler.allocator import POLICY_MODULES
from dlc.scheduler.allocator.base import unknown_policy
from dlc.scheduler.gangs.rendezvous import Ranges
from dlc.scheduler.gangs.topology import Locality
from dlc.scheduler.jobs.launch_spec import GpuShare
from dlc.scheduler.placement.shape_cache import DEFAULT_TRIES_PER_USER
from dlc.scheduler.placement.share_hold import ShareHoldSettings
from dlc.scheduler.placement.whole_score import WorkloadMix
from dlc.topology import gpu_shares
from dlc.topology.model import Topology

#: what :attr:`Launch.policy` says when an agent without ``dlc_topo`` got first-fit
NO_TOPOLOGY_POLICY = "first-fit (agent has no dlc_topo attribute)"


TopologyOf = Callable[[dict[str, str]], Topology | None]
#: the expected workload, or a function that computes it when first needed
MixSource = WorkloadMix | Callable[[], WorkloadMix | None] | None
DriverCheck = Callable[[str, str], bool]


@dataclass(frozen=True)
class OfferView:
    """The parts of an offer placement reads (engine-neutral: an engine's codec makes it
    from the engine's offer, :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_offer`; for
    Mesos :func:`dlc.mesos.offers.offer_view`).

    Attributes:
        offer_id, agent_id, hostname: identities from the offer.
        cpus, mem_mib, disk_mib, gpus: scalar resources offered.
        gpu_ids: items of the ``gpu_ids`` SET resource.
        attributes: agent attributes as text (scalars rendered without ``.0``).
        ports: the offered ``ports`` ranges (gang tasks take one each).
        address: the IP the agent advertises (its ``url``), else its hostname: what a
            gang's peers connect to.
    """

    offer_id: str
    agent_id: str
    hostname: str
    cpus: float = 0.0
    mem_mib: float = 0.0
    disk_mib: float = 0.0
    gpus: float = 0.0
    gpu_ids: frozenset[int] = frozenset()
    attributes: dict[str, str] = field(default_factory=dict)
    ports: Ranges = ()
    address: str = ""
    #: the ``gpu_mem`` (MiB) and ``gpu_core`` (thousandths) RANGES: one block per GPU
    #: (:mod:`dlc.topology.gpu_shares`); empty where the agent takes no shares
    gpu_mem: Ranges = ()
    gpu_core: Ranges = ()
    #: the agent accounts GPU shares (its totals hold ``gpu_mem`` blocks) even when this
    #: offer holds no ranges (shares took them all): then no GPU of it is whole
    shares_accounted: bool = False
    #: the agent's Mesos fault domain ``(region, zone)`` from the offer's ``domain``
    domain: tuple[str, str] = ("", "")

    @property
    def locality(self) -> Locality:
        """Where the agent stands: its fault domain, rack and switch (gang placement)."""
        return Locality(*self.domain).with_attributes(self.attributes)


@dataclass(frozen=True, kw_only=True)
class Launch:
    """One task to launch: which job node goes on which agent with which GPUs."""

    job_id: str
    task_id: str
    rank: int
    agent_id: str
    hostname: str
    offer_ids: tuple[str, ...]
    gpu_ids: tuple[int, ...]
    #: the policy that chose ``gpu_ids`` (:data:`NO_TOPOLOGY_POLICY` for a bare agent)
    policy: str = ""
    #: ports taken from the agent's ``ports`` offer for this task (gangs: the rendezvous)
    ports: tuple[int, ...] = ()
    #: ``address:port`` of every node of a gang, in rank order (empty for one node)
    peers: tuple[str, ...] = ()
    #: the chosen GPUs' UUIDs and ``/dev/nvidia<minor>`` numbers, in ``gpu_ids`` order, from
    #: the agent's decoded ``dlc_topo`` (empty when it lacks them: the executor reads the host)
    gpu_uuids: tuple[str, ...] = ()
    gpu_minors: tuple[int, ...] = ()
    #: the agent's NVIDIA driver version (topology, else the ``nvidia_driver`` attribute)
    driver_version: str | None = None
    #: the ``gpu_mem``/``gpu_core`` ranges the task consumes: a share's sub-ranges of one
    #: GPU, or the whole blocks of a whole-GPU task's GPUs (empty where none are offered)
    gpu_take: gpu_shares.GpuRanges = gpu_shares.GpuRanges()
    #: the share of one GPU (then ``gpu_ids`` is empty); ``None``: whole GPUs
    share: GpuShare | None = None


@dataclass
class PlacementResult:
    """What :func:`~dlc.scheduler.placement.placer.place` decided.

    Attributes:
        launches: tasks to launch, in order.
        declined: offer ids to decline (no task landed on their agent).
        waiting: job id -> why it was not placed this round (never empty).
    """

    launches: list[Launch] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)

    @property
    def placed_jobs(self) -> list[str]:
        """Ids of jobs launched this round, in order, without repeats."""
        return list(dict.fromkeys(launch.job_id for launch in self.launches))


@dataclass(frozen=True)
class PlacementConfig:
    """Knobs of :func:`~dlc.scheduler.placement.placer.place`.

    Attributes:
        policy: allocator policy name (one of :data:`POLICY_MODULES`). Agents
            without a topology get first-fit whatever this says.
        executor_cpus, executor_mem_mib: what each task's executor costs.
        share_hold: the opt-in share hold (``--share-hold-*``, docs/sharing.md); off by default.
        shape_tries_per_user: failed placement attempts one user's jobs may cost per offer
            round before the rest wait their turn (:mod:`~dlc.scheduler.placement.shape_cache`).

    Raises:
        ConfigError: unknown policy name (the message lists the known ones), or
            ``shape_tries_per_user`` below 1.
    """

    policy: str = "tree"
    executor_cpus: float = 0.1
    executor_mem_mib: float = 64.0
    share_hold: ShareHoldSettings = ShareHoldSettings()
    shape_tries_per_user: int = DEFAULT_TRIES_PER_USER

    def __post_init__(self) -> None:
        check_policy(self.policy)
        if self.shape_tries_per_user < 1:
            raise ConfigError(
                "shape_tries_per_user", f"must be at least 1, not {self.shape_tries_per_user}"
            )


def check_policy(name: str) -> str:
    """``name`` if it is a known allocator policy.

    Raises:
        ConfigError: unknown name, naming ``--policy`` and the known policies.
    """
    problem = unknown_policy(name)
    if problem:
        known = ", ".join(sorted(POLICY_MODULES))
        raise ConfigError("policy", f"{problem.split(';')[0]}; pass --policy one of {known}")
    return name
