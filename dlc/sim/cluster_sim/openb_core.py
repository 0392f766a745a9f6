"""The openb replay through DLC's scheduler core (``dlc simulate openb --mode core``).

The direct replay (:mod:`dlc.sim.replay`) calls the placement on arrays pod by pod. This one
submits the same pods, in the same arrival order, as jobs to :class:`SchedulerCore` on the
openb nodes as simulated Mesos agents (:mod:`dlc.sim.cluster_sim.openb`): offers, the core's
round, TaskInfos, and the simulated master's RANGES arithmetic, which refuses anything not
free. Pods arrive in batches of ``batch_pct`` percent of the cluster's GPUs; offer rounds run
until every pod of the batch had its turn, and a pod its turn could not place is withdrawn,
as the direct replay fails a pod that fits nowhere (pods never end).

The result is a :class:`~dlc.sim.replay.ReplayResult` with one event per arrived pod, so the
direct mode's curves (:mod:`dlc.sim.metrics`), tables and plots read it unchanged: event i's
allocation is what the master holds after the batch's earlier events, counted in arrival
order (at each batch's end it is exactly what the master holds, checked every batch).
CPU-only pods are submitted as CPU-only jobs (``gpus: 0``): events that ask no GPU, whose
CPU and memory the core places by the same measure as the direct replay's engine policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dlc.scheduler.core.facade import CoreConfig
from dlc.scheduler.core.ports import RoundSink
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.round_cap import CAP_PREFIX
from dlc.scheduler.placement.shape_cache import DEFERRED_PREFIX
from dlc.scheduler.placement.share_hold import ShareHoldSettings
from dlc.sim.cluster_sim.engine import Engine, WorkItem
from dlc.sim.cluster_sim.master import SimMaster, ranges_of
from dlc.sim.cluster_sim.openb import agent_of, item_of
from dlc.sim.openb_jobs import quiet_topology
from dlc.sim.replay import ReplayResult
from dlc.sim.trace import MILLI, NodeSpec, PodSpec
from dlc.topology import gpu_shares


@dataclass
class CoreStats:
    """What the core run did beside the curve (times are wall seconds, summed)."""

    rounds: int = 0
    offers_s: float = 0.0
    core_s: float = 0.0
    withdrawn: int = 0
    #: pods the core refused at submit (admission): counted as failed
    rejected: int = 0
    #: CPU-only pods submitted (as CPU-only jobs) and how many of them were placed
    cpu_only: int = 0
    cpu_only_placed: int = 0
    refused: int = 0
    #: GPU memory (MiB) the master's tasks hold at the end, and the agents' total
    gpu_mib_held: int = 0
    gpu_mib_total: int = 0
    #: master invariant breaches, refused launches and curve/master mismatches (empty: sound)
    problems: list[str] = field(default_factory=list)
    #: per batch: ``(seconds building offers, seconds in the core's rounds, pods submitted)``
    batches: list[tuple[float, float, int]] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        """Plain data for results.json (without the per-batch times)."""
        return {k: v for k, v in self.__dict__.items() if k != "batches"}


@dataclass
class BatchOutcome:
    """One batch's pods after their rounds: the keys placed and the times taken."""

    placed: set[str]
    withdrawn: int
    rejected: int
    rounds: int
    offers_s: float
    core_s: float


def core_engine(
    nodes: list[NodeSpec], hold_reserve: float = 0.0, metrics: RoundSink | None = None
) -> Engine:
    """An engine over the openb nodes with the scheduler's placement as the replay needs it:
    no executor overhead (the pods' asks are the trace's) and the share hold at
    ``hold_reserve`` (0: off, the scheduler's default)."""
    placement = PlacementConfig(
        "first-fit",  # the GPUs within an agent; openb's agents have no topology to rank them
        executor_cpus=0.0,
        executor_mem_mib=0.0,
        share_hold=ShareHoldSettings(reserve=hold_reserve),
    )
    return Engine([agent_of(n) for n in nodes], CoreConfig(placement=placement), metrics=metrics)


def held_gpu_milli(master: SimMaster) -> int:
    """GPU thousandths the master's tasks hold (a whole GPU holds its 1000-unit core block)."""
    return sum(
        sum(gpu_shares.amounts(ranges_of(t.resources, gpu_shares.GPU_CORE)).values())
        for t in master.tasks.values()
    )


