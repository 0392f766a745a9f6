"""The AIStation scenario (``../shared/docs/sharing-and-cluster.md`` section 4.2).

Builds, for one seed and one policy, the agents (N nodes x G GPUs with ``gpu_mem``/
``gpu_core`` RANGES), the tenancy policy (groups, quotas, borrowing), the core's settings
and the workload: day-time interactive sessions (non-homogeneous Poisson, two peaks,
lognormal lengths), a closed-loop training backlog and/or open (Poisson) training arrivals.
The random draws depend on the seed only, never on the policy: the k-th session and the k-th
training job of a user are the same under P0..P4 (each user has its own streams).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dlc.errors import FieldError
from dlc.scheduler.core.facade import CoreConfig
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import DEFAULT_POOL, Group, Policy, Quota, Resources
from dlc.scheduler.tenancy.preemption import parse_protection
from dlc.sim.cluster_sim.engine import Engine, EngineParams, WorkItem
from dlc.sim.cluster_sim.master import SimAgentSpec
from dlc.sim.cluster_sim.scenario import Scenario
from dlc.topology import gpu_shares

DAY = 86400.0
HOUR = 3600.0
GIB = 1024

#: The scenario's agents share GPUs among users, so they run the fault-isolated ``shim``
#: backend: on an ``mps`` agent each GPU now holds one tenant's shares (docs/sharing.md 3b),
#: which would change what this scenario measures (users' sessions sharing cards).
SHARING = "shim"


def agents(scenario: Scenario) -> list[SimAgentSpec]:
    """The cluster's agents, as ``mesos-agent --resources`` would declare them."""
    c = scenario["cluster"]
    gpus = range(c["gpus_per_node"])
    mib = int(c["gpu_memory_gib"] * GIB)
    mem = gpu_shares.ranges_text(gpu_shares.mem_ranges({i: mib for i in gpus}))
    core = gpu_shares.ranges_text(gpu_shares.core_ranges(gpus))
    text = (
        f"cpus:{c['cpus_per_node']};mem:{int(c['mem_gib_per_node'] * GIB)};disk:1048576;"
        f"ports:[31000-32000];gpus:{len(gpus)};gpu_ids:{{{','.join(map(str, gpus))}}};"
        f"gpu_mem:{mem};gpu_core:{core}"
    )
    attributes = {"gpu_model": c["gpu_model"], gpu_shares.ATTR_SHARING: SHARING}
    if c["topology_file"]:
        attributes = _topology_attributes(c["topology_file"], c["gpu_model"], mib, len(gpus))
    return [SimAgentSpec(f"agent-{n}", f"node{n}", text, attributes) for n in range(c["nodes"])]


def _topology_attributes(path: str, model: str, mib: int, count: int) -> dict[str, str]:
    """``dlc_topo`` and the other attributes ``dlc node-config`` prints for a ``topo -m``
    file, with the scenario's GPU model and memory (the file has neither)."""
    from pathlib import Path

    from dlc.topology.node_config import agent_attributes
    from dlc.topology.parse_topo import parse_topo_m

    try:
        topo = parse_topo_m(Path(path).read_text())
    except OSError as exc:
        raise FieldError("cluster.topology_file", f"cannot read {path}: {exc.strerror}") from None
    if len(topo.gpus) != count:
        raise FieldError(
            "cluster.topology_file", f"{path} has {len(topo.gpus)} GPUs, not gpus_per_node {count}"
        )
    gpus = tuple(replace(g, model=model, memory_mib=mib) for g in topo.gpus)
    return agent_attributes(replace(topo, gpus=gpus), SHARING)


def users(scenario: Scenario) -> list[tuple[str, str]]:
    """``(user, group)`` for everyone, in a fixed order."""
    p = scenario["population"]
    return [
        (f"u{g:02d}{i:02d}", f"g{g}")
        for g in range(p["groups"])
        for i in range(p["users_per_group"])
    ]


def tenancy(scenario: Scenario, policy: dict) -> Policy | None:
    """Groups with their quotas (guarantee, borrowing up to the ceiling), or none (P0)."""
    if not policy.get("quotas", False):
        return None
    guaranteed, ceiling = quota_gpus(scenario)
    members: dict[str, set[str]] = {}
    for user, group in users(scenario):
        members.setdefault(group, set()).add(user)
    within = bool(policy.get("preempt_within", False))
    groups = {g: Group(g, frozenset(m), preempt_within=within) for g, m in members.items()}
    quotas = {
        (g, DEFAULT_POOL): Quota(
            g, DEFAULT_POOL,
            Resources(guaranteed, 1e9, 1e12),
            Resources(ceiling, 1e9, 1e12),
        )
        for g in groups
    }  # fmt: skip
    return Policy(groups=groups, quotas=quotas, grace_s=scenario["engine"]["kill_s"])


