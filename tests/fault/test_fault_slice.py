"""CI slice of the fault-injection suite: two seeded kill points per target, all counts zero.

Each case starts a fresh cluster (the real Mesos master+agent with ``dlc scheduler``, or ``dlc
local``), runs a short stream of GPU jobs, injects the faults, lets it settle and asserts the
guarantee: no job lost, none launched twice, no GPU held by two containers at once, no
container or executor left, every final state right. The full run is ``make fault``.
"""

from __future__ import annotations

import pytest

from tests.fault.run import PAIRS
from tests.fault.runner import FaultRun
from tests.real_mesos import ensure_built, venv_env

KILLS = 2
SEED = 10

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _case(backend: str, target: str):
    marks = [pytest.mark.mesos] if backend == "real" else []
    return pytest.param(backend, target, marks=marks, id=f"{backend}-{target}")


@pytest.mark.parametrize(("backend", "target"), [_case(*p) for p in PAIRS["all"]])
def test_faults_leave_no_trace(backend, target, tmp_path):
    if backend == "real":
        ensure_built(venv_env())
    result = FaultRun(backend, target, SEED, KILLS, tmp_path).run()
    report = result.report
    evidence = "\n".join(report.details + [k.detail for k in result.kills] + result.errors)
    assert not result.errors, evidence
    assert len(result.kills) == KILLS
    assert report.jobs and report.containers, evidence
    assert report.zero_counts() == dict.fromkeys(report.zero_counts(), 0), evidence
    assert report.not_submitted == 0 and report.states_right, evidence
