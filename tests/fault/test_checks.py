"""The fault suite's accounting rules, on hand-made records (no Docker, no Mesos).

The self-test at the end plants each violation the suite guards against into otherwise clean
inputs and checks that exactly its count moves: a check that cannot see its violation fails
here, not silently in a fault run.
"""

import os
import subprocess
import sys
import time

import pytest

from tests.fault import procs
from tests.fault.checks import Container, KillPoint, PlannedJob, Report, expected_states, judge
from tests.fault.docker_watch import fold
from tests.fault.run import plan_runs

ZERO = {
    "jobs_lost": 0,
    "launched_twice": 0,
    "gpu_conflicts": 0,
    "gpus_unknown": 0,
    "no_container": 0,
    "orphan_containers": 0,
    "executors_left": 0,
    "wrong_state": 0,
}


def _job(name, kind="ok", retries=0, job_id=None, state="finished", at=0.0, kill_answer=None):
    job = PlannedJob(name, kind, 1, retries, 0.5, job_id or name, at, kill_answer)
    job.final = {"state": state, "message": ""}
    return job


def _c(cid, job, task, gpus=(0,), start=1.0, die=2.0, code=0, share=None):
    """A container that started once and (with ``die``) exited ``code``."""
    return Container(cid, job, task, gpus, start, die, share, exit_code=code if die else None,
                     starts=1 if start is not None else 0)  # fmt: skip


def _clean():
    """A run with every kind of job, shares beside whole GPUs, nothing wrong."""
    jobs = [
        _job("a", retries=1),
        _job("b", "fail", 1, state="failed"),
        _job("s1"),
        _job("s2"),
        _job("k", "kill", 1, state="killed", kill_answer="running"),
    ]
    jobs[0].final["tasks"] = [{"task_id": "a.0.0", "gpu_ids": [0]}]
    jobs[2].final["tasks"] = [
        {"task_id": "s1.0.0", "gpu_ids": [], "share_gpu": 3, "share_memory_mib": 4096}
    ]
    containers = [
        _c("c1", "a", "a.0.0", (0,), 1.0, 2.0),
        _c("c2", "b", "b.0.0", (0,), 2.0, 3.0, code=3),  # same GPU, after c1 died
        _c("c3", "b", "b.1.0", (1,), 3.5, 4.0, code=3),
        _c("c4", "s1", "s1.0.0", (), 1.0, 5.0, share=(3, 4096)),
        _c("c5", "s2", "s2.0.0", (), 2.0, 5.0, share=(3, 12288)),  # fills GPU 3 exactly
        _c("c6", "k", "k.0.0", (2,), 1.0, 3.0, code=137),
    ]
    return jobs, containers


def _counts(jobs, containers, kills=(), gpu_mem_mib=16384) -> dict[str, int]:
    return judge(jobs, containers, list(kills), 10.0, 0.0, gpu_mem_mib).zero_counts()


def test_clean_run_counts_nothing():
    jobs, containers = _clean()
    report = judge(jobs, containers, [], end=10.0, t0=0.0)
    assert report.zero_counts() == ZERO, report.details
    assert report.states_right and report.containers == 6 and not report.details


def _planted_lost(jobs, containers):
    jobs[0].final["state"] = "running"


def _planted_fault_ended(jobs, containers):
    # an agent crash while "a" ran ended it for good: not excused, it was never retried
    jobs[0].final["state"] = "lost"
    return [KillPoint("agent", 1.5, 1.0)]


def _planted_twice_overlapping(jobs, containers):
    containers.append(_c("c7", "a", "a.1.0", (5,), 1.5, 2.5))


def _planted_attempt_reused(jobs, containers):
    # attempt 0 of "a" launched again after its first container ended: no overlap at all
    containers.append(_c("c7", "a", "a.0.0", (0,), 6.0, 7.0))


def _planted_restarted(jobs, containers):
    containers[0].starts = 2


def _planted_gpu_double_use(jobs, containers):
    containers.append(_c("c7", "x", "x.0.0", (0, 7), 1.5, 1.8))


def _planted_share_on_whole_gpu(jobs, containers):
    containers.append(_c("c7", "x", "x.0.0", (3,), 4.0, 4.5))


def _planted_shares_overfilled(jobs, containers):
    containers.append(_c("c7", "x", "x.0.0", (), 3.0, 4.0, share=(3, 1024)))


def _planted_gpus_unlabelled(jobs, containers):
    containers[1].gpus = None


def _planted_gpus_misrecorded(jobs, containers):
    jobs[0].final["tasks"] = [{"task_id": "a.0.0", "gpu_ids": [4]}]


def _planted_share_unlabelled(jobs, containers):
    containers[3].share = None  # the scheduler placed s1 on a share of GPU 3


def _planted_finished_without_container(jobs, containers):
    containers[:] = [c for c in containers if c.job_id != "a"]


def _planted_finished_but_exit_nonzero(jobs, containers):
    containers[0].exit_code = 1


def _planted_finished_never_started(jobs, containers):
    containers[0].start, containers[0].starts = None, 0


def _planted_wrong_state(jobs, containers):
    jobs[1].final["state"] = "killed"  # a job whose command exits 3, never killed


