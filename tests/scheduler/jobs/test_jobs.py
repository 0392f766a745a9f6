"""Job spec validation: every bad field gets a JobSpecError naming it."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.jobs.job import (
    JobSpec,
    JobState,
    VolumeSpec,
    check_volumes,
    job_id_of_task,
    job_state_from_task_state,
)


@pytest.mark.parametrize(
    "body, field, fix",
    [
        pytest.param({}, "framework", "; pass --framework NAME:VERSION", id="no-image-source"),
        pytest.param(
            {"framework": "pytorch"}, "framework", "; pass --framework NAME:VERSION, e.g.",
            id="framework-without-version",
        ),
        pytest.param(
            {"image": "x", "gpus": -1}, "gpus",
            "must be between 0 and 64, got -1; pass --gpus N with 0 <= N <= 64", id="negative-gpus",
        ),
        pytest.param(
            {"image": "x", "gpus": "two"}, "gpus", "; pass --gpus N with 0 <= N <= 64",
            id="gpus-not-number",
        ),
        pytest.param({"image": "x", "gpus": True}, "gpus", "; pass --gpus N with", id="gpus-bool"),
        pytest.param(
            {"image": "x", "cpus": 0}, "cpus", "; pass --cpus N with 0.01 <= N <= 1024",
            id="zero-cpus",
        ),
        pytest.param(
            {"image": "x", "mem_mib": 1}, "mem_mib", "; pass --mem MIB with 32 <= MIB <= ",
            id="tiny-memory",
        ),
        pytest.param(
            {"image": "x", "disk_mib": -1}, "disk_mib", "; set disk_mib: N in the spec file with",
            id="spec-file-only-field",
        ),
        pytest.param(
            {"image": "x", "nodes": 0}, "nodes", "; pass --nodes N with 1 <= N <= 1024",
            id="zero-nodes",
        ),
        pytest.param(
            {"image": "x", "command": 3}, "command", "; put the command after `--`",
            id="command-not-list",
        ),
        pytest.param(
            {"image": "x", "env": {"1BAD": "x"}}, "env", "; use letters, digits and '_'",
            id="bad-env-name",
        ),
        pytest.param(
            {"image": "x", "env": ["NOEQUALS"]}, "env", "; pass -e KEY=VALUE",
            id="env-list-without-equals",
        ),
        pytest.param(
            {"image": "x", "volumes": ["rel:/data"]}, "volumes",
            "; pass -v /HOST:/CONTAINER[:ro|rw]", id="relative-volume",
        ),
        pytest.param(
            {"image": "x", "volumes": ["/a:/b:rx"]}, "volumes", "; end it with :ro or :rw",
            id="bad-volume-mode",
        ),
        pytest.param(
            {"image": "x", "retries": -1}, "retries", "; pass --retries N with 0 <= N <= 100",
            id="negative-retries",
        ),
        pytest.param(
            {"image": "x", "gpu": 1}, "gpu", "; fix its spelling or remove it", id="unknown-field"
        ),
        pytest.param(
            {"image": "x", "name": "bad name"}, "name", "; pass --name NAME with up to 63",
            id="name-with-space",
        ),
        pytest.param(
            {"image": "x", "gpu_model": 100}, "gpu_model", "; pass --gpu-model MODEL",
            id="model-not-string",
        ),
        pytest.param([], "spec", "; write one `field: value` per line", id="not-a-mapping"),
    ],
)  # fmt: skip
def test_bad_spec_names_field_and_fix(body, field, fix):
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict(body)
    text = str(err.value)
    assert err.value.field == field
    assert text.startswith(f"{field}: ")
    assert fix in text and "\n" not in text


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


def test_gpus_zero_is_a_cpu_only_job():
    spec = JobSpec.from_dict({"image": "busybox:1", "gpus": 0, "cpus": 4})
    assert (spec.gpus, spec.is_cpu_only, spec.is_share, spec.total_gpus) == (0, True, False, 0)
    assert not JobSpec.from_dict({"image": "busybox:1", "gpus": 0.5}).is_cpu_only
    with pytest.raises(JobSpecError, match="^gpu_model: a CPU-only job"):
        JobSpec.from_dict({"image": "busybox:1", "gpus": 0, "gpu_model": "V100"})
