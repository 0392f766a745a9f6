"""`dlc submit --user` and `dlc logs --tail N` against a running API on loopback."""

from __future__ import annotations

import os
from dataclasses import replace

from dlc.scheduler.jobs.launch_spec import TaskPolicy
from tests.cli.test_submit_cmd import env, offer_json, run  # noqa: F401 (fixture)
from tests.sandboxes import agent_sandbox


def _running_job_with_output(e, core, tmp, text: str) -> str:
    job_id = run(e, "submit", "--image", "x", "--", "train").output.split()[0]
    core.on_offers([offer_json("o1", "a1")])
    sandbox = agent_sandbox(tmp / "agents", f"{job_id}.0.0")
    (sandbox / "stdout").write_text(text)
    task = {"task_id": {"value": f"{job_id}.0.0"}, "agent_id": {"value": "a1"}}
    core.on_status({**task, "state": "TASK_FINISHED"})
    return job_id


def test_logs_tail_prints_only_the_last_lines(env):  # noqa: F811
    e, core, tmp = env
    job_id = _running_job_with_output(e, core, tmp, "".join(f"line {i}\n" for i in range(10)))
    result = run(e, "logs", "--tail", "3", job_id)
    assert result.exit_code == 0, result.output
    assert result.output == "line 7\nline 8\nline 9\n"
    assert run(e, "logs", "--tail", "0", job_id).output == ""


def test_logs_tail_keeps_an_unfinished_last_line(env):  # noqa: F811
    e, core, tmp = env
    job_id = _running_job_with_output(e, core, tmp, "a\nb\nprogress 50%")
    assert run(e, "logs", "--tail", "2", job_id).output == "b\nprogress 50%"


def test_submit_user_runs_as_the_callers_uid(env):  # noqa: F811
    e, core, _ = env
    refused = run(e, "submit", "--image", "x", "--user", "--", "train")
    assert "ask the operator for --allow-job-user" in refused.output
    # the operator allows it (and root, should these tests run as root)
    policy = TaskPolicy(allow_job_user=True, allow_root=True)
    core.config = replace(core.config, executor=replace(core.config.executor, policy=policy))
    result = run(e, "submit", "--image", "x", "--user", "--", "train")
    assert result.exit_code == 0, result.output
    spec = core.store.get_job(result.output.split()[0]).spec
    assert spec.container_user == f"{os.getuid()}:{os.getgid()}"


def test_submit_user_and_container_user_together_are_refused(env):  # noqa: F811
    e, _, _ = env
    result = run(e, "submit", "--image", "x", "--user", "--container-user", "5:5", "--", "t")
    assert result.exit_code != 0
    assert "--user and --container-user" in result.output


def test_volume_help_says_read_only_unless_rw(env):  # noqa: F811
    e, _, _ = env
    text = " ".join(run(e, "submit", "--help").output.split())
    assert "READ-ONLY unless :rw" in text and "--allow-job-user" in text
