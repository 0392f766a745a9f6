"""The Mesos-driven simulator's own invariants, on a small seeded slice (seconds).

The slice runs DLC's scheduler core through the simulated master: no GPU is given twice
(the RANGES and gpu_ids of live tasks never overlap, nothing goes negative, free + used ==
total), every submitted item ends up accounted for, the virtual clock never goes back, and
a seed gives the same results twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc.errors import FieldError
from dlc.sim.cluster_sim.aistation import agents, build
from dlc.sim.cluster_sim.master import SimMaster
from dlc.sim.cluster_sim.metrics import measure
from dlc.sim.cluster_sim.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "aistation.yaml"
STATES = {"finished", "running", "queued", "failed", "withdrawn", "killed", "lost"}


def _small():
    scenario = load_scenario(EXAMPLE)
    for path, value in (
        ("cluster.nodes", 2),
        ("population.groups", 2),
        ("population.users_per_group", 4),
        ("quotas.guaranteed_gpus", 4),
        ("quotas.ceiling_gpus", 10),
        ("training.median_hours", 0.5),
        ("sessions.median_hours", 0.5),
        ("engine.tick_s", 600),
    ):
        scenario = scenario.with_value(path, value)
    return scenario


@pytest.mark.parametrize("policy", ["P0", "P2w", "P3"])
def test_slice_keeps_the_invariants(policy):
    scenario = _small()
    engine = build(scenario, policy, seed=7, check_every=1)
    result = engine.run(0.5 * 86400)
    assert result.rounds > 20
    assert result.problems == []  # master checked after every round: nothing given twice
    assert result.refused == 0  # the core never asked for more than an offer held
    assert sum(result.states.values()) == len(result.records) > 0
    assert set(result.states) <= STATES
    running = {r.job_id for r in result.records.values() if r.state == "running"}
    live = {t.task_id.split("-")[0] for t in engine.master.tasks.values()}
    assert running and all(any(t.startswith(j) for t in engine.master.tasks) for j in running)
    assert live  # tasks still hold resources at the end, and each belongs to a running job
    for record in result.records.values():
        if record.state == "finished":
            assert record.first_start is not None and record.ended >= record.first_start
    # the jobs as the core's store sees them agree with the records
    stored = {j.job_id: j.state.value for j in engine.store.list_jobs()}
    for record in result.records.values():
        if record.job_id is not None and record.state in ("finished", "queued"):
            assert stored[record.job_id] == record.state


def test_preemption_is_counted_and_shares_pack():
    # groups guaranteed half the cluster each: a session of a group at its share stops
    # that group's own training (preempt_within)
    scenario = (
        _small().with_value("quotas.guaranteed_gpus", 8).with_value("quotas.ceiling_gpus", 16)
    )
    result = build(scenario, "P2w", seed=7).run(0.5 * 86400)
    metrics = measure(result, scenario, 7)
    assert metrics["preemptions_per_week"] > 0
    assert metrics["preempted_gpu_h_lost_per_week"] > 0
    assert metrics["tenants_ge_2_share"] > 0  # 4 GB shares share cards
    assert metrics["allocation_ratio"] <= 1.0
    assert 0.0 <= metrics["sm_activity"] <= 1.0


def test_same_seed_same_results():
    def run():
        metrics = measure(build(_small(), "P2", seed=3).run(0.45 * 86400), _small(), 3)
        metrics.pop("round_ms_mean")  # wall time, not a result
        return metrics

    assert run() == run()


def test_clock_going_back_is_reported():
    engine = build(_small(), "P0", seed=1)
    engine.now = 100.0
    engine._at(50.0, "tick")  # clamped to now: events are never scheduled in the past
    assert engine._events[0][0] >= 100.0
    engine._events.clear()
    import heapq

    heapq.heappush(engine._events, (10.0, 0, "tick", None))
    result = engine.run(200.0)
    assert any("clock went back" in p for p in result.problems)


def test_master_refuses_what_is_not_free():
    master = SimMaster(agents(_small()))
    offer = master.offers()[0]
    agent_id = offer["agent_id"]["value"]
    before = master.free[agent_id]
    info = {
        "task_id": {"value": "x"},
        "agent_id": {"value": agent_id},
        "resources": [{"name": "gpus", "type": "SCALAR", "scalar": {"value": 99.0}}],
    }
    [(task, why)] = master.launch([offer["id"]["value"]], [info])
    assert task is None and "more than free" in why
    assert master.free[agent_id] == before and master.refused == 1


def test_bad_field_names_field_and_fix(tmp_path):
    text = EXAMPLE.read_text().replace("median_hours: 2.0", "median_hours: -1")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(FieldError, match="sessions.median_hours.*out of range"):
        load_scenario(bad)
    with pytest.raises(FieldError, match="--sweep"):
        _small().with_value("sessions.nope", 1)


def test_cli_runs_a_scenario_and_writes_results(tmp_path):
    import json

    from click.testing import CliRunner

    from dlc.cli.main import cli

    args = ["simulate", "scenario", str(EXAMPLE), "--policy", "P0,P2", "--seeds", "1",
            "--days", "0.01", "--out", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "allocated h / card / day" in result.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert [r["policy"] for r in data["runs"]] == ["P0", "P2"]
    assert (tmp_path / "aistation-0.png").is_file()
    bad = CliRunner().invoke(cli, [*args[:3], "--sweep", "nodes=2"])
    assert bad.exit_code != 0 and "--sweep" in bad.output and "Traceback" not in bad.output


def test_interval_is_student_t():
    from dlc.sim.cluster_sim.runs import mean_ci

    mean, half = mean_ci([1.0, 2.0, 3.0, None])
    assert mean == 2.0 and abs(half - 4.303 / 3**0.5) < 1e-9
    assert mean_ci([5.0]) == (5.0, None) and mean_ci([None]) == (None, None)


def test_a_policy_turns_fair_share_over_time_on_by_its_half_life():
    from dlc.sim.cluster_sim.aistation import core_config

    # the P0-P4 figures were measured without it: a policy that names none runs without
    assert core_config({"allocator": "first-fit"}).fair_share_half_life_s == 0.0
    assert core_config({"fair_share_half_life_s": 3600}).fair_share_half_life_s == 3600.0


def test_a_policy_names_protected_runtimes_as_the_flag_does():
    import yaml

    from dlc.errors import DlcError
    from dlc.sim.cluster_sim.aistation import core_config
    from dlc.sim.cluster_sim.scenario import parse_scenario

    rules = core_config({"protect": "normal=30m, low=5m:10s"}).protection.by_class
    assert (rules["normal"].min_runtime_s, rules["low"].evict_delay_s) == (1800.0, 10.0)
    assert core_config({}).protection.by_class == {}
    data = yaml.safe_load(EXAMPLE.read_text())
    data["policies"] = {"P9": {"protect": "nobody=30m"}}
    with pytest.raises(DlcError, match="CLASS=MIN_RUNTIME"):
        parse_scenario(data)