def quota_gpus(scenario: Scenario) -> tuple[float, float]:
    """A group's guaranteed and ceiling GPUs; with ``scale_with_cluster`` the file's figures
    are for ``reference_gpus`` and grow with the cluster (a cards sweep stays fair)."""
    q, c = scenario["quotas"], scenario["cluster"]
    scale = 1.0
    if q["scale_with_cluster"]:
        scale = c["nodes"] * c["gpus_per_node"] / q["reference_gpus"]
    return q["guaranteed_gpus"] * scale, q["ceiling_gpus"] * scale


def core_config(policy: dict) -> CoreConfig:
    """The core's settings for a policy: its whole-GPU allocator, and fair share over time
    only where the policy names a half-life (``fair_share_half_life_s``): the P0-P4 figures in
    docs/simulator.md were measured without it; bench/sim_fairshare.py measures it; and
    consolidation where it names ``consolidation_moves_per_hour``, protected runtime where it
    names ``protect`` (``normal=30m,low=5m``, as ``--protect``)."""
    rules = [r.strip() for r in policy.get("protect", "").split(",") if r.strip()]
    return CoreConfig(
        placement=PlacementConfig(policy=policy.get("allocator", "first-fit")),
        fair_share_half_life_s=float(policy.get("fair_share_half_life_s", 0.0)),
        consolidation_moves_per_hour=policy.get("consolidation_moves_per_hour", 0),
        protection=parse_protection(rules),
    )


def engine_params(scenario: Scenario) -> EngineParams:
    """The simulated Mesos side's timings."""
    e = scenario["engine"]
    return EngineParams(
        offer_delay_s=e["offer_delay_s"], tick_s=e["tick_s"], start_s=e["start_s"],
        kill_s=e["kill_s"], checkpoint_loss_s=e["checkpoint_loss_minutes"] * 60.0,
    )  # fmt: skip


def _lognormal(rng: np.random.Generator, median: float, sigma: float, most: float) -> float:
    return float(min(most, median * math.exp(sigma * rng.standard_normal())))


def _arrival_profile(s: dict, hour: float) -> float:
    """Relative session arrival rate at ``hour`` of a day: two Gaussian peaks, 0 outside."""
    lo, hi = s["window_hours"]
    if not lo <= hour < hi:
        return 0.0
    width = s["peak_width_hours"]
    return sum(math.exp(-0.5 * ((hour - p) / width) ** 2) for p in s["peaks_hours"]) + 0.05