PLANTED = {
    "lost job": (_planted_lost, "jobs_lost"),
    "job a fault ended (excused before)": (_planted_fault_ended, "jobs_lost"),
    "two attempts at once": (_planted_twice_overlapping, "launched_twice"),
    "attempt reused without overlap": (_planted_attempt_reused, "launched_twice"),
    "container started twice": (_planted_restarted, "launched_twice"),
    "GPU double use": (_planted_gpu_double_use, "gpu_conflicts"),
    "whole GPU under a share": (_planted_share_on_whole_gpu, "gpu_conflicts"),
    "shares over the GPU's memory": (_planted_shares_overfilled, "gpu_conflicts"),
    "GPUs not labelled": (_planted_gpus_unlabelled, "gpus_unknown"),
    "GPUs not the scheduler's": (_planted_gpus_misrecorded, "gpus_unknown"),
    "share not labelled": (_planted_share_unlabelled, "gpus_unknown"),
    "finished, no container": (_planted_finished_without_container, "no_container"),
    "finished, container failed": (_planted_finished_but_exit_nonzero, "no_container"),
    "finished, container never started": (_planted_finished_never_started, "no_container"),
    "wrong final state": (_planted_wrong_state, "wrong_state"),
}


@pytest.mark.parametrize("what", PLANTED)
def test_each_planted_violation_is_counted_in_its_column(what):
    plant, column = PLANTED[what]
    jobs, containers = _clean()
    kills = plant(jobs, containers) or []
    counts = _counts(jobs, containers, kills)
    assert counts[column] >= 1, (what, counts)
    assert {k: v for k, v in counts.items() if v} == {column: counts[column]}, (what, counts)


def test_leftovers_are_counted():
    report = Report(orphan_containers=1, executor_procs=1, reaper_procs=1)
    counts = report.zero_counts()
    assert counts["orphan_containers"] == 1 and counts["executors_left"] == 2


def test_excused_failure_is_lost_and_named_as_ended_by_a_fault():
    job = _job("a", state="failed", at=1.0, retries=2)
    containers = [_c("c1", "a", "a.0.0", (0,), 1.5, 3.0, code=137)]
    report = judge([job], containers, [KillPoint("agent", 2.0, 1.0)], 10.0, 0.0)
    assert report.jobs_lost == 1 and report.ended_by_fault == 1 and report.wrong_state == 0
    assert any("not retried to finish" in d and "fault in flight" in d for d in report.details)
    scheduler_crash = KillPoint("scheduler", 2.0, 1.0)
    report = judge([job], containers, [scheduler_crash], 10.0, 0.0)
    assert report.jobs_lost == 1 and report.ended_by_fault == 0


def test_relaunch_while_old_container_runs_is_a_double_launch_and_a_gpu_conflict():
    jobs = [_job("a", retries=1)]
    containers = [
        _c("c1", "a", "a.0.0", (0, 1), 1.0, 6.0),
        _c("c2", "a", "a.1.0", (1, 2), 4.0, 5.0),
    ]
    report = judge(jobs, containers, [], end=10.0, t0=0.0)
    assert report.launched_twice == 1
    assert report.gpu_conflicts == 1
    assert any("GPUs 1:" in d and "1.0s together" in d for d in report.details)


def test_a_container_still_running_counts_until_the_end():
    containers = [_c("c1", "a", "a.0.0", (3,), 1.0, None), _c("c2", "b", "b.0.0", (3,), 8.0, 9.0)]
    report = judge([_job("a", state="running"), _job("b")], containers, [], end=10.0, t0=0.0)
    assert report.gpu_conflicts == 1


def test_same_gpu_index_on_two_agents_is_no_conflict():
    a, b = _c("c1", "a", "a.0.0", (3,), 1.0, 5.0), _c("c2", "b", "b.0.0", (3,), 2.0, 4.0)
    a.agent, b.agent = "agent-1", "agent-2"
    assert judge([_job("a"), _job("b")], [a, b], [], 10.0, 0.0).gpu_conflicts == 0


def test_kill_rules():
    assert expected_states(_job("a", "kill", kill_answer="running")) == {"killed"}
    assert expected_states(_job("a", "kill", kill_answer="finished")) == {"finished"}
    assert expected_states(_job("a", "ok")) == {"finished"}


def test_more_attempts_than_retries_allow():
    jobs = [_job("a", "fail", 1, state="failed")]
    containers = [_c(f"c{i}", "a", f"a.{i}.0", (0,), i, i + 0.5, code=3) for i in range(3)]
    assert judge(jobs, containers, [], 10.0, 0.0).over_retries == 1


