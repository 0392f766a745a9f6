"""LogReader finds sandboxes from the operator's roots and DLC's own ids, and never follows a
link below the root (red-team finding 2026-11-26: a forged ``dlc.sandbox`` label, and links in
the sandbox, made the scheduler read other users' and root-only files)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from dlc.api.logs import LogReader
from dlc.errors import DlcError
from dlc.scheduler.jobs.job import Job, JobSpec, TaskPlacement
from tests.sandboxes import FRAMEWORK_ID, agent_sandbox


def _job(tmp_path, task_id="j1.0.0", sandbox=""):
    task = TaskPlacement(task_id, "a1", "host-a1", (0,), state="TASK_RUNNING", sandbox=sandbox)
    job = Job("j1", "alice", JobSpec(image="x"))
    return replace(job, tasks=(task,))


@pytest.fixture
def reader(tmp_path):
    return LogReader(lambda: FRAMEWORK_ID, sandbox_roots=[tmp_path / "agents"])


def test_reads_the_run_that_latest_names(tmp_path, reader):
    run = agent_sandbox(tmp_path / "agents", "j1.0.0")
    (run / "stdout").write_text("mine\n")
    assert reader.read(_job(tmp_path))["data"] == "mine\n"


def test_a_stored_sandbox_path_is_not_used(tmp_path, reader):
    """Jobs stored with a sandbox from an old ``dlc.sandbox`` label read nothing from it."""
    other = tmp_path / "bob-sandbox"
    other.mkdir()
    (other / "stdout").write_text("bob's secret\n")
    got = LogReader(lambda: FRAMEWORK_ID).read
    with pytest.raises(DlcError, match="not registered"):
        got(_job(tmp_path, sandbox=str(other)))
    run = agent_sandbox(tmp_path / "agents", "j1.0.0")
    (run / "stdout").write_text("")  # the job's own output, none yet
    assert reader.read(_job(tmp_path, sandbox=str(other)))["data"] == ""


def test_a_symlinked_stdout_is_refused(tmp_path, reader):
    secret = tmp_path / "root-only"
    secret.write_text("root:x:0:0\n")
    run = agent_sandbox(tmp_path / "agents", "j1.0.0")
    os.symlink(secret, run / "stdout")
    with pytest.raises(DlcError) as err:
        reader.read(_job(tmp_path))
    assert "root:x" not in str(err.value)


def test_latest_pointing_outside_the_runs_folder_is_not_followed(tmp_path, reader):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stdout").write_text("not yours\n")
    run = agent_sandbox(tmp_path / "agents", "j1.0.0")
    latest = run.parent / "latest"
    latest.unlink()
    os.symlink(elsewhere, latest)
    with pytest.raises(DlcError) as err:
        reader.read(_job(tmp_path))  # nothing local: falls to the agent, which is unknown
    assert "not yours" not in str(err.value)


def test_a_symlinked_run_directory_is_not_followed(tmp_path, reader):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stdout").write_text("not yours\n")
    runs = agent_sandbox(tmp_path / "agents", "j1.0.0").parent
    (runs / "latest").unlink()
    os.rmdir(runs / "c0ffee")
    os.symlink(elsewhere, runs / "c0ffee")  # no latest: the emulator's newest-run search
    with pytest.raises(DlcError):
        reader.read(_job(tmp_path))  # nothing local: falls to the agent, which is unknown


def test_an_earlier_attempt_on_another_agent_is_found_by_its_executor_id(tmp_path, reader):
    """``dlc logs --attempt 0`` rebuilds attempt 0's task with the latest attempt's agent (the
    store keeps only that one): attempt 0 ran on a2, so its sandbox is under a2."""
    run = agent_sandbox(tmp_path / "agents", "j1.0.0", agent_id="a2")
    (run / "stdout").write_text("first run, failing\n")
    agent_sandbox(tmp_path / "agents", "j1.1.0", agent_id="a1")
    assert reader.read(_job(tmp_path))["data"] == "first run, failing\n"


def test_an_earlier_attempt_of_a_job_queued_again_is_found_though_no_agent_is_known(
    tmp_path, reader
):
    """Seen on ``dlc local``: a preempted job queued again has no task, so attempt 0's task is
    rebuilt with no agent; what it printed in its grace period is still found under the agent
    that ran it (was: "agent  is not known to the master any more")."""
    from dlc.api.app import attempt_view

    run = agent_sandbox(tmp_path / "agents", "j1.0.0", agent_id="a2")
    (run / "stdout").write_text("got SIGTERM, checkpointing\n")
    queued = replace(Job("j1", "alice", JobSpec(image="x")), attempt=1, tasks=())
    assert reader.read(attempt_view(queued, 0, 0))["data"] == "got SIGTERM, checkpointing\n"


def test_an_attempt_whose_agent_is_unknown_says_so_when_not_found_here(tmp_path, reader):
    from dlc.api.app import attempt_view

    queued = replace(Job("j1", "alice", JobSpec(image="x")), attempt=1, tasks=())
    remote = LogReader(lambda: FRAMEWORK_ID, master_url=lambda: "http://127.0.0.1:9")
    with pytest.raises(DlcError) as raised:
        remote.read(attempt_view(queued, 0, 0))
    assert "agent  " not in str(raised.value)
    assert "attempt 0" in str(raised.value)
