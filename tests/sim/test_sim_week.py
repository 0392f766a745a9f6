"""``bench/sim_week.py --quick`` (one seed, one simulated day, every variant of both
workloads through the real core): the figures it reports behave as the features say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sim_week.py"


def test_quick_week_reports_each_feature_against_its_baseline(tmp_path):
    out = tmp_path / "week.json"
    # two worker processes: the variants are independent (same figures), and the test waits
    cmd = [sys.executable, str(BENCH), "--quick", "--jobs", "2", "--no-fail", "--json", str(out),
           "--md", str(tmp_path / "week.md")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    rows = {(r["workload"], r["variant"]): r["metrics"] for r in data["rows"]}
    assert len(rows) == 11  # AIStation has no gangs: no "no-topology" run there
    for (workload, variant), m in rows.items():
        assert m["problems"] == 0, (workload, variant)
        assert 0.0 < m["allocation"] < 1.0 and 0.25 <= m["jain"] <= 1.0
        if variant in ("no-consolidation", "none"):  # off: nothing moved, nothing lost to it
            assert m["moves"] == 0 and m["lost_gpu_h_consolidation"] == 0.0
    # the same arrivals under every variant of a workload
    for workload in ("aistation", "multinode"):
        assert len({m["jobs"] for (w, _), m in rows.items() if w == workload}) == 1
    on, off = rows[("multinode", "all")], rows[("multinode", "no-topology")]
    assert on["gangs_fit_one_switch"] >= 5
    assert on["gangs_in_one_switch"] >= 0.9 > off["gangs_in_one_switch"]
    assert rows[("multinode", "none")]["gangs_in_one_switch"] < on["gangs_in_one_switch"]
    assert rows[("aistation", "all")]["gangs_in_one_switch"] is None
    assert rows[("multinode", "all")]["wait_p95_min_multinode"] > 0
    found = {t["target"].split(" (pooled")[0]: t for t in data["targets"]}
    assert found["multinode: >= 90% of the gangs that fit one switch placed in one"]["met"]
    table = (tmp_path / "week.md").read_text()
    assert "| gangs that fit one switch placed in one |" in table and "| target |" in table
    # a missed target fails the run unless --no-fail (summarised again from the saved rows)
    missed = any(not t["met"] for t in data["targets"])
    again = subprocess.run([sys.executable, str(BENCH), "--from-rows",
                            str(out.with_suffix(".rows.jsonl"))],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == (1 if missed else 0), again.stderr[-2000:]
