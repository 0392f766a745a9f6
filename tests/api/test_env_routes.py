"""`dlc cp` reads only inside /outputs; the job secret and the workdir fields of a task."""

from __future__ import annotations

import os

import pytest
from starlette.exceptions import HTTPException

from dlc.api.env_routes import read_local_output, safe_output_path
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.placement.model import Launch
from dlc.scheduler.tasks.launch import ExecutorConfig, job_secret
from tests.scheduler.helpers import job


def test_output_paths_stay_inside_outputs():
    assert safe_output_path("/outputs/a/b.txt") == "a/b.txt"
    assert safe_output_path("a/./b.txt") == "a/b.txt"
    for bad in ("..", "../stdout", "a/../../x", "."):
        with pytest.raises(HTTPException):
            safe_output_path(bad)


def test_a_link_planted_in_outputs_does_not_read_the_host(tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (tmp_path / "secret").write_text("host secret")
    (outputs / "ok.txt").write_text("result")
    os.symlink(tmp_path / "secret", outputs / "link")
    assert read_local_output(tmp_path, "ok.txt", 2, 100) == (b"sult", 6)
    with pytest.raises(HTTPException, match="goes through a link"):
        read_local_output(tmp_path, "link", 0, 100)
    with pytest.raises(HTTPException, match="no file /outputs/none"):
        read_local_output(tmp_path, "none", 0, 100)


def test_workdir_job_gets_url_secret_and_workspace():
    spec_job = job("j1", workdir="ab" * 16)
    launch = Launch(
        job_id="j1",
        task_id="j1.1.0",
        rank=0,
        agent_id="a1",
        hostname="h1",
        offer_ids=("o1",),
        gpu_ids=(0,),
    )
    config = ExecutorConfig(api_url="http://10.0.0.5:8642", job_key="k")
    spec = LaunchSpec.decode(build_task_info(spec_job, launch, None, config)["data"])
    assert spec.workdir == "/workspace"
    assert spec.workdir_url == "http://10.0.0.5:8642/agent/v1/jobs/j1/workdir"
    assert spec.job_secret == job_secret("k", "j1") != job_secret("k", "j2")
    plain = LaunchSpec.decode(build_task_info(job("j2"), launch, None, config)["data"])
    assert plain.workdir is None and plain.workdir_url == ""


def test_a_workdir_that_is_not_a_snapshot_id_is_refused_in_one_line():
    from dlc.errors import JobSpecError
    from dlc.scheduler.jobs.job import JobSpec

    with pytest.raises(JobSpecError, match="not a snapshot id; pass a directory with"):
        JobSpec.from_dict({"image": "busybox", "workdir": "/home/me/code"})
