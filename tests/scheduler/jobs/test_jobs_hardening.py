"""Hostile and careless specs: bounded, control-free fields, image grammar, registries, policy."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlc.app.service import ServiceConfig
from dlc.errors import DlcError, JobSpecError
from dlc.images.reference import ImageReferenceError, parse_reference
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import MAX_ENV_VALUE, Job, JobSpec, check_registry
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy
from dlc.scheduler.placement.model import Launch, PlacementConfig
from dlc.scheduler.tasks.launch import ExecutorConfig
from dlc.store.sqlite import JobStore


def _refused(body: dict, field: str) -> str:
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict({"image": "busybox", **body})
    text = str(err.value)
    assert err.value.field == field and text.startswith(f"{field}: ")
    assert "\n" not in text and len(text) < 400
    return text


@pytest.mark.parametrize(
    "body, field",
    [
        pytest.param({"env": {"A": "x\0y"}}, "env", id="nul-env-value"),
        pytest.param({"env": ["A=x\0y"]}, "env", id="nul-env-value-list"),
        pytest.param({"env": {"A\0": "x"}}, "env", id="nul-env-key"),
        pytest.param({"env": {"A": "\x1b[2J"}}, "env", id="escape-env-value"),
        pytest.param({"env": {"A": "x" * (MAX_ENV_VALUE + 1)}}, "env", id="huge-env-value"),
        pytest.param({"env": {f"K{i}": "v" for i in range(300)}}, "env", id="many-env"),
        pytest.param({"env": {"A": {"nested": 1}}}, "env", id="env-value-mapping"),
        pytest.param({"command": ["echo", "a\0b"]}, "command", id="nul-arg"),
        pytest.param({"command": "echo \0"}, "command", id="nul-shell-command"),
        pytest.param({"command": ["x"] * 2000}, "command", id="many-args"),
        pytest.param({"name": "a\0b"}, "name", id="nul-name"),
        pytest.param({"name": "x" * 300}, "name", id="huge-name"),
        pytest.param({"gpu_model": "V100\n"}, "gpu_model", id="newline-model"),
        pytest.param({"framework": "py\0torch:2"}, "framework", id="nul-framework"),
        pytest.param({"cuda_version": "12.1; rm"}, "cuda_version", id="bad-cuda"),
        pytest.param({"volumes": ["/data\0x:/d"]}, "volumes", id="nul-volume"),
        pytest.param({"volumes": ["/data/../etc:/d"]}, "volumes", id="dotdot-host"),
        pytest.param({"volumes": ["/data:/d/../.."]}, "volumes", id="dotdot-container"),
        pytest.param({"volumes": ["/data:/"]}, "volumes", id="over-container-root"),
        pytest.param({"volumes": ["/d:/d"] * 100}, "volumes", id="many-volumes"),
        pytest.param({"env": {f"K{i}": "v" * 4000 for i in range(100)}}, "spec", id="huge-spec"),
        pytest.param({1: "x"}, "1", id="non-string-field"),
        pytest.param({"a\nb": "x"}, "'a\\nb'", id="newline-in-field-name"),
    ],
)
def test_hostile_fields_refused_in_one_line(body, field):
    _refused(body, field)


@pytest.mark.parametrize(
    "image",
    [
        "busybox; rm -rf /",
        "bad image",
        "UPPER/case",
        "x" * 300,
        "r.io/a:" + "t" * 200,
        "a@sha256:123",
        "-leading/dash",
        "a//b",
        "host:port:x/a",
    ],
)
def test_bad_image_names_refused(image):
    text = _refused({"image": image}, "image")
    assert "pass --image IMAGE" in text


@pytest.mark.parametrize(
    "image, registry, path",
    [
        ("busybox", "docker.io", "library/busybox"),
        ("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "docker.io", "pytorch/pytorch"),
        ("index.docker.io/nvidia/cuda:12.1.0-base", "docker.io", "nvidia/cuda"),
        ("docker.io/busybox", "docker.io", "library/busybox"),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch"),
        ("127.0.0.1:5000/dlc-test/busybox:1", "127.0.0.1:5000", "dlc-test/busybox"),
        ("localhost/x", "localhost", "x"),
        (f"a@sha256:{'0' * 64}", "docker.io", "library/a"),
    ],
)
def test_reference_grammar_finds_the_registry(image, registry, path):
    ref = parse_reference(image)
    assert (ref.registry, ref.path) == (registry, path)


def test_catalog_images_follow_the_grammar():
    from dlc.images.catalog import load_catalog

    for entry in load_catalog().entries():
        parse_reference(entry.image)


def test_registry_allow_list_at_submit(tmp_path):
    def resolver(spec):
        return spec.image or "nvcr.io/nvidia/pytorch:24.01-py3", None

    policy = TaskPolicy(allowed_registries=("127.0.0.1:5000",))
    config = CoreConfig(
        placement=PlacementConfig("first-fit"), executor=ExecutorConfig(policy=policy)
    )
    core = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    core.submit("alice", JobSpec.from_dict({"image": "127.0.0.1:5000/dlc-test/busybox:1"}))
    with pytest.raises(JobSpecError, match=r"^image: .*registry docker.io, which is not allowed"):
        core.submit("alice", JobSpec.from_dict({"image": "busybox"}))
    with pytest.raises(JobSpecError, match=r"^framework: .*registry nvcr.io"):
        core.submit("alice", JobSpec.from_dict({"framework": "pytorch:24.01"}))


def test_check_registry_with_no_list_allows_any():
    check_registry(JobSpec(image="busybox"), "busybox", ())


def test_policy_reaches_the_launch_spec():
    service = ServiceConfig(
        master="m:5050",
        allowed_volumes=("/srv/a",),
        container_user="1000:1000",
        allowed_registries=("r.io",),
    )
    config = ExecutorConfig(policy=service.task_policy())
    job = Job("j1", "alice", JobSpec.from_dict({"image": "r.io/x:1"}))
    launch = Launch(job_id="j1", task_id="j1.0.0", rank=0, agent_id="a", hostname="h",
                    offer_ids=("o",), gpu_ids=(0,))  # fmt: skip
    info = build_task_info(job, launch, "fw", config)
    spec = LaunchSpec.decode(info["data"])
    assert spec.policy == TaskPolicy(("/srv/a",), "1000:1000", False, ("r.io",))
    assert json.loads(base64.b64decode(info["data"]))["policy"]["container_user"] == "1000:1000"


@pytest.mark.parametrize(
    "user, allow_root, match",
    [
        ("0:0", False, "is root; pass a non-zero UID:GID, or add --allow-root"),
        ("root", False, "--container-user: 'root' is not UID"),
        ("1000:0", False, "is root"),
    ],
)
def test_scheduler_refuses_root_container_user_by_default(user, allow_root, match):
    with pytest.raises(DlcError, match=match):
        ServiceConfig(master="m:5050", container_user=user, allow_root=allow_root)
    assert ServiceConfig(master="m:5050", container_user="0:0", allow_root=True).allow_root


def test_reference_error_is_one_line():
    with pytest.raises(ImageReferenceError) as err:
        parse_reference("a b\nc")
    assert "\n" not in str(err.value)


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_FIELDS = st.sampled_from(sorted(JobSpec.__dataclass_fields__)) | st.text(max_size=8)
_SPEC_DICTS = st.dictionaries(_FIELDS, _VALUES, max_size=8) | st.fixed_dictionaries(
    {"image": st.text(max_size=30) | st.just("busybox")},
    optional={
        "env": st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3),
        "command": st.lists(st.text(max_size=20), max_size=3) | st.text(max_size=20),
        "name": st.text(max_size=20),
        "volumes": st.lists(st.text(max_size=20), max_size=2),
        "gpus": st.integers() | st.text(max_size=4),
        "cpus": st.floats() | st.text(max_size=4),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SPEC_DICTS)
def test_any_dict_is_a_spec_or_a_job_spec_error(data):
    try:
        spec = JobSpec.from_dict(data)
    except JobSpecError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000
        return
    assert JobSpec.from_dict(spec.to_dict()) == spec


def _core(tmp_path, **policy):
    executor = ExecutorConfig(policy=TaskPolicy(**policy))
    config = CoreConfig(placement=PlacementConfig("first-fit"), executor=executor)
    return SchedulerCore(JobStore(tmp_path / "db"), config, lambda spec: (spec.image, None))


def test_job_may_not_choose_its_user_unless_allowed(tmp_path):
    spec = JobSpec.from_dict({"image": "busybox", "container_user": "1000:1000"})
    with pytest.raises(JobSpecError, match=r"^container_user: this cluster does not let jobs"):
        _core(tmp_path).submit("alice", spec)
    job = _core(tmp_path, allow_job_user=True).submit("alice", spec)
    launch = Launch(
        job_id=job.job_id,
        task_id=f"{job.job_id}.0.0",
        rank=0,
        agent_id="a",
        hostname="h",
        offer_ids=("o",),
        gpu_ids=(0,),
    )
    policy = TaskPolicy(allow_job_user=True)
    info = build_task_info(job, launch, "fw", ExecutorConfig(policy=policy))
    assert LaunchSpec.decode(info["data"]).policy.container_user == "1000:1000"


def test_job_asking_for_root_is_refused_without_allow_root(tmp_path):
    spec = JobSpec.from_dict({"image": "busybox", "container_user": "0"})
    with pytest.raises(JobSpecError, match=r"^container_user: 0 is root"):
        _core(tmp_path, allow_job_user=True).submit("alice", spec)
    _core(tmp_path, allow_job_user=True, allow_root=True).submit("alice", spec)


def test_job_user_must_be_numeric():
    _refused({"container_user": "root"}, "container_user")


@pytest.mark.parametrize(
    ("user", "path", "ok"),
    [
        ("alice", "/data/alice/run1", True),
        ("mallory", "/data/alice/run1", False),
        ("mallory", "/data/mallory", True),
        ("..", "/data/x", False),  # a user name that would change the path gets no prefix
        ("alice", "/data/alice/./x", False),
        ("alice", "/shared/x", True),
    ],
)
def test_per_user_volume_prefixes_at_submit(user, path, ok):
    from dlc.errors import JobSpecError
    from dlc.scheduler.jobs.job import JobSpec, check_volumes

    spec = JobSpec.from_dict({"image": "busybox", "volumes": [f"{path}:/d"]})
    allowed = ("/data/{user}", "/shared")
    if ok:
        check_volumes(spec, allowed, user)
    else:
        with pytest.raises(JobSpecError, match="not under an allowed host path"):
            check_volumes(spec, allowed, user)