def test_attempts_ended_by_the_infrastructure_use_no_retry():
    # fail job, retries 1: it failed once, its relaunch was SIGKILLed with its executor
    # (137), a third attempt ended in a dlc local outage unseen, the fourth failed: right
    jobs = [_job("a", "fail", 1, state="failed")]
    codes = [3, 137, 3, 3]
    containers = [
        _c(f"c{i}", "a", f"a.{i}.0", (0,), 3 * i, 3 * i + 0.5, code=codes[i]) for i in range(4)
    ]
    outage = [KillPoint("local", 6.0, 0.6)]  # c2 died at 6.5, while dlc local was down
    assert judge(jobs, containers, outage, 20.0, 0.0).over_retries == 0
    # without the outage the third end was seen: three ends by the command, two allowed
    assert judge(jobs, containers, [], 20.0, 0.0).over_retries == 1

    # an executor killed under c2 (which then exited 3 unseen) excuses it the same way, even
    # when the kill came just before Docker reported the container's start
    def executor(task):
        detail = f"SIGKILL executor pid 7 (dlc-executor.{task})"
        return [KillPoint("executor", 5.9, 0.0, detail, "a")]

    assert judge(jobs, containers, executor("a.2.0"), 20.0, 0.0).over_retries == 0
    assert judge(jobs, containers, executor("a.1.0"), 20.0, 0.0).over_retries == 1


def test_plan_runs_spreads_kills_over_targets_in_chunks():
    runs = plan_runs("all", 13, 2)
    assert sum(n for *_, n in runs) == 13
    assert {(b, t) for b, t, _ in runs} == {
        ("real", "scheduler"),
        ("real", "agent"),
        ("real", "master"),
        ("local", "local"),
        ("real", "executor"),
        ("local", "executor"),
    }
    assert max(n for *_, n in runs) == 2


def test_job_declared_ended_while_its_container_ran():
    job = _job("a", state="failed")
    job.final["ended_at"] = 2.0
    containers = [_c("c1", "a", "a.0.0", (0,), 1.0, 5.0)]
    report = judge([job], containers, [], 10.0, 0.0)
    assert report.ended_while_running == 1
    assert any("ran until t=5.0s" in d for d in report.details)
    job.final["ended_at"] = 4.5
    assert judge([job], containers, [], 10.0, 0.0).ended_while_running == 0


def _event(cid, action, t, **labels):
    attrs = {"dlc.job": "j1", "dlc.task": "j1.0.0", "dlc.framework_id": "fw", **labels}
    return {"id": cid, "Action": action, "timeNano": int(t * 1e9), "Actor": {"Attributes": attrs}}


def test_events_fold_into_containers_with_gpus_shares_and_exit_codes():
    events = [
        _event("c1", "create", 1.0, **{"dlc.gpus": "2,0"}),
        _event("c1", "start", 1.1, **{"dlc.gpus": "2,0"}),
        _event("c1", "die", 2.0, exitCode="0", **{"dlc.gpus": "2,0"}),
        _event("c1", "destroy", 2.1, **{"dlc.gpus": "2,0"}),
        _event("c2", "start", 3.0, **{"dlc.gpus": "", "dlc.gpu_share": "5:4096:0:none"}),
        _event("c3", "start", 3.0),  # no GPU label: unknown, never skipped
        _event("c9", "start", 3.0, **{"dlc.job": "other-run"}),
    ]
    # the live stream and the engine's log both hold c1's start: counted once
    found = {c.container_id: c for c in fold(events + events[1:2], {"j1"})}
    assert set(found) == {"c1", "c2", "c3"}
    c1 = found["c1"]
    assert (c1.gpus, c1.start, c1.die, c1.exit_code, c1.starts) == ((0, 2), 1.1, 2.0, 0, 1)
    assert found["c2"].gpus == () and found["c2"].share == (5, 4096)
    assert found["c3"].gpus is None and found["c3"].share is None


def test_leaked_executor_is_found_without_the_run_marker(tmp_path):
    """The leak check's second source: a process named like an executor working inside the
    run's directory is found although its environment lacks the marker."""
    sandbox = tmp_path / "work" / "sandbox"
    sandbox.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != procs.MARKER}
    leaked = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m dlc executor"],
        cwd=sandbox, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while leaked.pid not in {p.pid for p in procs.under(tmp_path)}:
            assert time.monotonic() < deadline, "the leaked executor was not found"
            time.sleep(0.1)
        assert leaked.pid not in {p.pid for p in procs.run_processes("no-such-run")}
    finally:
        leaked.kill()
        leaked.wait()
    assert leaked.pid not in {p.pid for p in procs.under(tmp_path)}


@pytest.mark.parametrize(
    ("targets", "keeper"), [("executor", True), ("local+executor", True), ("scheduler", False)]
)
def test_a_run_that_kills_executors_keeps_one_alive_through_its_kill_points(
    tmp_path, targets, keeper
):
    """Run 10 of `make fault` seed 2031 failed with 'no live executor to kill' at t=26 s: the
    short jobs had all ended. A keeper job now sleeps through the kill points (killed by the
    harness after the last); the other runs stream as before."""
    from tests.fault.runner import FaultRun

    run = FaultRun("local", targets, 7, 4, tmp_path)
    kept = [j for j in run.jobs if j.kill_after_faults]
    assert bool(kept) is keeper
    if keeper:
        assert run.jobs[0] is kept[0] and kept[0].kind == "kill"
        last = max(at for at, _, _ in run.kill_plan)
        assert kept[0].sleep_s > 10 * last  # it outlives every kill point by far
