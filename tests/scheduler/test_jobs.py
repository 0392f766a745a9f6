"""Job spec validation: every bad field gets a JobSpecError naming it."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.jobs import (
    JobSpec,
    JobState,
    VolumeSpec,
    check_volumes,
    job_id_of_task,
    job_state_from_task_state,
)


@pytest.mark.parametrize(
    "body, field",
    [
        pytest.param({}, "framework", id="no-image-source"),
        pytest.param({"framework": "pytorch"}, "framework", id="framework-without-version"),
        pytest.param({"image": "x", "gpus": 0}, "gpus", id="zero-gpus"),
        pytest.param({"image": "x", "gpus": "two"}, "gpus", id="gpus-not-number"),
        pytest.param({"image": "x", "gpus": True}, "gpus", id="gpus-bool"),
        pytest.param({"image": "x", "cpus": 0}, "cpus", id="zero-cpus"),
        pytest.param({"image": "x", "mem_mib": 1}, "mem_mib", id="tiny-memory"),
        pytest.param({"image": "x", "nodes": 0}, "nodes", id="zero-nodes"),
        pytest.param({"image": "x", "command": 3}, "command", id="command-not-list"),
        pytest.param({"image": "x", "env": {"1BAD": "x"}}, "env", id="bad-env-name"),
        pytest.param({"image": "x", "env": ["NOEQUALS"]}, "env", id="env-list-without-equals"),
        pytest.param({"image": "x", "volumes": ["rel:/data"]}, "volumes", id="relative-volume"),
        pytest.param({"image": "x", "volumes": ["/a:/b:rx"]}, "volumes", id="bad-volume-mode"),
        pytest.param({"image": "x", "retries": -1}, "retries", id="negative-retries"),
        pytest.param({"image": "x", "gpu": 1}, "gpu", id="unknown-field"),
        pytest.param({"image": "x", "name": "bad name"}, "name", id="name-with-space"),
        pytest.param([], "spec", id="not-a-mapping"),
    ],
)
def test_bad_spec_names_field(body, field):
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict(body)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_spec_round_trips_through_dict():
    spec = JobSpec.from_dict(
        {
            "framework": "tensorflow:2.15",
            "gpus": "2",
            "command": "python a.py && echo done",
            "env": ["A=1", "B=x=y"],
            "volumes": ["/data:/data", "/scratch:/s:rw"],
            "priority": 3,
        }
    )
    assert spec.command == ("sh", "-c", "python a.py && echo done")
    assert spec.env == {"A": "1", "B": "x=y"}
    assert spec.volumes == (VolumeSpec("/data", "/data"), VolumeSpec("/scratch", "/s", False))
    assert JobSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    "host, allowed, ok",
    [
        pytest.param("/data/set1", ("/data",), True, id="under-prefix"),
        pytest.param("/data", ("/data/",), True, id="prefix-itself"),
        pytest.param("/database", ("/data",), False, id="sibling-with-same-start"),
        pytest.param("/data/../etc", ("/data",), False, id="dotdot-escape"),
        pytest.param("/data", (), False, id="nothing-allowed"),
    ],
)
def test_volume_allow_list(host, allowed, ok):
    spec = JobSpec(image="x", volumes=(VolumeSpec(host, "/in"),))
    if ok:
        check_volumes(spec, allowed)
    else:
        with pytest.raises(JobSpecError, match="volumes: .*allowed"):
            check_volumes(spec, allowed)


@pytest.mark.parametrize(
    "task_state, job_state",
    [
        ("TASK_STARTING", JobState.STAGING),
        ("TASK_RUNNING", JobState.RUNNING),
        ("TASK_KILLING", JobState.RUNNING),
        ("TASK_FINISHED", JobState.FINISHED),
        ("TASK_ERROR", JobState.FAILED),
        ("TASK_KILLED", JobState.KILLED),
        ("TASK_UNREACHABLE", JobState.LOST),
        ("SOMETHING_NEW", JobState.LOST),
    ],
)
def test_task_state_mapping(task_state, job_state):
    assert job_state_from_task_state(task_state) is job_state


@pytest.mark.parametrize(
    "task_id, parsed",
    [
        ("jab12.0.0", ("jab12", 0)),
        ("j.x.3.1", ("j.x", 3)),
        ("foreign-task", None),
        ("j.a.0", None),
    ],
)
def test_job_id_of_task(task_id, parsed):
    assert job_id_of_task(task_id) == parsed
