"""Open (Poisson) training arrivals, quotas that scale with the cluster, and the cards-needed
table of the AIStation scenario (seeded, seconds; the sweeps themselves are bench/ runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc.errors import FieldError
from dlc.scheduler.tenancy.policy import DEFAULT_POOL
from dlc.sim.cluster_sim.aistation import TrainingLoop, build, quota_gpus, tenancy
from dlc.sim.cluster_sim.runs import cards_table
from dlc.sim.cluster_sim.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "aistation.yaml"


def _open(rate: float = 0.64, **fields):
    scenario = load_scenario(EXAMPLE)
    values = {"training.outstanding_per_user": 0, "training.open_per_user_per_day": rate}
    for path, value in {**values, **fields}.items():
        scenario = scenario.with_value(path, value)
    return scenario


def _fingerprint(item):
    return (item.submit_at, item.work_s, item.sm, item.spec.gpus, item.spec.nodes)


def test_kth_open_job_is_the_same_under_every_policy():
    """The runs of two policies submit the same open jobs at the same times."""
    scenario = _open(
        4.0, **{"cluster.nodes": 2, "population.groups": 2, "population.users_per_group": 3,
                "training.median_hours": 0.3, "training.open_window_hours": [0, 24]},
    )  # fmt: skip
    submitted = {}
    for policy in ("P0", "P2"):
        result = build(scenario, policy, seed=11).run(0.5 * 86400)
        submitted[policy] = {
            k: (r.submitted, r.work0, r.item.spec.gpus, r.item.spec.nodes)
            for k, r in result.records.items()
            if r.item.kind == "training"
        }
        assert all(k.startswith("o-") for k in submitted[policy])  # closed loop is off
    assert submitted["P0"] == submitted["P2"] and len(submitted["P0"]) >= 6
    # a user's k-th job depends on the seed only: drawn again, it is the same
    loop = TrainingLoop(scenario, 11)
    jobs = loop.open_arrivals(scenario.days)
    again = TrainingLoop(scenario, 11).open_arrivals(scenario.days)
    assert [_fingerprint(j) for j in jobs] == [_fingerprint(j) for j in again]
    other = TrainingLoop(scenario, 12).open_arrivals(scenario.days)
    assert [_fingerprint(j) for j in jobs] != [_fingerprint(j) for j in other]


def test_open_arrivals_beside_the_closed_loop():
    """Both at once: the closed loop resubmits only its own jobs, open jobs do not loop."""
    scenario = _open(1.0, **{"training.outstanding_per_user": 1})
    loop = TrainingLoop(scenario, 5)
    closed, opened = loop.first(), loop.open_arrivals(scenario.days)
    assert len(closed) == 50 and all(j.key.startswith("t-") for j in closed)
    assert opened and all(j.key.startswith("o-") for j in opened)
    assert loop.done(opened[0], 1e5) == []
    [after] = loop.done(closed[0], 1e5)
    assert after.key == "t-u0000-1" and after.submit_at > 1e5


def test_open_rate_window_and_weekdays_are_respected():
    scenario = _open(0.64, **{"training.open_window_hours": [12, 19]})
    counts = []
    for seed in range(1, 21):
        jobs = TrainingLoop(scenario, seed).open_arrivals(14)
        counts.append(len(jobs))
        hours = [(j.submit_at / 3600) % 24 for j in jobs]
        days = {int(j.submit_at // 86400) % 7 for j in jobs}
        assert all(12 <= h < 19 for h in hours) and days <= {0, 1, 2, 3, 4}
    # 20 seeds x 50 users x 10 weekdays x 0.64: 6400 expected, Poisson sd 80
    assert abs(sum(counts) - 6400) < 4 * 80
    every_day = _open(0.5, **{"training.open_weekdays_only": False})
    jobs = TrainingLoop(every_day, 3).open_arrivals(7)
    assert {int(j.submit_at // 86400) for j in jobs} >= {5, 6}
    assert TrainingLoop(_open(0.0), 3).open_arrivals(7) == []


#: field -> (its line in the example, a bad replacement, what the error must say)
_BAD = {
    "open_per_user_per_day": (
        "open_per_user_per_day: 0 ",
        "open_per_user_per_day: -1 ",
        "open_per_user_per_day.*range",
    ),
    "open_window_hours": (
        "open_window_hours: [12, 19]",
        "open_window_hours: [19, 12]",
        "open_window_hours.*start <",
    ),
    "open_weekdays_only": (
        "open_weekdays_only: true",
        "open_weekdays_only: sometimes",
        "open_weekdays_only.*not a b",
    ),
    "scale_with_cluster": (
        "scale_with_cluster: false",
        "scale_with_cluster: 2",
        "quotas.scale_with_cluster.*not a b",
    ),
    "reference_gpus": ("reference_gpus: 32", "reference_gpus: 0", "quotas.reference_gpus.*range"),
}


@pytest.mark.parametrize("field", sorted(_BAD))
def test_bad_open_and_quota_values_name_the_field(tmp_path, field):
    line, replacement, message = _BAD[field]
    text = EXAMPLE.read_text()
    assert line in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(line, replacement))
    with pytest.raises(FieldError, match=message) as err:
        load_scenario(bad)
    assert "\n" not in str(err.value)


def test_quotas_scale_with_the_cluster():
    scenario = load_scenario(EXAMPLE)
    big = scenario.with_value("cluster.nodes", 8)
    assert quota_gpus(big) == (6, 12)  # fixed unless asked
    scaled = big.with_value("quotas.scale_with_cluster", True)
    assert quota_gpus(scaled) == (12.0, 24.0)
    small = scaled.with_value("cluster.nodes", 2)
    assert quota_gpus(small) == (3.0, 6.0)
    policy = tenancy(scaled, scaled.policies["P2"])
    quota = policy.quotas[("g0", DEFAULT_POOL)]
    assert quota.guaranteed.gpus == 12.0 and quota.ceiling.gpus == 24.0
    assert tenancy(scaled, scaled.policies["P0"]) is None


def _row(policy, seed, nodes, both, session=None):
    met = {"slo_met": both, "session_slo_met": both if session is None else session}
    return {"policy": policy, "seed": seed, "sweep": ("cluster.nodes", nodes), "metrics": met}


def test_cards_table_takes_the_first_size_and_pairs_seeds():
    rows = [
        _row("P0", 1, 4, False), _row("P0", 1, 5, True),
        _row("P0", 2, 4, False, True), _row("P0", 2, 5, False), _row("P0", 2, 6, True),
        _row("P2", 1, 3, False), _row("P2", 1, 4, True),
        _row("P2", 2, 3, True),
        _row("P3", 1, 8, False), _row("P3", 2, 8, True),
    ]  # fmt: skip
    table = cards_table(rows, 8, "P0")
    assert table["P0"]["per_seed"][1]["both"] == 40 and table["P0"]["per_seed"][2]["both"] == 48
    assert table["P0"]["per_seed"][2]["session"] == 32
    assert table["P0"]["both_mean"] == 44.0
    # paired by seed: 1 - 32/40 and 1 - 24/48
    assert table["P2"]["fewer_cards_mean"] == pytest.approx((0.2 + 0.5) / 2)
    assert table["P3"]["both_unmet_seeds"] == 1 and table["P3"]["per_seed"][1]["largest_run"] == 64
    assert table["P3"]["fewer_cards_mean"] == pytest.approx(1 - 64 / 48)


def test_a_class_the_workload_lacks_holds_its_slo():
    """Sessions only (no training at all): the training SLO holds, the session one is judged."""
    from dlc.sim.cluster_sim.metrics import measure

    scenario = _open(0.0, **{"cluster.nodes": 1, "population.users_per_group": 2})
    result = build(scenario, "P2", seed=3).run(0.6 * 86400)
    metrics = measure(result, scenario, 3)
    assert metrics["training_completed_per_week"] == 0
    assert metrics["training_slo_met"] is True
    assert metrics["session_slo_met"] == (metrics["session_wait_p95_min"] <= 2.0)
    assert metrics["slo_met"] == metrics["session_slo_met"]


def test_cards_plot_is_written(tmp_path):
    from dlc.sim.cluster_sim.report import cards_markdown, plot_cards

    rows = [_row("P0", 1, 4, False), _row("P0", 1, 5, True), _row("P2", 1, 3, True)]
    found = cards_table(rows, 8, "P0")
    written = plot_cards(found, tmp_path / "cards", "test")
    assert [p.suffix for p in written] == [".png", ".svg"]
    assert all(p.stat().st_size > 0 for p in written)
    table = cards_markdown(found)
    assert "| P2 | 24.0 | 24 | 0 |" in table and "0.40" in table
