"""The metrics of ``sharing-and-cluster.md`` section 4.3, from one run's records.

Card timelines on a grid of ``slot_s`` seconds: tenants, allocated fraction (memory held
over the card's memory; a whole GPU is 1), modelled SM activity and modelled memory
footprint. Allocation (a) and SM activity (b) are separate numbers, never mixed.
SM activity model: a training job is busy at its drawn ``sm`` level; a session is an ON/OFF
process, ON in a slot with probability ``sm_duty`` (then busy at ``burst_sm``); a card's
activity is the sum of its tenants', capped at 1.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dlc.sim.cluster_sim.engine import SimResult
from dlc.sim.cluster_sim.scenario import Scenario

WEEK_DAYS = 7.0


def _pct(values: Iterable[float], q: float) -> float | None:
    values = list(values)
    return float(np.percentile(values, q)) if values else None


def _card_index(result: SimResult, gpus_per_node: int) -> dict[tuple[str, int], int]:
    return {
        (a.agent_id, g): n * gpus_per_node + g
        for n, a in enumerate(result.agents)
        for g in range(gpus_per_node)
    }


def timelines(result: SimResult, scenario: Scenario, seed: int) -> dict[str, np.ndarray]:
    """Per card and slot: ``tenants``, ``whole`` (whole-GPU tenants), ``alloc`` (fraction),
    ``sm`` (capped), ``mem`` (sessions' modelled MiB)."""
    c, m = scenario["cluster"], scenario["metrics"]
    slot = m["slot_s"]
    per_node = c["gpus_per_node"]
    cards = len(result.agents) * per_node
    steps = max(1, int(np.ceil(result.until / slot)))
    total_mib = c["gpu_memory_gib"] * 1024
    out = {k: np.zeros((cards, steps)) for k in ("tenants", "whole", "alloc", "sm", "mem")}
    index = _card_index(result, per_node)
    burst, duty = scenario["sessions"]["burst_sm"], scenario["sessions"]["sm_duty"]
    for interval in result.intervals:
        record = result.records[interval.key]
        item = record.item
        # a slot counts an interval that covers its midpoint (no double count at hand-overs)
        end = interval.end if interval.end is not None else result.until
        lo, hi = int(np.ceil(interval.start / slot - 0.5)), int(np.ceil(end / slot - 0.5))
        hi = min(hi, steps)
        if hi <= lo:
            continue
        card = index[(interval.agent_id, interval.gpu)]
        out["tenants"][card, lo:hi] += 1
        out["alloc"][card, lo:hi] += interval.mib / total_mib
        if item.kind == "session":
            rng = np.random.default_rng([seed, 3, zlib.crc32(f"{interval.key}@{lo}".encode())])
            out["sm"][card, lo:hi] += (rng.random(hi - lo) < duty) * burst
            out["mem"][card, lo:hi] += item.mem_mib
        else:
            out["sm"][card, lo:hi] += item.sm
            out["whole"][card, lo:hi] += 1
    out["sm"] = np.minimum(out["sm"], 1.0)
    out["alloc"] = np.minimum(out["alloc"], 1.0)
    return out


def _waits(
    records, until: float, kind: str, group: str | None = None, gpus: int | None = None
) -> list[float]:
    """Waits in minutes of ``kind`` items (of ``group``; ``gpus``: only items asking that
    many whole GPUs in all, 8 being the consolidation target)."""

    def keep(r) -> bool:
        if r.item.kind != kind or (group is not None and r.item.group != group):
            return False
        return gpus is None or r.item.spec.gpus * r.item.spec.nodes == gpus

    return waits_of(records, until, keep)


def waits_of(records, until: float, keep: Callable[[Any], bool]) -> list[float]:
    """Minutes from submission to first start of the records ``keep`` accepts; one never
    started counts with the time it waited (a lower bound); one that failed before it
    started is left out."""
    out = []
    for r in records:
        if not keep(r) or (r.state == "failed" and r.first_start is None):
            continue
        end = r.first_start if r.first_start is not None else (r.ended or until)
        out.append((end - r.submitted) / 60.0)
    return out


def measure(result: SimResult, scenario: Scenario, seed: int) -> dict:
    """Every metric of one run (a flat dict of numbers, ``None`` where undefined)."""
    m, c = scenario["metrics"], scenario["cluster"]
    days = result.until / 86400.0
    slot_h = m["slot_s"] / 3600.0
    lines = timelines(result, scenario, seed)
    cards = lines["tenants"].shape[0]
    allocated = lines["tenants"] > 0
    records = list(result.records.values())
    out: dict = {
        "cards": cards,
        "allocated_h_per_card_day": float(allocated.sum() * slot_h / cards / days),
        "active_h_per_card_day": float(
            (lines["sm"] > m["active_threshold"]).sum() * slot_h / cards / days
        ),
        "allocation_ratio": float(lines["alloc"].mean()),
        "sm_activity": float(lines["sm"].mean()),
    }
    for kind in ("training", "session"):
        done = [r for r in records if r.item.kind == kind and r.state == "finished"]
        out[f"{kind}_completed_per_week"] = len(done) * WEEK_DAYS / days
        waits = _waits(records, result.until, kind)
        out[f"{kind}_wait_p50_min"] = _pct(waits, 50)
        out[f"{kind}_wait_p95_min"] = _pct(waits, 95)
        big = _waits(records, result.until, kind, gpus=8)
        out[f"{kind}_wait_p95_min_8gpu"] = _pct(big, 95)
        out[f"{kind}_wait_p50_min_8gpu"] = _pct(big, 50)
        for group in sorted({r.item.group for r in records}):
            w = _waits(records, result.until, kind, group)
            out[f"{kind}_wait_p95_min_{group}"] = _pct(w, 95)
    out["sessions_withdrawn_per_week"] = (
        sum(1 for r in records if r.state == "withdrawn") * WEEK_DAYS / days
    )
    jct = [
        (r.ended - r.submitted) / max(r.work0, 1.0)
        for r in records
        if r.item.kind == "training" and r.state == "finished" and r.ended is not None
    ]
    out["training_jct_over_isolated_p95"] = _pct(jct, 95)
    out["preemptions_per_week"] = sum(r.preemptions for r in records) * WEEK_DAYS / days
    out["preempted_gpu_h_lost_per_week"] = (
        sum(r.lost_gpu_s for r in records) / 3600.0 * WEEK_DAYS / days
    )
    moved, moved_lost = result.consolidation
    out["consolidation_moves_per_week"] = moved * WEEK_DAYS / days
    out["consolidation_gpu_h_bound_per_week"] = moved_lost * WEEK_DAYS / days
    tenants = lines["tenants"][allocated]
    out["tenants_per_gpu_mean"] = float(tenants.mean()) if tenants.size else 0.0
    out["tenants_per_gpu_p95"] = _pct(tenants, 95) if tenants.size else 0.0
    for k in (1, 2, 4, 8):
        out[f"tenants_ge_{k}_share"] = float((tenants >= k).mean()) if tenants.size else 0.0
    # sessions' modelled footprints beyond the card's memory on a shared card: the OOM risk
    # of time-slicing without caps (under MPS caps the session over its share fails alone)
    over = (lines["mem"] > c["gpu_memory_gib"] * 1024) & (lines["whole"] == 0)
    out["gpu_h_over_memory_per_week"] = float(over.sum() * slot_h * WEEK_DAYS / days)
    out["sessions_over_share"] = sum(
        1 for r in records
        if r.item.kind == "session" and r.first_start is not None and r.item.spec.is_share
        and r.item.mem_mib > (r.item.spec.gpu_memory or 0)
    )  # fmt: skip
    slo = scenario["slo"]
    s95 = out["session_wait_p95_min"]
    j95 = out["training_jct_over_isolated_p95"]
    # a class the workload does not have holds its SLO; one submitted but never measured
    # (no session waited, no job finished) does not
    kinds = {r.item.kind for r in records}
    out["session_slo_met"] = "session" not in kinds or bool(
        s95 is not None and s95 <= slo["session_start_p95_minutes"]
    )
    out["training_slo_met"] = "training" not in kinds or bool(
        j95 is not None and j95 <= slo["training_jct_p95_factor"]
    )
    out["slo_met"] = out["session_slo_met"] and out["training_slo_met"]
    out["rounds"] = result.rounds
    out["round_ms_mean"] = 1000.0 * result.round_s / max(1, result.rounds)
    out["invariant_problems"] = len(result.problems)
    out["accounted"] = sum(result.states.values()) == len(records)
    return out
