"""The API and quota benches measure what they claim and fail when a target is missed:
``bench/api_load.py`` sends as many users as requests (one token each) and counts 429s apart
from errors; ``bench/quota.py --quick`` runs a whole round and checks it placed something."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(tmp_path: Path, script: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"{script}.json"
    cmd = [sys.executable, str(BENCH / f"{script}.py"), *args, "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    return done, json.loads(out.read_text())


def test_api_load_sends_one_user_per_request_and_meets_its_targets(tmp_path):
    done, data = _run(tmp_path, "api_load", "--concurrency", "80")
    assert done.returncode == 0, done.stderr
    assert data["users"] == 80 and data["per_user"] == 1
    for name, phase in data["phases"].items():
        assert phase["requests"] == 80, name
        assert phase["errors"] == 0 and phase["throttled"] == 0, (name, phase)
    assert data["missed"] == []


def test_api_load_counts_429_apart_from_errors(tmp_path):
    # 100 requests at once from one user: the server's 64-per-user guard answers 429, which
    # is the guard working (the user asked for more than the cap), not an error
    done, data = _run(tmp_path, "api_load", "--concurrency", "100", "--per-user", "100")
    submit = data["phases"]["submit"]
    assert data["users"] == 1
    assert submit["throttled"] > 0 and submit["errors"] == 0, submit
    assert 429 not in submit["error_statuses"]
    assert done.returncode == 0 and data["missed"] == []


def test_api_load_fails_on_errors_and_on_429_within_the_cap():
    sys.path.insert(0, str(BENCH))
    try:
        import api_load
    finally:
        sys.path.remove(str(BENCH))
    ok = {"errors": 0, "throttled": 0, "error_statuses": []}
    assert api_load._missed({"submit": ok}, per_user=1) == []
    errors = {**ok, "errors": 3, "error_statuses": [0, 500]}
    assert "3 errors" in api_load._missed({"submit": errors}, per_user=1)[0]
    throttled = {**ok, "throttled": 5}
    assert "429" in api_load._missed({"kill": throttled}, per_user=1)[0]
    assert api_load._missed({"kill": throttled}, per_user=100) == []


def test_quota_quick_times_a_round_that_places_jobs(tmp_path):
    done, data = _run(tmp_path, "quota", "--quick")
    assert done.returncode == 0, done.stderr
    assert data["jobs"] == 1000 and data["agents"] == 100
    assert data["admitted"] > 0 and data["launches"] > 0
    assert data["missed"] == []
