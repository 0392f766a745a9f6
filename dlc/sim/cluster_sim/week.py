"""A simulated week with DLC's scheduling features on and each one off in turn (issue 28).

Two workloads run through the real core (:class:`~dlc.sim.cluster_sim.engine.Engine`):

- ``aistation``: the AIStation scenario (``examples/sim/aistation.yaml``) under its policy
  ``P1`` (quotas, borrowing, session priority, whole GPUs), with the features added;
- ``multinode``: openb-sized 8-GPU agents in switches and racks
  (:mod:`~dlc.sim.cluster_sim.racks`), four groups of equal weight whose demand differs in
  time and size, and a mix of single-GPU, 8-GPU and multi-node gang jobs in two priority
  classes (:func:`multinode_items`).

A *variant* is the set of features on: fair share over time (a 7-day half-life),
consolidation (6 moves an hour), gang topology (agents advertise rack and switch: gangs
prefer one switch) and protected runtime per priority class. :data:`VARIANTS` holds all on,
each off in turn and all off. The random draws depend on the seed only, never on the variant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from dlc.scheduler.core.facade import CoreConfig
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.fair_share import accrued, decay
from dlc.scheduler.tenancy.policy import DEFAULT_POOL, Group, Policy, Quota, Resources
from dlc.scheduler.tenancy.preemption import parse_protection
from dlc.sim.cluster_sim.aistation import build
from dlc.sim.cluster_sim.engine import EngineParams, JobRecord, SimResult, WorkItem
from dlc.sim.cluster_sim.metrics import waits_of
from dlc.sim.cluster_sim.racks import (
    EXECUTOR_CPUS,
    EXECUTOR_MEM,
    RackEngine,
    in_one_switch,
    racked_agents,
)
from dlc.sim.cluster_sim.scenario import Scenario

DAY = 86400.0
HOUR = 3600.0
FEATURES = ("fair_share", "consolidation", "topology", "protection")
#: variant -> the features on ("all", each feature off in turn, "none")
VARIANTS: dict[str, frozenset[str]] = {
    "all": frozenset(FEATURES),
    **{f"no-{f.replace('_', '-')}": frozenset(FEATURES) - {f} for f in FEATURES},
    "none": frozenset(),
}
HALF_LIFE_S = 7 * DAY
MOVES_PER_HOUR = 6
#: ``--protect`` of the feature: a normal job runs 30 min before it may be preempted, a low
#: one 5 min
PROTECT = ("normal=30m", "low=5m")
#: the AIStation policy the features are added to
AISTATION_BASE = "P1"


@dataclass(frozen=True)
class MultiNode:
    """The multi-node workload's size and demand.

    Attributes:
        agents: 8-GPU openb agents (a multiple of a rack: 8).
        days: simulated days.
        demand: group -> (start, end of its arrivals as fractions of the run (of a week:
            days 2 to 5 is 2/7 to 5/7), share of the cluster's GPU-hours over the run that
            it submits, arriving uniformly between the two).
        shapes: ``((gpus, nodes), probability, mean hours)`` of a job (exponential length).
        low_share: the share of jobs in the ``low`` priority class (the rest: ``normal``).
        guaranteed: the share of the cluster's GPUs each group is guaranteed (the rest is
            lent by borrowing).
    """

    agents: int = 16
    days: float = 7.0
    demand: tuple[tuple[str, float, float, float], ...] = (
        ("early", 0 / 7, 7 / 7, 0.45),
        ("steady", 0 / 7, 7 / 7, 0.30),
        ("late", 2 / 7, 5 / 7, 0.30),
        ("latest", 4 / 7, 6 / 7, 0.26),
    )
    shapes: tuple[tuple[tuple[int, int], float, float], ...] = (
        ((1, 1), 0.30, 2.0), ((2, 1), 0.10, 2.0), ((4, 1), 0.10, 2.0), ((8, 1), 0.20, 4.0),
        ((8, 2), 0.12, 6.0), ((4, 2), 0.06, 6.0), ((8, 3), 0.06, 6.0), ((8, 4), 0.06, 6.0),
    )  # fmt: skip
    low_share: float = 0.3
    guaranteed: float = 0.125


def core_config(features: frozenset[str], allocator: str) -> CoreConfig:
    """The core's settings with ``features`` on."""
    return CoreConfig(
        placement=PlacementConfig(
            policy=allocator, executor_cpus=EXECUTOR_CPUS, executor_mem_mib=EXECUTOR_MEM
        ),
        fair_share_half_life_s=HALF_LIFE_S if "fair_share" in features else 0.0,
        consolidation_moves_per_hour=MOVES_PER_HOUR if "consolidation" in features else 0,
        protection=parse_protection(PROTECT if "protection" in features else ()),
    )


def aistation_run(scenario: Scenario, features: frozenset[str], seed: int) -> dict:
    """One AIStation run with ``features`` on (gang topology: no gangs there, no effect)."""
    policy = dict(scenario.policies[AISTATION_BASE])
    policy["fair_share_half_life_s"] = HALF_LIFE_S if "fair_share" in features else 0.0
    policy["consolidation_moves_per_hour"] = MOVES_PER_HOUR if "consolidation" in features else 0
    policy["protect"] = ",".join(PROTECT) if "protection" in features else ""
    variant = replace(scenario, policies={"week": policy})
    result = build(variant, "week", seed).run(scenario.days * DAY)
    c, q = scenario["cluster"], scenario["quotas"]
    weights = dict.fromkeys({r.item.group for r in result.records.values()},
                            q["guaranteed_gpus"])  # fmt: skip
    return measure(result, c["nodes"] * c["gpus_per_node"], weights, None)


