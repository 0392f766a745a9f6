"""Red-team #15: what submit accepts, the agent accepts, and what one refuses, both refuse.

Each case goes through the scheduler's check (:meth:`JobSpec.from_dict` and the registry
check of :func:`core.submit`) and through the agent's (:mod:`dlc.executor.host_paths`, on a
real directory under an allowed prefix); the two verdicts must be the same. Both sides call
:mod:`dlc.scheduler.jobs.spec_rules` and :mod:`dlc.images.reference`.
"""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.executor.host_paths import MountRefused, TaskRefused, check_image, checked_spec
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.jobs.job import JobSpec, check_registry, check_volumes
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume


@pytest.fixture
def data(tmp_path):
    root = tmp_path.resolve() / "data"
    (root / "d").mkdir(parents=True)
    return root


def _submit_volume(host: str, target: str) -> str | None:
    try:
        JobSpec.from_dict({"image": "busybox:1", "volumes": [f"{host}:{target}"]})
    except JobSpecError as exc:
        assert exc.field == "volumes" and "\n" not in str(exc)
        return str(exc)
    return None


def _agent_volumes(data, *targets: str) -> str | None:
    policy = TaskPolicy(allowed_volumes=(str(data),))
    volumes = tuple(Volume(f"{data}/d", t) for t in targets)
    try:
        checked_spec(LaunchSpec(job_id="j", image="busybox:1", volumes=volumes, policy=policy))
    except MountRefused as exc:
        assert "\n" not in str(exc)
        return str(exc)
    return None


REFUSED_TARGETS = [
    "/proc", "/proc/sys", "//proc", "/proc/", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm",
    "/etc", "/etc/", "/etc/hosts", "/etc/resolv.conf", "/usr", "/bin", "/lib64", "/run",
    "/", "//", "/a/./d", "/a/../proc", "/outputs", "/workspace/x", "/usr/local/nvidia",
]  # fmt: skip
ACCEPTED_TARGETS = ["/data", "/w", "/etc/myapp", "/tmp/x", "/usr/local/share/x", "/home/me"]


@pytest.mark.parametrize("target", REFUSED_TARGETS)
def test_reserved_container_paths_are_refused_at_submit_and_on_the_agent(data, target):
    at_submit = _submit_volume(f"{data}/d", target)
    on_agent = _agent_volumes(data, target)
    assert at_submit is not None and on_agent is not None
    assert "the container path" in at_submit and "the container path" in on_agent


@pytest.mark.parametrize("target", ACCEPTED_TARGETS)
def test_ordinary_container_paths_pass_both(data, target):
    assert _submit_volume(f"{data}/d", target) is None
    assert _agent_volumes(data, target) is None


def test_two_volumes_at_one_path_are_refused_by_both(data):
    with pytest.raises(JobSpecError, match="two volumes are mounted at /w"):
        JobSpec.from_dict({"image": "x", "volumes": [f"{data}/d:/w", f"{data}/d:/w/"]})
    assert "two volumes are mounted at /w" in _agent_volumes(data, "/w", "/w/")


@pytest.mark.parametrize(
    "host, reason",
    [
        ("/run", "it contains DLC's MPS pipes /run/dlc-mps"),
        ("/", "it contains DLC's MPS pipes /run/dlc-mps"),
        ("/etc", "it contains DLC's settings and keys /etc/dlc"),
        ("/var/lib", "it contains DLC's scheduler store /var/lib/dlc"),
        # session 14 (finding 61): the host's kernel views and shared memory
        ("/proc", "it is the host's process table /proc"),
        ("/proc/1", "it lies inside the host's process table /proc"),
        ("/sys/fs/cgroup", "it lies inside the host's kernel and device tree /sys"),
        ("/dev", "it contains the host's shared memory (GPU shares' MPS segments) /dev/shm"),
    ],
)
def test_a_volume_holding_dlc_state_is_refused_by_both_in_the_same_words(host, reason):
    # the session-13 finding: an operator's --allow-volume / (or /run) let jobs mount it
    fix = "mount a directory that does not hold DLC's state"
    with pytest.raises(JobSpecError) as at_submit:
        check_volumes(JobSpec.from_dict({"image": "x", "volumes": [f"{host}:/h"]}), ("/",))
    assert str(at_submit.value) == f"volumes: {host}: {reason}; {fix}"
    policy = TaskPolicy(allowed_volumes=("/",))
    with pytest.raises(MountRefused) as on_agent:
        checked_spec(
            LaunchSpec(job_id="j", image="x", volumes=(Volume(host, "/h"),), policy=policy)
        )
    assert str(on_agent.value) == f"volume {host}:/h: {reason}; {fix}"


def _submit_image(image: str, allowed: tuple[str, ...]) -> str | None:
    try:
        spec = JobSpec.from_dict({"image": image})
        check_registry(spec, image, allowed)
    except JobSpecError as exc:
        assert "\n" not in str(exc)
        return str(exc)
    return None


def _agent_image(image: str, allowed: tuple[str, ...]) -> str | None:
    policy = TaskPolicy(allowed_registries=allowed)
    try:
        check_image(LaunchSpec(job_id="j", image=image, policy=policy))
    except TaskRefused as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "image, allowed, ok",
    [
        ("busybox:" + "t" * 128, (), True),
        ("busybox:" + "t" * 129, (), False),  # Docker's tag limit
        ("LOCALHOST:5000/x:1", ("localhost:5000",), True),  # host names ignore case
        ("localhost:5000/x:1", ("LOCALHOST:5000",), True),
        ("LOCALHOST:5000/x:1", ("docker.io",), False),
        ("LOCALHOST/x:1", ("docker.io",), False),  # localhost in any case is a host
        ("LOCALHOST/x:1", ("localhost",), True),
        ("UPPER/x:1", (), False),  # not a Hub name, and DLC takes no bare uppercase host
        ("Registry.Corp/team/x:1", ("registry.corp",), True),
        ("DOCKER.IO/library/busybox:1", ("docker.io",), True),
        ("evil.example/x:1", ("registry.corp",), False),
    ],
)
def test_image_references_get_the_same_verdict_at_submit_and_on_the_agent(image, allowed, ok):
    at_submit, on_agent = _submit_image(image, allowed), _agent_image(image, allowed)
    assert (at_submit is None) is ok and (on_agent is None) is ok, (at_submit, on_agent)


@pytest.mark.parametrize(
    "model", [".*", "-", "[VA]100", "V100|", "|A100", "V100|.*", "(V100)", "^V100$", " "]
)
def test_a_gpu_model_pattern_is_refused_not_matched_against_every_gpu(model):
    with pytest.raises(JobSpecError) as refused:
        JobSpec.from_dict({"image": "x", "gpu_model": model})
    assert refused.value.field == "gpu_model" and "not a pattern" in str(refused.value)
    if not any(c.isalnum() for c in model):  # matched as "": every GPU, before the fix
        assert not model_matches(model, "Tesla V100-SXM2-32GB")


@pytest.mark.parametrize(
    "model", ["V100", "Tesla V100-SXM2", "a100_80gb", "H100.PCIe", "V100|A100"]
)  # several allowed models: `|` between names
def test_a_gpu_model_name_is_accepted_and_matched(model):
    spec = JobSpec.from_dict({"image": "x", "gpu_model": model})
    assert spec.gpu_model == model
