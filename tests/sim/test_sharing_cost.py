"""The sharing-cost simulator: the measured model, blast radius per backend, lost work."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dlc.errors import FieldError
from dlc.sim.sharing import costs
from dlc.sim.sharing.cluster import Cluster
from dlc.sim.sharing.costs import MPS, TIME_SLICING, blast_radius, default_model
from dlc.sim.sharing.engine import FaultSpec, Simulation
from dlc.sim.sharing.policy import parse_policy
from dlc.sim.sharing.runs import simulate, summarise
from dlc.sim.sharing.workload import JobSpec, PodLife, WorkloadSpec
from dlc.sim.trace import NodeSpec

H = 3600.0


def test_cost_model_is_the_measured_figures():
    m = default_model()
    # the table: 8192^3 MPS -0.5%, time-slicing -8%; 1024^3 MPS 1.8-2.0x, TS -38%
    assert m.total(MPS, "large", 4) == pytest.approx(0.995)
    assert m.total(TIME_SLICING, "large", 8) == pytest.approx(0.92)
    assert m.total(MPS, "small", 2) == pytest.approx(1.9)
    assert m.total(TIME_SLICING, "small", 3) == pytest.approx(0.62)
    # DLC's H200 run at 4096^3: k=1/2/4 shim 657.4/638.2/638.2, MPS 648.2/664.4/667.8 (plain 656.9)
    assert m.total(TIME_SLICING, "medium", 2) == pytest.approx(638.2 / 656.9)
    assert m.total(MPS, "medium", 1) == pytest.approx(648.2 / 656.9)
    assert m.total(MPS, "medium", 4) == pytest.approx(667.8 / 656.9)
    # between measured k linear, past the last one the last value holds, alone is 1
    assert m.total(MPS, "medium", 3) == pytest.approx((664.4 + 667.8) / 2 / 656.9)
    assert m.total(MPS, "medium", 16) == pytest.approx(667.8 / 656.9)
    assert m.total(TIME_SLICING, "large", 1) == 1.0
    assert m.rate(TIME_SLICING, "small", 5) == m.total(TIME_SLICING, "small", 5)
    assert all(s["source"] for s in m.sources())
    with pytest.raises(FieldError, match="backend"):
        m.total("mig", "large", 2)


def test_kernel_mix_and_policies_parse_or_name_the_field():
    assert costs.parse_kernel_mix("large=3,small=1") == {
        "large": 0.75,
        "medium": 0.0,
        "small": 0.25,
    }
    with pytest.raises(FieldError, match="--kernel-mix"):
        costs.parse_kernel_mix("huge=1")
    assert parse_policy("tenancy:0.25").mps_fraction == 0.25
    assert parse_policy("tenancy", 0.75).name == "tenancy:0.75"
    with pytest.raises(FieldError, match="--policy"):
        parse_policy("tenancy:2")
    half = parse_policy("tenancy:0.5")
    assert [half.backend_of(i) for i in range(4)] == [TIME_SLICING, MPS, TIME_SLICING, MPS]


def test_blast_radius_per_backend():
    assert sorted(blast_radius(MPS, [3, 5, 7], 5)) == [3, 5, 7]
    assert blast_radius(TIME_SLICING, [3, 5, 7], 5) == [5]


def _job(idx, tenant, milli=500, work_h=10.0, kernel="large"):
    return JobSpec(idx, 0.0, tenant, 1, milli, 1000, 1024, work_h * H, kernel)


def _run(policy, jobs, gpus=1, fault_of=None, hours=2.0, ckpt=30.0):
    """``fault_of``: job index -> running seconds between its faults (others never fault)."""
    node = NodeSpec("n0", 64000, 262144, gpus, "V100M32")
    fault_of = fault_of or {}

    def gap(run):
        return fault_of.get(run.spec.idx, math.inf)

    sim = Simulation([node], jobs, parse_policy(policy), default_model(),
                     FaultSpec(checkpoint_minutes=ckpt), 1, hours, fault_gap=gap)  # fmt: skip
    return sim, sim.run()


def test_an_mps_fault_kills_every_cotenant_and_loses_work_since_the_checkpoint():
    jobs = [_job(0, "a"), _job(1, "b")]
    sim, res = _run("mps-mixed", jobs, fault_of={0: 1.25 * H})
    rate = default_model().rate(MPS, "large", 2)
    assert res.faults == 1
    assert (res.killed_other_tenant, res.killed_same_tenant) == (1, 0)
    # both lose the quarter hour since the 1 h checkpoint, at half a GPU each
    assert res.lost_other_tenant_gpu_h == pytest.approx(0.5 * 0.25 * rate)
    assert res.lost_own_gpu_h == pytest.approx(0.5 * 0.25 * rate)
    # re-queued, placed again at once, and kept the first hour's progress
    assert sim.runs[1].done == pytest.approx(rate * (1.0 + 0.75) * H)
    assert res.allocated_gpu_h == pytest.approx(2 * 0.5 * 2.0)
    assert res.useful_gpu_h == pytest.approx(2 * 0.5 * rate * 1.75)


def test_under_time_slicing_only_the_faulting_share_dies():
    jobs = [_job(0, "a"), _job(1, "b")]
    sim, res = _run("time-slicing", jobs, fault_of={0: 1.25 * H})
    rate = default_model().rate(TIME_SLICING, "large", 2)
    assert (res.faults, res.killed_other_tenant, res.killed_same_tenant) == (1, 0, 0)
    assert res.lost_other_tenant_gpu_h == 0.0
    assert sim.runs[1].done == pytest.approx(rate * 2.0 * H)
    assert res.lost_own_gpu_h == pytest.approx(0.5 * 0.25 * rate)


def test_tenancy_keeps_an_mps_fault_within_its_tenant():
    # all MPS, one tenant per GPU: b's share may not join a's GPU, a2's may
    jobs = [_job(0, "a", 300), _job(1, "a", 300), _job(2, "b", 300)]
    sim, res = _run("tenancy:1", jobs, gpus=2, fault_of={0: 1.25 * H})
    assert sim.runs[0].gpus[0] is sim.runs[1].gpus[0]
    assert sim.runs[2].gpus[0] is not sim.runs[0].gpus[0]
    assert (res.killed_same_tenant, res.killed_other_tenant) == (1, 0)
    # the same jobs with tenants mixing: b's share packs beside a's and dies with it
    _, mixed = _run("mps-mixed", jobs, gpus=2, fault_of={0: 1.25 * H})
    assert (mixed.killed_same_tenant, mixed.killed_other_tenant) == (1, 1)


def test_the_rule_holds_on_a_random_workload(monkeypatch):
    """Every placement under 'tenancy' leaves each MPS GPU with one tenant, and no fault
    reaches another tenant; under 'mps-mixed' the same workload loses other tenants' jobs."""
    nodes = [NodeSpec(f"n{i}", 96000, 786432, 8, "V100M32") for i in range(6)]
    lives = [PodLife(1, m, 4000, 8192, s) for m in (250, 300, 500) for s in (1800, 7200)]
    lives.append(PodLife(2, 1000, 8000, 16384, 3600))
    work = WorkloadSpec(hours=12, nodes=6, tenants=8, load=1.2)
    faults = FaultSpec(fault_rate_per_hour=0.5)
    take = Cluster._take

    def checked(self, job, gpus):
        take(self, job, gpus)
        for gpu in (g for n in self.nodes for g in n.gpus):
            if self.policy.tenancy and gpu.backend == MPS:
                assert len(set(gpu.tenants)) <= 1

    monkeypatch.setattr(Cluster, "_take", checked)
    for seed in (1, 2):
        ruled = simulate(nodes, lives, parse_policy("tenancy:0.5"), seed, work, faults)
        mixed = simulate(nodes, lives, parse_policy("mps-mixed"), seed, work, faults)
        assert ruled.faults > 10 and ruled.killed_other_tenant == 0
        assert ruled.lost_other_tenant_gpu_h == 0.0
        assert mixed.killed_other_tenant > 0