def session_spec(scenario: Scenario, policy: dict) -> JobSpec:
    """What a session asks: a whole GPU, a 4 GB MPS share, or a time-slice slot."""
    s, c = scenario["sessions"], scenario["cluster"]
    base = JobSpec(
        image="sim/notebook:1", gpus=1, cpus=s["cpus"], mem_mib=int(s["mem_gib"] * GIB),
        interactive=True, name="session",
        priority=s["priority"] if policy.get("priorities", False) else 0,
    )  # fmt: skip
    mode = policy.get("sessions", "whole")
    if mode == "share":
        return replace(base, gpu_memory=int(s["share_gib"] * GIB))
    if mode == "timeslice":  # a slot of 1/replicas; nothing enforces the memory
        replicas = policy.get("replicas", 8)
        return replace(base, gpu_memory=int(c["gpu_memory_gib"] * GIB) // replicas)
    return base


def sessions(scenario: Scenario, seed: int, policy: dict) -> list[WorkItem]:
    """Every session of the run (open arrivals), the same for every policy of a seed."""
    s = scenario["sessions"]
    spec = session_spec(scenario, policy)
    lo, hi = (int(v) for v in s["per_user_per_day"])
    hours = np.arange(0, 24, 0.05)
    weights = np.array([_arrival_profile(s, h) for h in hours])
    weights = weights / weights.sum()
    items = []
    for n, (user, group) in enumerate(users(scenario)):
        rng = np.random.default_rng([seed, 1, n])
        for day in range(math.ceil(scenario.days)):
            if s["weekdays_only"] and day % 7 >= 5:
                continue
            for k in range(int(rng.integers(lo, hi + 1))):
                hour = float(rng.choice(hours, p=weights) + rng.uniform(0, 0.05))
                length = _lognormal(
                    rng, s["median_hours"] * HOUR, s["sigma"], s["max_hours"] * HOUR
                )
                over = rng.random() < s["mem_over_probability"]
                mem = rng.uniform(*s["mem_over_gib"]) if over else s["mem_gib_typical"]
                items.append(WorkItem(
                    f"s-{user}-{day}-{k}", "session", user, group, day * DAY + hour * HOUR,
                    spec, length, s["sm_duty"], int(mem * GIB),
                    s["patience_minutes"] * 60.0 if s["patience_minutes"] else None,
                ))  # fmt: skip
    return items


class TrainingLoop:
    """Closed-loop training: each user keeps ``outstanding_per_user`` jobs in the system and
    submits the next one a think time after one finishes (so throughput can grow with
    capacity). The user's k-th job is the same under every policy."""

    def __init__(self, scenario: Scenario, seed: int):
        self.t = scenario["training"]
        self.c = scenario["cluster"]
        self.group = dict(users(scenario))
        self.index = {u: n for n, (u, _) in enumerate(users(scenario))}
        self.seed = seed
        self.count: dict[str, int] = {}
        sizes = {int(k): float(v) for k, v in self.t["gpus"].items()}
        self.sizes = np.array(sorted(sizes))
        self.weights = np.array([sizes[k] for k in sorted(sizes)]) / sum(sizes.values())

    def first(self) -> list[WorkItem]:
        """The initial backlog: every user's first jobs, spread over the first hour."""
        out = []
        for user in self.group:
            for _ in range(self.t["outstanding_per_user"]):
                out.append(self._job(user, None))
        return out

    def _job(self, user: str, after: float | None) -> WorkItem:
        k = self.count.get(user, 0)
        self.count[user] = k + 1
        return self.draw(user, k, after)

    def draw(self, user: str, k: int, after: float | None, at: float | None = None) -> WorkItem:
        """The user's k-th job: closed loop (stream 2: submitted a think time ``after`` the
        previous one ends, or in the first hour) or open (stream 5: submitted ``at``)."""
        stream, prefix = (2, "t") if at is None else (5, "o")
        rng = np.random.default_rng([self.seed, stream, self.index[user], k])
        gpus = int(rng.choice(self.sizes, p=self.weights))
        per_node = self.c["gpus_per_node"]
        nodes = max(1, math.ceil(gpus / per_node))
        gpus_per = min(gpus, per_node)
        t = self.t
        work = _lognormal(rng, t["median_hours"] * HOUR, t["sigma"], t["max_hours"] * HOUR)
        think = _lognormal(rng, t["think_hours_median"] * HOUR, t["think_sigma"], 30 * DAY)
        if at is None:  # (the draw order is kept: results stay those of earlier runs)
            at = rng.uniform(0, HOUR) if after is None else after + think
        spec = JobSpec(
            image="sim/train:1", gpus=gpus_per, nodes=nodes, name="train",
            cpus=t["cpus_per_gpu"] * gpus_per, mem_mib=int(t["mem_gib_per_gpu"] * GIB * gpus_per),
        )  # fmt: skip
        sm = float(rng.uniform(*t["sm_range"]))
        mem = int(self.c["gpu_memory_gib"] * GIB)
        return WorkItem(
            f"{prefix}-{user}-{k}", "training", user, self.group[user], at, spec, work, sm, mem
        )

    def open_arrivals(self, days: float) -> list[WorkItem]:
        """Open training arrivals: per user, a Poisson process of ``open_per_user_per_day``
        jobs per counted day, uniform inside ``open_window_hours`` (its own stream per user,
        so the k-th open job of a user is the same under every policy)."""
        rate, (lo, hi) = self.t["open_per_user_per_day"], self.t["open_window_hours"]
        if rate <= 0:
            return []
        out = []
        for user, n in self.index.items():
            rng = np.random.default_rng([self.seed, 4, n])
            k = 0
            for day in range(math.ceil(days)):
                if self.t["open_weekdays_only"] and day % 7 >= 5:
                    continue
                for hour in np.sort(rng.uniform(lo, hi, int(rng.poisson(rate)))):
                    out.append(self.draw(user, k, None, day * DAY + float(hour) * HOUR))
                    k += 1
        return out

    def done(self, item: WorkItem, now: float) -> list[WorkItem]:
        """A closed-loop job finished: the user's next one, after a think time."""
        if item.kind != "training" or not item.key.startswith("t-"):
            return []
        return [self._job(item.user, now)]


def build(scenario: Scenario, policy_name: str, seed: int, check_every: int = 0) -> Engine:
    """An engine loaded with the scenario's workload for one policy and seed."""
    policy = scenario.policies[policy_name]
    loop = TrainingLoop(scenario, seed)
    engine = Engine(
        agents(scenario), core_config(policy), tenancy(scenario, policy),
        engine_params(scenario), on_done=loop.done, check_every=check_every,
    )  # fmt: skip
    for item in sessions(scenario, seed, policy) + loop.first() + loop.open_arrivals(scenario.days):
        engine.add(item)
    return engine
