"""Assembling the docker create arguments of one task (pure)."""

from __future__ import annotations

import pytest

from dlc.executor.container_spec import CAP_ADD, TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuReservation, GpuStyle, render
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume

IDENTITY = TaskIdentity("fw-1", "dlc-executor.t1", "t1", "job-7")


def spec(**overrides):
    base = dict(
        job_id="job-7",
        image="dlc-test/busybox:1",
        command=("sh", "-c", "env"),
        env={"A": "1", "CUDA_VISIBLE_DEVICES": "7"},
        gpu_ids=(2, 0),
        cpus=1.5,
        mem_mib=512,
        workdir="/tmp",
        volumes=(Volume("/data", "/data"), Volume("/scratch", "/scratch", read_only=False)),
        user="alice",
    )
    base.update(overrides)
    return LaunchSpec(**base)


def test_limits_labels_and_security():
    gpu = render(GpuReservation((2, 0), (2, 0)), GpuStyle.TOOLKIT)
    kw = create_kwargs(spec(), IDENTITY, gpu, {"PATH": "/bin"})
    assert kw["nano_cpus"] == 1_500_000_000
    assert kw["mem_limit"] == "512m" and kw["memswap_limit"] == "512m"
    assert kw["labels"] == {
        "dlc.framework_id": "fw-1",
        "dlc.executor": "dlc-executor.t1",
        "dlc.task": "t1",
        "dlc.job": "job-7",
        "dlc.user": "alice",
    }
    assert kw["privileged"] is False
    assert kw["security_opt"] == ["no-new-privileges"]
    assert kw["cap_drop"] == ["ALL"]
    assert set(kw["cap_add"]) == set(CAP_ADD) and "SYS_ADMIN" not in CAP_ADD
    assert kw["user"] == "65534:65534"  # nobody, unless the operator says otherwise
    assert kw["working_dir"] == "/tmp"
    assert kw["command"] == ["sh", "-c", "env"]
    assert "volumes" not in kw  # `-v` would create a missing host path; mounts do not


def test_volumes_are_bind_mounts_read_only_by_default():
    gpu = render(GpuReservation(), GpuStyle.NONE)
    kw = create_kwargs(spec(), IDENTITY, gpu)
    assert kw["mounts"] == [
        {
            "Type": "bind",
            "Source": "/data",
            "Target": "/data",
            "ReadOnly": True,
            "BindOptions": {"Propagation": "rprivate"},
        },
        {
            "Type": "bind",
            "Source": "/scratch",
            "Target": "/scratch",
            "ReadOnly": False,
            "BindOptions": {"Propagation": "rprivate"},
        },
    ]


def test_operator_user_reaches_the_container():
    gpu = render(GpuReservation(), GpuStyle.NONE)
    policy = TaskPolicy(container_user="1000:100")
    assert create_kwargs(spec(policy=policy), IDENTITY, gpu)["user"] == "1000:100"


def test_gpu_env_wins_over_job_env():
    gpu = render(GpuReservation((2, 0), (2, 0)), GpuStyle.TOOLKIT)
    env = create_kwargs(spec(), IDENTITY, gpu)["environment"]
    assert env["A"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "1,0"  # not the job's "7"
    assert env["DLC_JOB_ID"] == "job-7"


@pytest.mark.parametrize(
    ("image_env", "job_env", "expected_path"),
    [
        pytest.param(
            {"PATH": "/opt/conda/bin:/bin"},
            {},
            "/usr/local/nvidia/bin:/opt/conda/bin:/bin",
            id="image-path",
        ),
        pytest.param({}, {"PATH": "/x"}, "/usr/local/nvidia/bin:/x", id="job-path"),
        pytest.param(
            {},
            {},
            "/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            id="default-path",
        ),
    ],
)
def test_legacy_extends_image_path(image_env, job_env, expected_path):
    gpu = render(GpuReservation((0,), (0,), (), "535.1"), GpuStyle.LEGACY)
    env = create_kwargs(spec(env=job_env, gpu_ids=(0,)), IDENTITY, gpu, image_env)["environment"]
    assert env["PATH"] == expected_path
    assert env["LD_LIBRARY_PATH"].startswith("/usr/local/nvidia/lib:/usr/local/nvidia/lib64")


def test_legacy_volume_joins_job_volumes():
    gpu = render(GpuReservation((0,), (0,), (), "535.1"), GpuStyle.LEGACY)
    kw = create_kwargs(spec(gpu_ids=(0,)), IDENTITY, gpu)
    assert kw["volumes"]["nvidia_driver_535.1"] == {"bind": "/usr/local/nvidia", "mode": "ro"}
    assert len(kw["devices"]) == 4


def test_image_default_command_when_empty():
    kw = create_kwargs(spec(command=()), IDENTITY, render(GpuReservation(), GpuStyle.NONE))
    assert "command" not in kw


@pytest.mark.parametrize(
    ("task_id", "name"),
    [
        pytest.param("job-1.task-0", "dlc-job-1.task-0", id="plain"),
        pytest.param("a b/c", "dlc-a-b-c", id="unsafe-characters"),
    ],
)
def test_container_name_is_docker_safe(task_id, name):
    assert TaskIdentity("f", "e", task_id, "j").container_name() == name
