"""What the cluster HAS (per agent totals), as opposed to what is free right now.

Admission (``dlc submit``) and the queue ask the inventory whether a job could
ever run: on some agent with enough GPUs of the asked model, CPUs, memory,
disk and a driver new enough, on ``nodes`` distinct agents. Offers only show
what is free, so the totals come from the engine (Mesos: the master's ``GET /master/slaves``,
fetched by the framework adapter, decoded by the core's codec,
:meth:`~dlc.scheduler.core.ports.EngineCodec.decode_agents`, into :class:`AgentTotals` and given
to :meth:`Inventory.replace_agents`).
Offers and DLC's own running tasks are a fallback that gives lower bounds: an
agent known only that way is checked on what cannot shrink (GPU ids seen,
model, driver), never on CPU/memory amounts it may simply be using now.

It is also the cluster's one picture (:meth:`Inventory.view`): per agent what its latest
offers left free, per GPU its facts from ``dlc_topo`` and who holds it
(:mod:`~dlc.scheduler.placement.cluster`), read by the metrics, the dashboard and the benchmark.

Pure: no I/O, no clock, no engine JSON; the core owns one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from dlc.errors import JobSpecError
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.gangs.topology import LEVELS, Locality, choose_group, wanted
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.agent_facts import (
    agent_text,
    agent_vendor,
    default_driver_ok,
    default_topology_of,
)
from dlc.scheduler.placement.cluster import AgentView, Holder, gpu_views
from dlc.scheduler.placement.model import DriverCheck, OfferView, PlacementConfig, TopologyOf
from dlc.topology import gpu_shares
from dlc.topology.node_config import ATTR_DRIVER
from dlc.topology.node_config import ATTR_MODEL as ATTR_GPU_MODEL

#: at most so many admission answers kept per inventory version (then they start again)
ANSWERS_KEPT = 10_000
#: the order in which a spec's needs are checked: the first field no agent meets is named
_FIELDS = ("gpu_vendor", "gpu_model", "gpus", "gpu_memory", "cpus", "mem_mib", "disk_mib",
           "cuda_version")  # fmt: skip


@dataclass(frozen=True)
class AgentTotals:
    """One agent's totals.

    Attributes:
        agent_id, hostname: identities.
        gpu_ids: every GPU index the agent has (free or busy).
        cpus, mem_mib, disk_mib: total amounts (0 when unknown).
        attributes: agent attributes as text.
        exact: totals come from the engine (Mesos: the master); ``False``: lower bounds from
            offers and tasks.

    The engine-neutral record of an agent: an engine's codec makes them
    (:meth:`~dlc.scheduler.core.ports.EngineCodec.decode_agents`), the inventory also from offers.
    """

    agent_id: str
    hostname: str = ""
    gpu_ids: frozenset[int] = frozenset()
    cpus: float = 0.0
    mem_mib: float = 0.0
    disk_mib: float = 0.0
    attributes: dict[str, str] = field(default_factory=dict)
    exact: bool = False
    #: GPU index -> its memory in MiB, from the ``gpu_mem`` blocks (empty: the agent
    #: advertises none and takes no shares; from offers: the largest free block seen)
    gpu_memory: dict[int, int] = field(default_factory=dict)
    #: the role (one of DLC's, or its parent) the agent's GPUs are reserved for, if any
    role: str | None = None
    #: the agent's fault domain ``(region, zone)`` (``("", "")``: none)
    domain: tuple[str, str] = ("", "")

    @property
    def locality(self) -> Locality:
        """Where the agent stands: fault domain, rack and switch (gang placement)."""
        return Locality(*self.domain).with_attributes(self.attributes)

    @property
    def shareable(self) -> bool:
        """True when the agent advertises ``gpu_mem`` blocks (it takes GPU shares)."""
        return bool(self.gpu_memory)

    @property
    def gpu_model(self) -> str | None:
        """The ``gpu_model`` attribute without node-config's ``v`` prefix."""
        return agent_text(self.attributes, ATTR_GPU_MODEL)

    @property
    def driver(self) -> str | None:
        """The ``nvidia_driver`` attribute without its ``v`` prefix."""
        return agent_text(self.attributes, ATTR_DRIVER)