def multinode_items(load: MultiNode, seed: int) -> list[WorkItem]:
    """Every group's jobs: sizes by ``shapes``, arriving uniformly in the group's window
    until its share of the GPU-hours is submitted (one stream per group and seed)."""
    capacity_h = load.agents * 8 * load.days * 24
    probs = np.array([p for _, p, _ in load.shapes])
    items = []
    for g, (group, first, last, share) in enumerate(load.demand):
        rng = np.random.default_rng([seed, 7, g])
        submitted, n = 0.0, 0
        while submitted < share * capacity_h:
            (gpus, nodes), _, mean_h = load.shapes[int(rng.choice(len(probs), p=probs))]
            hours = min(48.0, max(60.0 / HOUR, float(rng.exponential(mean_h))))
            at = float(rng.uniform(first, last) * load.days * DAY)
            low = bool(rng.random() < load.low_share)
            spec = JobSpec(
                image="sim/train:1", gpus=gpus, nodes=nodes, cpus=4.0 * gpus,
                mem_mib=16384 * gpus, name=f"{group}{n}",
                priority_class="low" if low else "normal",
            )  # fmt: skip
            items.append(WorkItem(f"{group}-{n:05d}", "training", f"{group}-u{n % 4}", group,
                                  at, spec, hours * HOUR))  # fmt: skip
            submitted += gpus * nodes * hours
            n += 1
    return items


def multinode_policy(load: MultiNode) -> Policy:
    """Equal guarantees (equal weights); no ceiling: the rest is lent."""
    names = [group for group, *_ in load.demand]
    groups = {g: Group(g, frozenset(f"{g}-u{i}" for i in range(4))) for g in names}
    each = load.guaranteed * load.agents * 8
    quotas = {(g, DEFAULT_POOL): Quota(g, DEFAULT_POOL, Resources(each, 1e9, 1e12))
              for g in groups}  # fmt: skip
    return Policy(groups=groups, quotas=quotas, grace_s=30)


def multinode_run(load: MultiNode, features: frozenset[str], seed: int) -> dict:
    """One run of the multi-node workload with ``features`` on."""
    agents, where = racked_agents(load.agents, advertise="topology" in features)
    engine = RackEngine(
        agents, core_config(features, "tree"), where, tenancy=multinode_policy(load),
        params=EngineParams(offer_delay_s=30.0, tick_s=1800.0, checkpoint_loss_s=300.0),
    )  # fmt: skip
    for item in multinode_items(load, seed):
        engine.add(item)
    result = engine.run(load.days * DAY)
    weights = {group: load.guaranteed * load.agents * 8 for group, *_ in load.demand}
    return measure(result, load.agents * 8, weights, in_one_switch(engine.notes))


def measure(
    result: SimResult, gpus: int, weights: dict[str, float], gangs: tuple[int, int] | None
) -> dict:
    """The week's figures of one run.

    Args:
        gpus: the cluster's GPUs (allocation's denominator).
        weights: group -> weight (its guaranteed GPUs).
        gangs: ``(gangs that fit one switch, of those placed in one)``; ``None``: no racks.
    """
    records = list(result.records.values())
    held = sum((i.end or result.until) - i.start for i in result.intervals)
    usage = decayed_usage(result, HALF_LIFE_S)
    moved_lost = sum(r.moved_lost_gpu_s for r in records) / HOUR
    fit, placed = gangs or (0, 0)
    return {
        "jain": jain([usage.get(g, 0.0) / w for g, w in weights.items()]),
        "wait_p95_min_8gpu": p95(waits(records, result.until, _eight_gpus)),
        "wait_p95_min_multinode": p95(waits(records, result.until, lambda s: s.nodes > 1)),
        "lost_gpu_h_preemption": sum(r.lost_gpu_s for r in records) / HOUR - moved_lost,
        "lost_gpu_h_consolidation": moved_lost,
        "lost_gpu_h_consolidation_bound": result.consolidation[1],
        "moves": result.consolidation[0],
        "preemptions": sum(r.preemptions - r.moves for r in records),
        "allocation": held / (gpus * result.until),
        "gangs_fit_one_switch": fit if gangs else None,
        "gangs_in_one_switch": (placed / fit if fit else None) if gangs else None,
        "jobs": len(records),
        "problems": len(result.problems),
    }  # fmt: skip


def decayed_usage(result: SimResult, half_life_s: float) -> dict[str, float]:
    """Each group's GPU-hours at the end of the run, decayed as the scheduler decays them
    (an interval is one whole GPU: both workloads ask whole GPUs)."""
    out: dict[str, float] = {}
    for interval in result.intervals:
        group = result.records[interval.key].item.group
        end = interval.end if interval.end is not None else result.until
        value = accrued(1.0, end - interval.start, half_life_s)
        out[group] = out.get(group, 0.0) + decay(value, result.until - end, half_life_s)
    return out


def jain(values: list[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n sum x^2)`` (1: all equal)."""
    squares = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * squares) if squares else 1.0


def waits(records: list[JobRecord], until: float, pick: Callable[[JobSpec], bool]) -> list[float]:
    """Minutes from submission to first start of the training jobs ``pick`` keeps
    (:func:`~dlc.sim.cluster_sim.metrics.waits_of`)."""
    return waits_of(records, until, lambda r: r.item.kind == "training" and pick(r.item.spec))


def _eight_gpus(spec: JobSpec) -> bool:
    return (spec.gpus, spec.nodes) == (8, 1) and not spec.is_share


def p95(values: list[float]) -> float | None:
    """The 95th percentile (``None`` without data)."""
    return float(np.percentile(values, 95)) if values else None