def run_batch(engine: Engine, items: list[WorkItem]) -> BatchOutcome:
    """Submit ``items``, then run offer rounds until each had its turn (the core considers
    ``max_jobs_per_round`` jobs a round and tries a user's jobs until its budget of failed
    shapes is spent, docs/scheduler.md: the rest wait for the next round, :func:`had_turn`);
    a pod its turn could not place is withdrawn. No virtual time passes: pods never end."""
    for item in items:
        engine.submit_now(item)
    out = BatchOutcome(set(), 0, 0, 0, 0.0, 0.0)
    waiting = []
    for item in items:
        if engine.records[item.key].job_id is None:
            out.rejected += 1  # admission refused it at submit
        else:
            waiting.append(item)
    while waiting:
        offers_s, core_s = engine.offer_round_now()
        out.rounds += 1
        out.offers_s, out.core_s = out.offers_s + offers_s, out.core_s + core_s
        later = []
        for item in waiting:
            record = engine.records[item.key]
            if record.first_start is not None:
                out.placed.add(item.key)
                continue
            assert record.job_id is not None  # submitted
            if not had_turn(engine.core.queue_reason(record.job_id) or ""):
                later.append(item)  # its turn comes next round
                continue
            engine.core.kill(record.job_id, "openb", admin=True)
            out.withdrawn += 1
        waiting = later
    return out


def had_turn(reason: str) -> bool:
    """Whether a queued job with this reason was tried: not when the round cap has not
    considered it yet (:data:`CAP_PREFIX`) nor when the per-user budget deferred it
    (:data:`DEFERRED_PREFIX`: it goes first next round). Withdrawing a deferred job would
    give up on a pod the core never tried, which neither the direct replay nor a user does."""
    return CAP_PREFIX not in reason and DEFERRED_PREFIX not in reason


def replay_core(
    nodes: list[NodeSpec],
    arrivals: list[PodSpec],
    batch_pct: float = 1.0,
    hold_reserve: float = 0.0,
    progress: Callable[[int], None] | None = None,
    metrics: RoundSink | None = None,
) -> tuple[ReplayResult, CoreStats]:
    """Replay ``arrivals`` through the core; one event per pod, as :func:`dlc.sim.replay.replay`.

    Identical arguments give identical results: the simulator's store numbers jobs in
    submit order and the core tries a batch in submit order.
    """
    with quiet_topology():  # "no dlc_topo" once per agent: none of openb's nodes has one
        engine = core_engine(nodes, hold_reserve, metrics)
        return replay_on(engine, nodes, arrivals, batch_pct, progress)


def replay_on(
    engine: Engine,
    nodes: list[NodeSpec],
    arrivals: list[PodSpec],
    batch_pct: float = 1.0,
    progress: Callable[[int], None] | None = None,
) -> tuple[ReplayResult, CoreStats]:
    """:func:`replay_core` on an engine of :func:`core_engine` (``nodes`` as it was built
    with), which the caller may then inspect (the master's tasks)."""
    total = sum(n.gpus for n in nodes) * MILLI
    n = len(arrivals)
    arrived = np.zeros(n + 1, dtype=np.int64)
    used = np.zeros(n + 1, dtype=np.int64)
    result = ReplayResult(total, arrived, used, np.full(n + 1, np.nan))
    stats = CoreStats()
    step = batch_pct / 100 * total
    next_round, so_far, used_before = step, 0, 0
    batch: list[tuple[int, WorkItem, int]] = []  # (event, item, GPU thousandths)
    for i, pod in enumerate(arrivals, start=1):
        so_far += pod.total_gpu_milli
        arrived[i] = so_far
        item = item_of(pod, i - 1, 0.0)
        stats.cpu_only += not pod.num_gpu
        batch.append((i, item, pod.total_gpu_milli))
        if so_far >= next_round or i == n:
            used_before = _settle(engine, batch, result, stats, used_before)
            if progress is not None:
                progress(len(batch))
            batch, next_round = [], next_round + step
    master = engine.master
    stats.problems += master.check()
    stats.refused = master.refused
    stats.gpu_mib_held = sum(sum(t.gpu_mib.values()) for t in master.tasks.values())
    stats.gpu_mib_total = sum(
        sum(gpu_shares.amounts(ranges_of(r, gpu_shares.GPU_MEM)).values())
        for r in master.total.values()
    )
    if engine.master.refused:
        stats.problems.append(f"the master refused {engine.master.refused} launches")
    return result, stats


def _settle(engine, batch, result: ReplayResult, stats: CoreStats, used_before: int) -> int:
    """Run one batch and write its events' allocation; returns the allocation after it."""
    items = [item for _, item, _ in batch]
    outcome = run_batch(engine, items)
    stats.rounds += outcome.rounds
    stats.offers_s += outcome.offers_s
    stats.core_s += outcome.core_s
    stats.withdrawn += outcome.withdrawn
    stats.rejected += outcome.rejected
    stats.batches.append((outcome.offers_s, outcome.core_s, len(items)))
    used = used_before
    for event, item, milli in batch:
        if item.key in outcome.placed:
            used += milli
            result.placed += 1
            stats.cpu_only_placed += not item.spec.gpus
        else:
            result.failed.append(event - 1)
            result.failed_gpu_milli += milli
        result.used_gpu_milli[event] = used
    held = held_gpu_milli(engine.master)
    if held != used:
        event = batch[-1][0]
        stats.problems.append(f"after event {event}: pods placed {used}, master holds {held}")
    return used