@dataclass(frozen=True)
class Overheads:
    """What each task adds to its spec's CPUs and memory (its executor)."""

    cpus: float = 0.0
    mem_mib: float = 0.0

    @classmethod
    def of(cls, config: PlacementConfig) -> Overheads:
        """What ``config`` charges each task for its executor (``executor_cpus``,
        ``executor_mem_mib``: the one source the placement, the ExecutorInfo and the per-user
        limits read)."""
        return cls(config.executor_cpus, config.executor_mem_mib)


#: the executor's overhead of the default :class:`PlacementConfig` (what the per-user limits
#: count where no core passes its own: pure callers and tests)
DEFAULT_OVERHEADS = Overheads(PlacementConfig.executor_cpus, PlacementConfig.executor_mem_mib)


class Inventory:
    """Per-agent totals and the "could this job ever run here?" questions.

    Args:
        overheads: executor CPUs/memory added to every task.
        topology_of, driver_ok: as in :func:`~dlc.scheduler.placement.placer.place`.

    What agents reserve for roles that are not DLC's is left out of their totals by the codec
    that decodes them (:meth:`~dlc.scheduler.core.ports.EngineCodec.decode_agents`).
    """

    def __init__(
        self,
        overheads: Overheads | None = None,
        topology_of: TopologyOf | None = None,
        driver_ok: DriverCheck | None = None,
    ):
        self.overheads = overheads or Overheads()
        self._topology_of = topology_of or default_topology_of
        self._driver_ok = driver_ok or default_driver_ok
        self._agents: dict[str, AgentTotals] = {}
        #: agent id -> (cpus, mem, disk, at) its latest offers held
        self._offered: dict[str, tuple[float, float, float, float | None]] = {}
        #: agent id -> the gpu_mem/gpu_core ranges its latest offers held (free per GPU)
        self._ranges: dict[str, tuple[gpu_shares.Ranges, gpu_shares.Ranges]] = {}
        #: bumped whenever an agent's totals change (callers cache answers per version)
        self.version = 0
        #: (version, the agents whose totals hold share blocks) (:meth:`shareable_ids`)
        self._shareable: tuple[int, frozenset[str]] = (-1, frozenset())
        #: admission answers (:meth:`impossible`) for this version, by the spec fields they read:
        #: submit asks once per job, and scanning 1,213 agents each time held the core's lock
        self._answers: dict[tuple[Hashable, ...], tuple[str, str] | None] = {}
        self._answers_version = -1
        #: agent id -> what of its last offer :meth:`note_offer` read: learning from offers
        #: only grows totals, so the same offer again changes nothing (an idle cluster
        #: re-offers every agent each round)
        self._noted: dict[str, tuple[object, ...]] = {}

    # -- feeding --------------------------------------------------------------

    def replace_agents(self, totals: Iterable[AgentTotals]) -> None:
        """Replace the inventory with the engine's agents and their exact totals (the
        codec's :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_agents`; a later record of
        one agent id replaces an earlier one).

        The engine's inactive agents are not among them: a job that only they could run is
        impossible now.
        """
        agents: dict[str, AgentTotals] = {}
        for agent in totals:
            agents[agent.agent_id] = agent
        if agents != self._agents:
            self._agents = agents
            self.version += 1
        self._noted.clear()  # the engine's totals replaced what offers taught
        self._offered = {a: o for a, o in self._offered.items() if a in agents}
        self._ranges = {a: r for a, r in self._ranges.items() if a in agents}

    def note_offers(self, views: Iterable[OfferView], at: float | None = None) -> None:
        """Learn from one batch of offers: totals (:meth:`note_offer`) and what each
        agent's offers hold free now (several offers of one agent add up)."""
        batch: dict[str, tuple[float, float, float, float | None]] = {}
        ranges: dict[str, tuple[gpu_shares.Ranges, gpu_shares.Ranges]] = {}
        noted, agents = self._noted, self._agents
        for view in views:  # 1,213 views a round: few steps each (issue 26)
            agent_id = view.agent_id
            seen = (view.gpu_ids, view.gpu_mem, view.cpus, view.mem_mib, view.disk_mib,
                    view.hostname, view.attributes, view.domain)  # fmt: skip
            if noted.get(agent_id) != seen or agent_id not in agents:
                self.note_offer(view)
                noted[agent_id] = seen
            had = batch.get(agent_id)
            if had is None:  # an agent's first offer of the batch (most agents' only one)
                ranges[agent_id] = (view.gpu_mem, view.gpu_core)  # normalised already
                # (0.0 + as the sums below: the same floats as adding to nothing)
                batch[agent_id] = (0.0 + view.cpus, 0.0 + view.mem_mib, 0.0 + view.disk_mib, at)
                continue
            had_mem, had_core = ranges[agent_id]
            ranges[agent_id] = (
                gpu_shares.normalise(had_mem + view.gpu_mem),
                gpu_shares.normalise(had_core + view.gpu_core),
            )
            cpus, mem, disk, _ = had
            batch[agent_id] = (cpus + view.cpus, mem + view.mem_mib, disk + view.disk_mib, at)
        self._offered.update(batch)
        self._ranges.update(ranges)

    def note_offer(self, view: OfferView) -> None:
        """Learn from an offer (lower bounds; exact agents only gain GPU ids)."""
        known = self._agents.get(view.agent_id)
        if known is None:
            known = AgentTotals(view.agent_id, view.hostname, attributes=dict(view.attributes))
        seen = gpu_shares.amounts(view.gpu_mem)
        if known.exact and _teaches_exact_nothing(known, view, seen):
            return  # the totals below would equal these (two dataclass copies a view saved)
        grown = replace(
            known,
            gpu_ids=known.gpu_ids | view.gpu_ids,
            attributes=known.attributes or dict(view.attributes),
            domain=known.domain if any(known.domain) else view.domain,
            gpu_memory={
                i: max(known.gpu_memory.get(i, 0), seen.get(i, 0))
                for i in set(known.gpu_memory) | set(seen)
            },
        )
        if not known.exact:
            grown = replace(
                grown,
                cpus=max(known.cpus, view.cpus),
                mem_mib=max(known.mem_mib, view.mem_mib),
                disk_mib=max(known.disk_mib, view.disk_mib),
            )
        self._set(grown)

    def note_gpus(self, agent_id: str, gpu_ids: Iterable[int], hostname: str = "") -> None:
        """Learn GPU ids an agent has (e.g. held by one of DLC's running tasks)."""
        known = self._agents.get(agent_id) or AgentTotals(agent_id, hostname)
        self._set(replace(known, gpu_ids=known.gpu_ids | frozenset(gpu_ids)))

    def _set(self, totals: AgentTotals) -> None:
        if self._agents.get(totals.agent_id) != totals:
            self._agents[totals.agent_id] = totals
            self.version += 1

    def copy(self) -> Inventory:
        """A copy that feeding this inventory leaves alone (admission reads it without the
        core's lock: :mod:`~dlc.scheduler.tenancy.admission_facts`)."""
        other = Inventory(self.overheads, self._topology_of, self._driver_ok)
        other._agents = dict(self._agents)
        other._offered = dict(self._offered)
        other._ranges = dict(self._ranges)
        other.version = other._answers_version = self.version
        return other

    # -- reading --------------------------------------------------------------

    def agents(self) -> list[AgentTotals]:
        """Known agents, by id."""
        return [self._agents[a] for a in sorted(self._agents)]

    def shareable_ids(self) -> frozenset[str]:
        """The agents whose totals hold ``gpu_mem`` blocks (they take GPU shares), kept per
        :attr:`version`: each round marks 1,213 offer views by it (issue 26)."""
        version, ids = self._shareable
        if version != self.version:
            ids = frozenset(a for a, totals in self._agents.items() if totals.shareable)
            self._shareable = (self.version, ids)
        return ids

    def get(self, agent_id: str) -> AgentTotals | None:
        """One agent's totals, if known."""
        return self._agents.get(agent_id)

    def __len__(self) -> int:
        return len(self._agents)

    def view(
        self,
        taken: Mapping[str, Mapping[int, Holder]] | None = None,
        draining: Mapping[str, frozenset[int]] | None = None,
    ) -> list[AgentView]:
        """Every known agent with its GPUs' facts and states, by hostname.

        Args:
            taken: agent id -> GPU index -> the task holding it.
            draining: agent id -> GPUs kept out of offers until a task is confirmed gone.
        """
        taken, draining = taken or {}, draining or {}
        out = []
        for totals in self._agents.values():
            agent_id = totals.agent_id
            topology = self._topology_of(totals.attributes)
            offered = self._offered.get(agent_id)
            model = totals.gpu_model
            out.append(
                AgentView(
                    agent_id=agent_id,
                    hostname=totals.hostname,
                    attributes=dict(totals.attributes),
                    role=totals.role,
                    domain=totals.domain,
                    cpus=totals.cpus,
                    mem_mib=totals.mem_mib,
                    disk_mib=totals.disk_mib,
                    exact=totals.exact,
                    free_cpus=offered[0] if offered else None,
                    free_mem_mib=offered[1] if offered else None,
                    free_disk_mib=offered[2] if offered else None,
                    offered_at=offered[3] if offered else None,
                    topology=topology,
                    model=model or "unknown",
                    gpus=gpu_views(
                        totals.gpu_ids,
                        topology,
                        taken.get(agent_id, {}),
                        draining.get(agent_id, frozenset()),
                        self._ranges.get(agent_id) if totals.shareable else None,
                        totals.gpu_memory,
                    ),
                )
            )
        return sorted(out, key=lambda a: (a.hostname, a.agent_id))

    def max_gpus(self) -> int:
        """Most GPUs any known agent has (0 when none is known)."""
        return max((len(a.gpu_ids) for a in self._agents.values()), default=0)

    def matching_gpus(self, agent: AgentTotals, gpu_model: str | None) -> int:
        """How many of the agent's GPUs are of ``gpu_model`` (all of them when ``None``)."""
        if not gpu_model:
            return len(agent.gpu_ids)
        topology = self._topology_of(agent.attributes)
        if topology is not None and any(g.model for g in topology.gpus):
            return sum(1 for g in topology.gpus if model_matches(gpu_model, g.model or ""))
        return len(agent.gpu_ids) if model_matches(gpu_model, agent.gpu_model or "") else 0

    def shortfall(self, agent: AgentTotals, spec: JobSpec) -> str | None:
        """The first field (of :data:`_FIELDS`) this agent can never satisfy, or ``None``."""
        for name in _FIELDS:
            if not self._meets(agent, spec, name):
                return name
        return None

    def _meets(self, agent: AgentTotals, spec: JobSpec, name: str) -> bool:
        eps = 1e-9
        if name == "gpu_vendor":
            return not _wants_vendor(spec) or self._vendor(agent) == spec.gpu_vendor
        if name == "gpu_model":
            return not spec.gpu_model or self.matching_gpus(agent, spec.gpu_model) > 0
        if name == "gpus":
            if spec.is_share and agent.exact and not agent.shareable:
                return False
            return self.matching_gpus(agent, spec.gpu_model) >= spec.gpus
        if name == "gpu_memory":
            if not spec.gpu_memory or not agent.gpu_memory:
                return True
            return max(agent.gpu_memory.values()) >= spec.gpu_memory
        if name == "cuda_version":  # a CPU-only job uses no GPU, so no driver either
            driver = agent.driver
            if not (spec.cuda_version and driver) or spec.is_cpu_only:
                return True
            return self._driver_ok(driver, spec.cuda_version)
        if not agent.exact:
            return True  # offered amounts are lower bounds: never refuse on them
        if name == "cpus":
            return agent.cpus + eps >= spec.cpus + self.overheads.cpus
        if name == "mem_mib":
            return agent.mem_mib + eps >= spec.mem_mib + self.overheads.mem_mib
        return agent.disk_mib + eps >= spec.disk_mib

    def able_agents(self, spec: JobSpec) -> list[AgentTotals]:
        """Agents that could run one node of ``spec`` when idle."""
        return [a for a in self.agents() if self.shortfall(a, spec) is None]

    def impossible(self, spec: JobSpec) -> JobSpecError | None:
        """Why no set of known agents could ever run ``spec`` (``None``: it could, or no
        agent is known yet, which is a fresh start, not a refusal).

        Answers are kept until the agents change (:attr:`version`); each call returns a new
        error object, since an exception raised twice would grow its traceback."""
        if self._answers_version != self.version:
            self._answers.clear()
            self._answers_version = self.version
        key = (spec.gpus, spec.nodes, spec.gpu_model, spec.cpus, spec.mem_mib, spec.disk_mib,
               spec.cuda_version, spec.is_share, spec.gpu_memory, spec.gang_topology,
               spec.gpu_vendor)  # fmt: skip
        answers = self._answers
        if key in answers:
            answer = answers[key]
        else:
            error = self._impossible(spec)
            # FieldError's text is "<field>: <message>"; keep the two parts to rebuild it
            answer = None if error is None else (error.field, str(error)[len(error.field) + 2 :])
            if len(answers) >= ANSWERS_KEPT:  # refused specs are not capped per user: a
                answers.clear()  # loop of distinct ones must not grow this until agents change
            answers[key] = answer  # read from the local: submits share a copy, without a lock
        return None if answer is None else JobSpecError(*answer)

    def _impossible(self, spec: JobSpec) -> JobSpecError | None:
        if not self._agents:
            return None
        if spec.nodes == 1 and any(self.shortfall(a, spec) is None for a in self._agents.values()):
            return None  # one able agent settles a single node (stops at the first found)
        able = self.able_agents(spec)
        if len(able) >= spec.nodes:
            return _no_group(spec, able)
        if able:
            return JobSpecError(
                "nodes",
                f"asked for {spec.nodes} nodes but only {len(able)} agent(s) can run this job; "
                f"use --nodes {len(able)} or fewer",
            )
        for name in _FIELDS:
            if not any(self._meets(a, spec, name) for a in self._agents.values()):
                return JobSpecError(name, self._explain(name, spec))
        return JobSpecError(
            "spec",
            "no single agent has all of this job's GPUs, model, CPUs, memory and disk at once "
            f"({self._describe()}); ask for less or ask an admin",
        )

    def check(self, spec: JobSpec) -> None:
        """Admission: refuse what no known agent could ever run.

        Raises:
            JobSpecError: one line naming the field and the fix.
        """
        error = self.impossible(spec)
        if error is not None:
            raise error

    def _vendor(self, agent: AgentTotals) -> str:
        return agent_vendor(agent.attributes, self._topology_of(agent.attributes))

    def _explain(self, name: str, spec: JobSpec) -> str:
        agents = list(self._agents.values())
        exact = [a for a in agents if a.exact]
        if name == "gpu_vendor":
            vendors = ", ".join(sorted({self._vendor(a) for a in agents}))
            return (
                f"no agent has {spec.gpu_vendor} GPUs (the agents have: {vendors}); drop "
                f"--gpu-vendor, pick an image for those GPUs, or ask an admin"
            )
        if name == "gpu_model":
            models = sorted({a.gpu_model for a in agents if a.gpu_model} | self._topology_models())
            known = ", ".join(models) or "none advertised"
            return (
                f"no agent has a GPU matching {spec.gpu_model!r} (known: {known}); "
                "drop --gpu-model or ask an admin"
            )
        if name == "gpus" and spec.is_share:
            return (
                "no agent takes GPU shares (their `dlc node-config` has no gpu_mem/gpu_core "
                "ranges); ask for whole GPUs with --gpus N or ask an admin"
            )
        if name == "gpu_memory":
            most: float = max(m for a in agents for m in a.gpu_memory.values())
            return (
                f"asked for {spec.gpu_memory} MiB of one GPU but no GPU has more than {most} "
                f"MiB; use --gpu-memory {most}M or less"
            )
        if name == "gpus":
            most = max(self.matching_gpus(a, spec.gpu_model) for a in agents)
            kind = f" {spec.gpu_model!r}" if spec.gpu_model else ""
            return (
                f"asked for {spec.gpus} but no agent has more than {most}{kind}; use --gpus {most}"
            )
        if name == "cuda_version":
            drivers = ", ".join(sorted({a.driver for a in agents if a.driver}))
            return (
                f"no agent's NVIDIA driver supports CUDA {spec.cuda_version} (drivers: {drivers}); "
                "pick an older framework version or ask an admin"
            )
        over = self.overheads
        if name == "cpus":
            most = max(a.cpus for a in exact) - over.cpus
            return (
                f"asked for {spec.cpus:g} but no agent has more than {most:g} for a job "
                f"({over.cpus:g} go to the executor); use --cpus {most:g} or less"
            )
        if name == "mem_mib":
            most = int(max(a.mem_mib for a in exact) - over.mem_mib)
            return (
                f"asked for {spec.mem_mib} MiB but no agent has more than {most} MiB for a job "
                f"({over.mem_mib:g} MiB go to the executor); use --mem {most} or less"
            )
        most = int(max(a.disk_mib for a in exact))
        return f"asked for {spec.disk_mib} MiB of disk but no agent has more than {most} MiB"

    def _topology_models(self) -> set[str]:
        models: set[str] = set()
        for agent in self._agents.values():
            topology = self._topology_of(agent.attributes)
            if topology is not None:
                models.update(g.model for g in topology.gpus if g.model)
        return models

    def _describe(self) -> str:
        return "; ".join(
            f"{a.hostname or a.agent_id}: {len(a.gpu_ids)} GPUs {a.gpu_model or ''}".strip()
            + (f", {a.cpus:g} cpus, {a.mem_mib:g} MiB" if a.exact else "")
            for a in self.agents()[:5]
        )