def test_same_seed_same_result_and_paired_summary():
    nodes = [NodeSpec(f"n{i}", 64000, 262144, 4, "T4") for i in range(4)]
    lives = [PodLife(1, 500, 2000, 4096, 3600), PodLife(1, 1000, 4000, 4096, 7200)]
    work = WorkloadSpec(hours=6, nodes=4, tenants=5)
    faults = FaultSpec(fault_rate_per_hour=0.2)
    rows = []
    for seed in (3, 3, 4):
        for p in ("mps-mixed", "time-slicing"):
            res = simulate(nodes, lives, parse_policy(p), seed, work, faults)
            rows.append(res.__dict__.copy())
    assert rows[0] == rows[2] and rows[1] == rows[3]
    assert rows[0] != rows[4]
    from dlc.sim.sharing.runs import row_of

    summary = summarise([row_of(simulate(nodes, lives, parse_policy(p), s, work, faults), 0.0)
                         for s in (3, 4) for p in ("time-slicing", "mps-mixed")])  # fmt: skip
    assert summary["time-slicing"]["useful_vs_baseline_pct"]["mean"] == 0.0
    assert set(summary) == {"time-slicing", "mps-mixed"}


def test_cli_writes_the_table(tmp_path):
    from click.testing import CliRunner

    from dlc.cli.main import cli

    out = tmp_path / "cost.json"
    args = ["simulate", "sharing-cost", "--seeds", "1,2", "--hours", "2", "--nodes", "4",
            "--policy", "mps-mixed,tenancy,time-slicing", "--json", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert list(data["summary"]) == ["mps-mixed", "tenancy:0.5", "time-slicing"]
    assert data["costs"] and len(data["runs"]) == 6
    bad = CliRunner().invoke(cli, [*args[:2], "--policy", "mps-all"])
    assert bad.exit_code != 0 and "--policy" in bad.output and "Traceback" not in bad.output


def test_workload_draws_are_seeded_and_offer_the_load():
    from dlc.sim.sharing.workload import make_jobs

    lives = [PodLife(1, 500, 1000, 1024, 3600)]
    spec = WorkloadSpec(hours=100, load=1.0)
    jobs = make_jobs(lives, 10, spec, np.random.default_rng(5))
    offered = sum(j.gpus * j.work for j in jobs) / (100 * H * 10)
    assert 0.9 < offered < 1.1
    assert jobs == make_jobs(lives, 10, spec, np.random.default_rng(5))
