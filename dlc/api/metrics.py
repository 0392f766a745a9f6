"""Prometheus metrics of one scheduler, and the agents it has seen.

Each :class:`SchedulerMetrics` owns its own ``CollectorRegistry`` (never the
process-wide default), so tests and several schedulers in one process do not
clash. Event metrics (offers, placement latency, queue waits, P2P quality) are
counted as :class:`~dlc.scheduler.core.facade.SchedulerCore` reports them; state
metrics are read at scrape time: jobs by state from the job store, GPUs per agent
from the core's cluster inventory (:meth:`~dlc.scheduler.core.facade.SchedulerCore.cluster`,
attached through :meth:`SchedulerMetrics.watch_cluster`), so they never drift.

Exposed at ``/metrics`` without authentication (Prometheus scrapes it), so by default no
metric carries a user name, job id or command; ``tenant_labels=True`` (``dlc scheduler
--metrics-tenant-labels``, for a scraper behind the same trust boundary) adds the per-user and
per-job usage families.

Metric names (Prometheus conventions: base units, ``_total`` only on counters):

* ``dlc_agent_gpus{agent,hostname,model}`` GPUs an agent has;
* ``dlc_agent_gpus_allocated{agent,hostname,model}`` of those held by DLC tasks;
* ``dlc_gpu_memory_allocated_bytes{agent,hostname,gpu}``, ``dlc_gpu_compute_allocated_ratio``
  (0..1) and ``dlc_gpu_shares`` (count): what DLC tasks hold of each GPU, whole or shared;
* ``dlc_jobs{state}`` jobs in each state;
* ``dlc_queue_wait_seconds`` histogram: submit (or re-queue) to launch;
* ``dlc_placement_latency_seconds`` histogram: one placement round on a batch of offers;
* ``dlc_offers_received_total``, ``dlc_offers_declined_total``;
* ``dlc_multi_gpu_placements_total{p2p}``: multi-GPU tasks placed, ``p2p="true"`` when
  every pair of the chosen GPUs is P2P-capable;
* ``dlc_placement_p2p_ratio``: the share of those on P2P-capable sets (absent until one);
* ``dlc_build_info{version}``: always 1.

Allocated versus used (the executors' NVML readings, :mod:`dlc.scheduler.tasks.usage`), per GPU:

* ``dlc_gpu_allocated{agent,hostname,gpu}``: 1 while a DLC task holds the GPU (whole or a share);
* ``dlc_gpu_utilization_pct``, ``dlc_gpu_memory_used_bytes`` (same labels): the latest reading,
  only for GPUs of running tasks that reported (NVML's mean over the executor's window, device
  memory in use);
* ``dlc_gpu_idle`` (same labels): 1 for a GPU allocated but idle (under 5 % in every sample of
  the window).

Aggregates ``dlc_{scope}_gpus_allocated``, ``dlc_{scope}_gpus_idle``,
``dlc_{scope}_gpu_utilization_pct`` and ``dlc_{scope}_gpu_memory_used_bytes`` with
``scope`` = ``group`` (label ``group``; always) and, with ``tenant_labels``, ``user`` (label
``user``) and ``job`` (label ``job``). Cardinality is bounded by what runs *now*: the
families are rebuilt at each scrape from running jobs, so there is at most one ``job`` series
per running job (no more than the cluster's GPUs plus CPU jobs), one ``user`` series per user
with a running job, one ``group`` series per configured group; a finished job's series ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from dlc import __version__
from dlc.scheduler.core.ports import JobReader
from dlc.scheduler.jobs.job import Job, JobState, job_state_from_task_state
from dlc.scheduler.placement.agent_facts import default_topology_of
from dlc.scheduler.placement.cluster import GPU_TAKEN, AgentView
from dlc.scheduler.placement.model import Launch, OfferView
from dlc.scheduler.placement.share_holders import share_holders
from dlc.scheduler.tasks.usage import GpuUsage, UsageRollup, is_idle
from dlc.topology.model import Topology

#: Prometheus text exposition content type (format 0.0.4)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_WAIT_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


#: the agents the metrics count are the core's inventory's (one model of the cluster)
AgentInfo = AgentView


def p2p_capable_set(topology: Topology | None, gpu_ids: Iterable[int]) -> bool | None:
    """Whether every pair of ``gpu_ids`` can do P2P (``None``: topology unknown)."""
    if topology is None:
        return None
    ids = set(gpu_ids)
    try:
        return all(link.p2p_capable for link in topology.pairs(ids))
    except KeyError:  # the offer named a GPU the topology does not have
        return None


class SchedulerMetrics:
    """Metrics registry and agent registry of one scheduler.

    Jobs and their history are read at scrape time from the core it is given to
    (:meth:`watch_jobs`), never from the store behind it.

    Args:
        clock: wall-clock time source (tests pass a fake).
        tenant_labels: add the per-user and per-job usage families.
    """

    def __init__(self, clock: Callable[[], float] = time.time, tenant_labels: bool = False):
        self._jobs: JobReader | None = None
        self._clock = clock
        self.tenant_labels = tenant_labels
        self._usage: UsageSource | None = None
        self._lock = threading.Lock()
        self._cluster: Callable[[], list[AgentView]] | None = None
        self._recent_waits: list[float] = []
        self._p2p = {True: 0, False: 0}  # multi-GPU tasks by P2P capability (for the ratio)
        self.registry = CollectorRegistry(auto_describe=True)
        self.offers_received = Counter(
            "dlc_offers_received", "Resource offers received from Mesos.", registry=self.registry
        )
        self.offers_declined = Counter(
            "dlc_offers_declined", "Resource offers declined.", registry=self.registry
        )
        self.queue_wait = Histogram(
            "dlc_queue_wait_seconds",
            "Time a job waited in the queue before its launch.",
            buckets=_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.placement_latency = Histogram(
            "dlc_placement_latency_seconds",
            "Time of one placement round on a batch of offers.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.multi_gpu = Counter(
            "dlc_multi_gpu_placements",
            "Multi-GPU tasks placed, by whether all chosen GPU pairs are P2P-capable.",
            ["p2p"],
            registry=self.registry,
        )
        self.status_updates_ignored = Counter(
            "dlc_status_updates_ignored",
            "Task status updates ignored: not from the task's agent and executor (forged?).",
            registry=self.registry,
        )
        self.consolidation_moves = Counter(
            "dlc_consolidation_moves",
            "Jobs moved by consolidation so that a job fragmentation denied got its GPUs.",
            registry=self.registry,
        )
        self.consolidation_lost = Counter(
            "dlc_consolidation_lost_gpu_hours",
            "GPU-hours the moved jobs lost (an upper bound: work since each one's start).",
            registry=self.registry,
        )
        self.registry.register(_StateCollector(self))

    # -- events (called by SchedulerCore under its lock) -----------------------

    def status_update_ignored(self) -> None:
        """Count one update the core refused for its origin (dlc/scheduler/core/status.py)."""
        self.status_updates_ignored.inc()

    def consolidation_moved(self, moves: int, lost_gpu_h: float) -> None:
        """Count one consolidation (dlc/scheduler/core/consolidation.py)."""
        self.consolidation_moves.inc(moves)
        self.consolidation_lost.inc(lost_gpu_h)

    def record_round(
        self,
        views: Sequence[OfferView],
        received: int,
        declined: int,
        latency_s: float,
        placed: Sequence[tuple[Job, Sequence[Launch]]],
    ) -> None:
        """Count one offer batch and what was placed on it.

        Args:
            views: the well-formed offers (their topologies judge P2P of the placements).
            received, declined: offer counts of the batch.
            latency_s: seconds the placement round took.
            placed: each launched job (as it was while queued) with its launches.
        """
        now = self._clock()
        self.offers_received.inc(received)
        self.offers_declined.inc(declined)
        self.placement_latency.observe(latency_s)
        attributes = {view.agent_id: view.attributes for view in views}
        for job, launches in placed:
            wait = max(0.0, now - self.queued_since(job))
            self.queue_wait.observe(wait)
            with self._lock:
                self._recent_waits.append(wait)
            for launch in launches:
                if len(launch.gpu_ids) < 2:
                    continue
                topology = _safe_topology(attributes.get(launch.agent_id, {}))
                ok = bool(p2p_capable_set(topology, launch.gpu_ids))
                self.multi_gpu.labels(p2p="true" if ok else "false").inc()
                with self._lock:
                    self._p2p[ok] += 1

    def queued_since(self, job: Job) -> float:
        """When ``job`` last entered the queue (submit, or its last re-queue)."""
        if job.attempt == 0 or self._jobs is None:
            return job.submitted_at
        history = self._jobs.job_history(job.job_id)
        queued = [at for at, state, _ in history if state == "queued"]
        return queued[-1] if queued else job.submitted_at

    def watch_jobs(self, source: JobReader) -> None:
        """Read jobs and history from ``source`` (the core); the core calls this when it is
        given these metrics. Before that, the job families are empty."""
        self._jobs = source

    def jobs(self) -> list[Job]:
        """Every job, from the core watched (none before :meth:`watch_jobs`)."""
        return [] if self._jobs is None else self._jobs.all_jobs()

    def watch_cluster(self, source: Callable[[], list[AgentView]]) -> None:
        """Read the agents from ``source`` (the core's :meth:`cluster`), the one model of
        the cluster; the core calls this when it is given these metrics."""
        self._cluster = source

    def watch_usage(self, source: UsageSource) -> None:
        """Read GPU usage from ``source`` (the core: ``gpu_usage()``, ``usage_rollups(by)``)."""
        self._usage = source

    # -- reads -----------------------------------------------------------------

    def agent(self, agent_id: str) -> AgentView | None:
        """The agent with this id, if the cluster inventory knows it."""
        return next((a for a in self.agents() if a.agent_id == agent_id), None)

    def agents(self) -> list[AgentView]:
        """Known agents, by hostname (none before a core is watched)."""
        return self._cluster() if self._cluster is not None else []

    def take_recent_waits(self) -> list[float]:
        """Queue waits of jobs launched since the last call (for the dashboard's sampler)."""
        with self._lock:
            waits, self._recent_waits = self._recent_waits, []
        return waits

    def p2p_ratio(self) -> float | None:
        """Share of multi-GPU tasks placed on P2P-capable sets (``None`` before the first)."""
        with self._lock:
            good, bad = self._p2p[True], self._p2p[False]
        return good / (good + bad) if good + bad else None

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)


def allocated_gpus(jobs: Iterable[Job]) -> dict[str, dict[int, Job]]:
    """agent id -> {GPU index -> job} for tasks of active (staging/running) jobs."""
    held: dict[str, dict[int, Job]] = {}
    for job in jobs:
        if not job.state.active:
            continue
        for task in job.tasks:
            if task.state and job_state_from_task_state(task.state).terminal:
                continue
            for gpu in task.gpu_ids:
                held.setdefault(task.agent_id, {})[gpu] = job
    return held


def allocated_shares(jobs: Iterable[Job]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """(agent id, GPU index) -> [(MiB, thousandths), ...] of the shares active jobs hold."""
    return {
        key: [(task.share_memory_mib, task.share_core_milli) for _, task in tasks]
        for key, tasks in share_holders(jobs).items()
    }


def gpu_allocation_families(agents, jobs: Sequence[Job]) -> list[GaugeMetricFamily]:
    """Memory, compute and shares DLC holds per GPU (whole GPUs count in full)."""
    labels = ["agent", "hostname", "gpu"]
    memory = GaugeMetricFamily(
        "dlc_gpu_memory_allocated_bytes", "GPU memory held by DLC tasks.", labels=labels
    )
    compute = GaugeMetricFamily(
        "dlc_gpu_compute_allocated_ratio", "Share of a GPU's compute held.", labels=labels
    )
    count = GaugeMetricFamily("dlc_gpu_shares", "Shares running on a GPU.", labels=labels)
    shares = allocated_shares(jobs)
    for agent in agents:
        for gpu in agent.gpus:
            values = [agent.agent_id, agent.hostname, str(gpu.index)]
            held = shares.get((agent.agent_id, gpu.index), [])
            if gpu.state == GPU_TAKEN:
                mib, milli = gpu.memory_mib or 0, 1000
            else:
                mib, milli = sum(m for m, _ in held), sum(c for _, c in held)
            memory.add_metric(values, mib * 1024 * 1024)
            compute.add_metric(values, milli / 1000)
            count.add_metric(values, len(held))
    return [memory, compute, count]


class UsageSource(Protocol):
    """What the usage metrics read (:class:`~dlc.scheduler.core.facade.SchedulerCore`)."""

    def gpu_usage(self) -> dict[tuple[str, int], GpuUsage]:
        """(agent id, GPU index) -> latest reading."""
        ...

    def usage_rollups(self, by: str) -> list[UsageRollup]:
        """Allocated versus used per ``user``, ``group`` or ``job``."""
        ...


def gpu_usage_families(
    agents: Iterable[AgentView],
    readings: dict[tuple[str, int], GpuUsage],
    shared: Collection[tuple[str, int]] = (),
) -> list[GaugeMetricFamily]:
    """Allocated, used and idle per GPU (a GPU without a reading has no used sample;
    ``shared``: (agent, GPU) holding shares, :func:`allocated_shares`)."""
    labels = ["agent", "hostname", "gpu"]
    allocated = GaugeMetricFamily(
        "dlc_gpu_allocated", "1 while a DLC task holds the GPU (whole or shared).", labels=labels
    )
    util = GaugeMetricFamily(
        "dlc_gpu_utilization_pct",
        "GPU utilisation (NVML, mean over the executor's window).",
        labels=labels,
    )
    memory = GaugeMetricFamily(
        "dlc_gpu_memory_used_bytes", "GPU memory in use (NVML, latest sample).", labels=labels
    )
    idle = GaugeMetricFamily(
        "dlc_gpu_idle", "1 for a GPU allocated but idle over the whole window.", labels=labels
    )
    for agent in agents:
        for gpu in agent.gpus:
            values = [agent.agent_id, agent.hostname, str(gpu.index)]
            held = gpu.state == GPU_TAKEN or (agent.agent_id, gpu.index) in shared
            allocated.add_metric(values, 1 if held else 0)
            reading = readings.get((agent.agent_id, gpu.index))
            if reading is None:
                continue
            if reading.util_pct is not None:
                util.add_metric(values, reading.util_pct)
            memory.add_metric(values, reading.mem_used_mib * 1024 * 1024)
            idle.add_metric(values, 1 if is_idle([reading]) else 0)
    return [allocated, util, memory, idle]


def rollup_families(scope: str, rollups: Iterable[UsageRollup]) -> list[GaugeMetricFamily]:
    """``dlc_{scope}_gpus_allocated`` and friends, one series per key (label ``scope``)."""
    name = f"dlc_{scope}"
    allocated = GaugeMetricFamily(
        f"{name}_gpus_allocated", f"GPUs held by running tasks, per {scope}.", labels=[scope]
    )
    idle = GaugeMetricFamily(
        f"{name}_gpus_idle", f"GPUs allocated but idle, per {scope}.", labels=[scope]
    )
    util = GaugeMetricFamily(
        f"{name}_gpu_utilization_pct", f"Mean utilisation of sampled GPUs, per {scope}.",
        labels=[scope],
    )  # fmt: skip
    memory = GaugeMetricFamily(
        f"{name}_gpu_memory_used_bytes", f"GPU memory its processes hold, per {scope}.",
        labels=[scope],
    )  # fmt: skip
    for r in rollups:
        allocated.add_metric([r.key], r.gpus_allocated)
        idle.add_metric([r.key], r.gpus_idle)
        if r.util_pct is not None:
            util.add_metric([r.key], r.util_pct)
        memory.add_metric([r.key], r.mem_used_mib * 1024 * 1024)
    return [allocated, idle, util, memory]


def _safe_topology(attributes: dict[str, str]) -> Topology | None:
    try:
        return default_topology_of(attributes)
    except Exception:  # a bad attribute only costs the drawing, never the scheduler
        return None


class _StateCollector:
    """Scrape-time gauges read from the store and the agent registry."""

    def __init__(self, metrics: SchedulerMetrics):
        self._metrics = metrics

    def describe(self) -> list:
        return []  # unchecked collector: its families depend on the agents seen

    def collect(self):
        metrics = self._metrics
        jobs = metrics.jobs()
        labels = ["agent", "hostname", "model"]
        total = GaugeMetricFamily("dlc_agent_gpus", "GPUs an agent has.", labels=labels)
        used = GaugeMetricFamily(
            "dlc_agent_gpus_allocated", "GPUs of an agent held by DLC tasks.", labels=labels
        )
        agents = metrics.agents()  # one cluster view per scrape
        for agent in agents:
            values = [agent.agent_id, agent.hostname, agent.model]
            total.add_metric(values, len(agent.gpu_ids))
            used.add_metric(values, len(agent.in_state(GPU_TAKEN)))
        yield total
        yield used
        yield from gpu_allocation_families(agents, jobs)
        yield from self._usage_families(agents, set(allocated_shares(jobs)))
        states = GaugeMetricFamily("dlc_jobs", "Jobs by state.", labels=["state"])
        counts = {state.value: 0 for state in JobState}
        for job in jobs:
            counts[job.state.value] += 1
        for state, count in counts.items():
            states.add_metric([state], count)
        yield states
        ratio = metrics.p2p_ratio()
        if ratio is not None:
            yield GaugeMetricFamily(
                "dlc_placement_p2p_ratio",
                "Share of multi-GPU tasks placed on P2P-capable GPU sets.",
                value=ratio,
            )
        info = GaugeMetricFamily("dlc_build_info", "DLC version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info

    def _usage_families(self, agents: list[AgentView], shared: set[tuple[str, int]]):
        metrics = self._metrics
        source = metrics._usage
        if source is None:
            return
        yield from gpu_usage_families(agents, source.gpu_usage(), shared)
        scopes = ("group", "user", "job") if metrics.tenant_labels else ("group",)
        for scope in scopes:
            yield from rollup_families(scope, source.usage_rollups(scope))