def _no_group(spec: JobSpec, able: list[AgentTotals]) -> JobSpecError | None:
    """Why a gang that *requires* one switch, rack or zone can never have one: no such
    group holds ``spec.nodes`` of the agents able to run it (``None``: one does, or the
    gang only prefers one)."""
    if spec.nodes < 2 or not spec.gang_topology:
        return None
    want = wanted(spec.gang_topology)
    if not want.required or choose_group(able, spec.nodes, lambda a: a.locality, want):
        return None
    sizes: dict[tuple[str, ...], int] = {}
    for agent in able:
        key = agent.locality.key(want.level)
        if key is not None:
            sizes[key] = sizes.get(key, 0) + 1
    most = max(sizes.values(), default=0)
    wider = LEVELS[LEVELS.index(want.level) + 1] if want.level != LEVELS[-1] else None
    fixes = [f"--gang-topology {wider}:required"] if wider else []
    fixes.append(f"--gang-topology {want.level}:preferred")
    if most >= 2:  # a smaller gang fits
        fixes.append(f"--nodes {most}")
    return JobSpecError(
        "gang_topology",
        f"no {want.level} has {spec.nodes} agents that can run this job (the largest has "
        f"{most}); pass {' or '.join(fixes)}",
    )


def _wants_vendor(spec: JobSpec) -> bool:
    """Whether ``spec`` needs GPUs of its vendor (a job without GPUs runs anywhere)."""
    return bool(spec.gpu_vendor) and (spec.gpus > 0 or spec.is_share)


def _teaches_exact_nothing(known: AgentTotals, view: OfferView, seen: Mapping[int, int]) -> bool:
    """Whether :meth:`Inventory.note_offer` would leave the exact agent ``known`` as it is:
    no new GPU id, attributes and domain kept, no GPU's memory above what is known (most
    offers of agents the engine described, issue 26)."""
    memory = known.gpu_memory
    return (
        view.gpu_ids <= known.gpu_ids
        and bool(known.attributes)
        and (any(known.domain) or view.domain == known.domain)
        and all(i in memory and mib <= memory[i] for i, mib in seen.items())
        and all(mib >= 0 for mib in memory.values())  # (max(mib, 0) keeps it)
    )
