"""``bench/sim_racks.py`` runs and shows the switch preference at work (a small, seeded run:
16 openb agents in 4 switches and 2 racks, 12 simulated hours)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sim_racks.py"


def test_gangs_that_fit_a_switch_are_placed_in_one_only_with_the_preference(tmp_path):
    out = tmp_path / "racks.json"
    cmd = [sys.executable, str(BENCH), "--agents", "16", "--hours", "12", "--seeds", "7",
           "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    on, off = json.loads(out.read_text())["runs"]
    assert (on["preference"], off["preference"]) == (True, False)
    assert on["gangs"] == off["gangs"] > 10 and on["problems"] == off["problems"] == 0
    share = on["fit_placed_one_switch"] / on["fit_one_switch"]
    assert share >= 0.9, on
    assert off["fit_placed_one_switch"] / off["fit_one_switch"] < share
    assert "| all | on |" in done.stdout
