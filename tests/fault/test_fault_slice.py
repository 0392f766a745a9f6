"""CI slice of the fault-injection suite: two seeded kill points per target, all counts zero.

One run per cluster (to save start-ups on a small CI machine): the real Mesos master+agent
with ``dlc scheduler`` takes scheduler, agent, master and executor faults in turn; ``dlc local``
takes ``dlc local`` and executor faults. Each run streams short GPU jobs, injects the faults,
lets everything settle and asserts the guarantee: no job lost, none launched twice, no GPU held
by two containers at once, no container or executor left, every final state right. The full
run is ``make fault`` (docs/fault-tolerance.md).
"""

from __future__ import annotations

import pytest

from tests.fault.runner import FaultRun
from tests.real_mesos import ensure_built, venv_env

KILLS_PER_TARGET = 2
SEED = 10
CASES = [
    pytest.param("real", "scheduler+agent+master+executor", marks=pytest.mark.mesos, id="real"),
    pytest.param("local", "local+executor", id="local"),
]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize(("backend", "targets"), CASES)
def test_faults_leave_no_trace(backend, targets, tmp_path):
    if backend == "real":
        ensure_built(venv_env())
    kills = KILLS_PER_TARGET * len(targets.split("+"))
    result = FaultRun(backend, targets, SEED, kills, tmp_path).run()
    report = result.report
    evidence = "\n".join(
        report.details
        + [f"t={k.at - result.t0:.1f}s {k.detail}" for k in result.kills]
        + result.errors
    )
    assert not result.errors, evidence
    assert len(result.kills) == kills
    assert report.jobs and report.containers, evidence
    assert report.zero_counts() == dict.fromkeys(report.zero_counts(), 0), evidence
    assert report.not_submitted == 0 and report.states_right, evidence
