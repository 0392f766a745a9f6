"""Consolidation inside the Mesos-driven simulator (the real core; seeded, seconds): moves
happen on an open-arrival workload, every moved job runs again, and the simulated master
finds no GPU given twice."""

from __future__ import annotations

from pathlib import Path

from dlc.sim.cluster_sim.aistation import build
from dlc.sim.cluster_sim.metrics import measure
from dlc.sim.cluster_sim.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "aistation.yaml"


def test_consolidation_moves_jobs_and_loses_nothing():
    scenario = load_scenario(EXAMPLE)
    for path, value in {"training.outstanding_per_user": 0,
                        "training.open_per_user_per_day": 0.5}.items():  # fmt: skip
        scenario = scenario.with_value(path, value)
    until = 2 * 86400.0
    on = build(scenario, "P0c", seed=1, check_every=50).run(until)
    off = build(scenario, "P0", seed=1).run(until)
    assert on.problems == [] and off.problems == []
    moved, lost = on.consolidation
    assert moved > 0 and lost > 0
    assert off.consolidation == (0, 0.0)
    # every training job preempted (moved) was queued again and runs or ran: none lost
    preempted = [r for r in on.records.values() if r.preemptions]
    assert sum(r.preemptions for r in preempted) == moved  # P0: no other preemption
    # the engine tells moves from other preemptions: here every kill was a move
    assert sum(r.moves for r in preempted) == moved
    assert sum(r.moved_lost_gpu_s for r in preempted) == sum(r.lost_gpu_s for r in preempted) > 0
    assert all(r.state in ("running", "finished", "queued") for r in preempted)
    metrics = measure(on, scenario, 1)
    assert metrics["consolidation_moves_per_week"] > 0
    assert metrics["training_wait_p95_min_8gpu"] is not None
