"""The fault suite's accounting rules, on hand-made records (no Docker, no Mesos)."""

from tests.fault.checks import Container, KillPoint, PlannedJob, expected_states, judge
from tests.fault.run import plan_runs


def _job(name, kind="ok", retries=0, job_id=None, state="finished", at=0.0, kill_answer=None):
    job = PlannedJob(name, kind, 1, retries, 0.5, job_id or name, at, kill_answer)
    job.final = {"state": state, "message": ""}
    return job


def test_clean_run_counts_nothing():
    jobs = [_job("a"), _job("b", "fail", 1, state="failed")]
    containers = [
        Container("c1", "a", "a.0.0", (0,), 1.0, 2.0),
        Container("c2", "b", "b.0.0", (0,), 2.0, 3.0),  # same GPU, after c1 died
        Container("c3", "b", "b.1.0", (1,), 3.5, 4.0),
    ]
    report = judge(jobs, containers, [], end=10.0, t0=0.0)
    assert report.zero_counts() == dict.fromkeys(report.zero_counts(), 0)
    assert report.states_right and report.containers == 3


def test_relaunch_while_old_container_runs_is_a_double_launch_and_a_gpu_conflict():
    jobs = [_job("a", retries=1)]
    containers = [
        Container("c1", "a", "a.0.0", (0, 1), 1.0, 6.0),
        Container("c2", "a", "a.1.0", (1, 2), 4.0, 5.0),
    ]
    report = judge(jobs, containers, [], end=10.0, t0=0.0)
    assert report.launched_twice == 1
    assert report.gpu_conflicts == 1
    assert any("GPUs 1:" in d and "1.0s together" in d for d in report.details)


def test_a_container_still_running_counts_until_the_end():
    containers = [
        Container("c1", "a", "a.0.0", (3,), 1.0, None),
        Container("c2", "b", "b.0.0", (3,), 8.0, 9.0),
    ]
    report = judge([_job("a"), _job("b")], containers, [], end=10.0, t0=0.0)
    assert report.gpu_conflicts == 1


def test_stuck_and_missing_jobs_are_lost():
    jobs = [_job("a", state="running"), _job("b")]
    jobs[1].final = None
    assert judge(jobs, [], [], 10.0, 0.0).jobs_lost == 2


def test_failed_ok_job_is_wrong_unless_a_task_ending_fault_hit_it():
    job = _job("a", state="failed", at=1.0)
    containers = [Container("c1", "a", "a.0.0", (0,), 1.5, 3.0)]
    assert judge([job], containers, [], 10.0, 0.0).wrong_state == 1
    agent_crash = KillPoint("agent", 2.0, 1.0)
    assert judge([job], containers, [agent_crash], 10.0, 0.0).wrong_state == 0
    scheduler_crash = KillPoint("scheduler", 2.0, 1.0)
    assert judge([job], containers, [scheduler_crash], 10.0, 0.0).wrong_state == 1


def test_kill_rules():
    assert expected_states(_job("a", "kill", kill_answer="running"), hit=False) == {"killed"}
    ended = _job("a", "kill", kill_answer="finished")
    assert expected_states(ended, hit=False) == {"finished"}


def test_more_attempts_than_retries_allow():
    jobs = [_job("a", "fail", 1, state="failed")]
    containers = [Container(f"c{i}", "a", f"a.{i}.0", (0,), i, i + 0.5) for i in range(3)]
    assert judge(jobs, containers, [], 10.0, 0.0).over_retries == 1


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
    containers = [Container("c1", "a", "a.0.0", (0,), 1.0, 5.0)]
    report = judge([job], containers, [], 10.0, 0.0)
    assert report.ended_while_running == 1
    assert any("ran until t=5.0s" in d for d in report.details)
    job.final["ended_at"] = 4.5
    assert judge([job], containers, [], 10.0, 0.0).ended_while_running == 0
