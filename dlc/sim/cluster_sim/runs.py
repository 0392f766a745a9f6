"""Runs of a scenario over policies, seeds and swept assumptions, with 95% intervals.

A run is one (policy, seed, swept value) simulation; assumptions that only the metrics read
(the session SM duty cycle) are measured on the same run for each value instead of
simulating again. Runs go to worker processes (``jobs``) and come back in a fixed order,
so the results do not depend on the number of workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlc.errors import FieldError
from dlc.sim.cluster_sim.scenario import Scenario

#: two-sided 95% Student t quantiles by degrees of freedom (1..30); above: 1.96
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]  # fmt: skip


@dataclass(frozen=True)
class RunKey:
    """One simulation: a policy, a seed and the swept field's value (if any)."""

    policy: str
    seed: int
    sweep: tuple[str, Any] | None = None


def mean_ci(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and the half-width of its 95% interval (Student t); ``None`` without data."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return None, None
    mean = float(np.mean(data))
    if len(data) < 2:
        return mean, None
    t = _T95[len(data) - 2] if len(data) - 1 <= len(_T95) else 1.96
    return mean, float(t * np.std(data, ddof=1) / math.sqrt(len(data)))


def _one(args: tuple[Scenario, RunKey, tuple[float, ...], float | None]) -> list[dict]:
    """Simulate one run and measure it for each session duty cycle (worker process)."""
    from dlc.sim.cluster_sim.aistation import build
    from dlc.sim.cluster_sim.metrics import measure

    scenario, key, duties, days = args
    if key.sweep is not None:
        scenario = scenario.with_value(*key.sweep)
    result = build(scenario, key.policy, key.seed).run((days or scenario.days) * 86400.0)
    out = []
    for duty in duties:
        variant = scenario.with_value("sessions.sm_duty", duty)
        out.append({"policy": key.policy, "seed": key.seed, "sweep": key.sweep, "sm_duty": duty,
                    "metrics": measure(result, variant, key.seed)})  # fmt: skip
    return out


def run_all(
    scenario: Scenario,
    policies: Sequence[str],
    seeds: Sequence[int],
    sweep: tuple[str, list[Any]] | None = None,
    duties: Sequence[float] = (),
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    days: float | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """Every run's metrics (one row per run and duty cycle), in a fixed order.

    Args:
        sweep: ``(section.field, values)`` simulated again for each value.
        duties: session SM duty cycles to measure each run with (default: the file's).
        jobs: worker processes.
        progress: ``(done, total)`` after each run.
        days: override of the scenario's length (the CI slice runs a fraction of a day).
        on_rows: told of each run's rows as they come (a long sweep saves as it goes).

    Raises:
        FieldError: an unknown policy or swept field.
    """
    for name in policies:
        if name not in scenario.policies:
            known = ", ".join(scenario.policies)
            raise FieldError("--policy", f"{name!r} is not in the scenario; use some of {known}")
    values = [(sweep[0], v) for v in sweep[1]] if sweep else [None]
    for value in values:
        if value is not None:
            scenario.with_value(*value)  # checked before any run starts
    duties = tuple(duties) or (scenario["sessions"]["sm_duty"],)
    # seed-major: a run cut short still holds every policy for its first seeds
    keys = [RunKey(p, s, v) for v in values for s in seeds for p in policies]
    tasks = [(scenario, k, duties, days) for k in keys]
    rows: list[dict] = []
    if jobs <= 1:
        for n, task in enumerate(tasks):
            part = _one(task)
            rows += part
            if on_rows:
                on_rows(part)
            if progress:
                progress(n + 1, len(tasks))
        return rows
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for n, part in enumerate(pool.map(_one, tasks)):
            rows += part
            if on_rows:
                on_rows(part)
            if progress:
                progress(n + 1, len(tasks))
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    """Mean and 95% half-width per (sweep value, duty, policy) and metric."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (str(row["sweep"]), row["sm_duty"], row["policy"])
        groups.setdefault(key, []).append(row)
    out = []
    for (_, duty, policy), members in groups.items():
        names = [
            k for k, v in members[0]["metrics"].items() if v is None or isinstance(v, int | float)
        ]
        stats = {}
        for name in names:
            mean, ci = mean_ci([m["metrics"].get(name) for m in members])
            stats[name] = {"mean": mean, "ci95": ci}
        out.append({"policy": policy, "sweep": members[0]["sweep"], "sm_duty": duty,
                    "seeds": [m["seed"] for m in members], "metrics": stats})  # fmt: skip
    return out


#: metrics kept for the size where both SLOs are first met
AT_NEED = ("allocation_ratio", "allocated_h_per_card_day", "active_h_per_card_day",
           "sm_activity", "tenants_per_gpu_mean", "training_completed_per_week",
           "session_wait_p95_min", "training_jct_over_isolated_p95")  # fmt: skip


def _chain(args: tuple[Scenario, str, int, tuple[int, ...], float | None]) -> list[dict]:
    """One policy and seed over growing node counts, up to the first that meets both SLOs."""
    scenario, policy, seed, nodes, days = args
    rows = []
    duty = (scenario["sessions"]["sm_duty"],)
    for n in nodes:
        rows += _one((scenario, RunKey(policy, seed, ("cluster.nodes", n)), duty, days))
        if rows[-1]["metrics"]["slo_met"]:
            break
    return rows


def search_cards(
    scenario: Scenario,
    policies: Sequence[str],
    seeds: Sequence[int],
    nodes: Sequence[int],
    jobs: int = 1,
    days: float | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """Cards needed for the SLOs: per policy and seed, run ``nodes`` in increasing order and
    stop at the first size where both SLOs hold (the note's "smallest N"; later sizes are
    not run, so a size that meets them and a larger one that does not are not looked for).

    Returns every run's row (as :func:`run_all`), policy-major then seed.
    """
    for name in policies:
        if name not in scenario.policies:
            known = ", ".join(scenario.policies)
            raise FieldError("--policy", f"{name!r} is not in the scenario; use some of {known}")
    sizes = tuple(sorted(int(n) for n in nodes))
    for n in sizes:
        scenario.with_value("cluster.nodes", n)
    tasks = [(scenario, p, s, sizes, days) for p in policies for s in seeds]
    rows: list[dict] = []
    if jobs <= 1:
        parts = map(_chain, tasks)
        for part in parts:
            rows += part
            if on_rows:
                on_rows(part)
        return rows
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(_chain, tasks):
            rows += part
            if on_rows:
                on_rows(part)
    return rows


def cards_table(rows: list[dict], per_node: int, reference: str | None = None) -> dict:
    """Per policy: cards needed per seed (first size meeting both SLOs; ``None``: none of
    the sizes run), and for the session SLO alone; mean ± 95% CI over the seeds that met
    them; and, against ``reference`` (P0), the paired "fewer cards" ratio 1 - N/N_ref."""
    need: dict[str, dict[int, dict[str, Any]]] = {}  # both, session, largest_run, at_need
    for row in sorted(rows, key=lambda r: r["sweep"][1]):
        cards = row["sweep"][1] * per_node
        m = row["metrics"]
        seed = need.setdefault(row["policy"], {}).setdefault(
            row["seed"], {"both": None, "session": None, "largest_run": 0, "at_need": {}}
        )
        seed["largest_run"] = max(seed["largest_run"], cards)
        for name, met in (("both", m["slo_met"]), ("session", m["session_slo_met"])):
            if met and seed[name] is None:
                seed[name] = cards
                if name == "both":  # what the cluster looks like at the size needed
                    seed["at_need"] = {k: m.get(k) for k in AT_NEED}
    out: dict[str, dict] = {}
    for policy, seeds in need.items():
        entry: dict[str, Any] = {"per_seed": seeds}
        for name in ("both", "session"):
            values = [s[name] for s in seeds.values()]
            entry[f"{name}_mean"], entry[f"{name}_ci95"] = mean_ci(values)
            entry[f"{name}_unmet_seeds"] = sum(v is None for v in values)
        for name in AT_NEED:
            entry[f"at_need_{name}"] = mean_ci([s["at_need"].get(name) for s in seeds.values()])
        if reference and reference in need and policy != reference:
            ratios = [
                1.0 - s["both"] / need[reference][k]["both"]
                for k, s in seeds.items()
                if s["both"] and k in need[reference] and need[reference][k]["both"]
            ]
            entry["fewer_cards_mean"], entry["fewer_cards_ci95"] = mean_ci(ratios)
        out[policy] = entry
    return out
