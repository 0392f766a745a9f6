"""Agent-side volume, user and registry checks (real directories and symlinks, no engine)."""

from __future__ import annotations

import os

import pytest

from dlc.executor.host_paths import (
    MountRefused,
    TaskRefused,
    check_image,
    check_volume,
    checked_spec,
    parse_user,
    walk,
)
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume


@pytest.fixture
def allowed(tmp_path):
    """``<tmp>/srv/a`` is the allowed prefix, holding ``d`` (a job's read-write directory)."""
    root = tmp_path.resolve() / "srv" / "a"
    (root / "d").mkdir(parents=True)
    return root


def test_plain_directory_under_prefix_is_mounted_as_given(allowed):
    vol = check_volume(Volume(f"{allowed}/d/", "/w", False), (str(allowed),))
    assert vol == Volume(f"{allowed}/d", "/w", False)


def test_symlink_to_root_planted_by_a_job_is_refused(allowed):
    # the attack: job 1 ran `ln -s / /w/hostroot` in its read-write mount of .../d
    os.symlink("/", allowed / "d" / "hostroot")
    with pytest.raises(MountRefused) as err:
        check_volume(Volume(f"{allowed}/d/hostroot/etc", "/x"), (str(allowed),))
    text = str(err.value)
    assert f"{allowed}/d/hostroot is a symbolic link" in text
    assert "mount the real directory instead" in text and "\n" not in text


def test_symlink_as_the_last_component_is_refused(allowed):
    os.symlink("/etc", allowed / "d" / "etc")
    with pytest.raises(MountRefused, match="is a symbolic link"):
        check_volume(Volume(f"{allowed}/d/etc", "/x"), (str(allowed),))


def test_missing_path_is_refused_and_not_created(allowed):
    missing = allowed / "d" / "new" / "deeper"
    with pytest.raises(MountRefused, match="does not exist on this agent.*never creates"):
        check_volume(Volume(str(missing), "/x"), (str(allowed),))
    assert not (allowed / "d" / "new").exists()


@pytest.mark.parametrize("path", ["{a}/../../etc", "{a}/d/./x", "{a}/d/.."])
def test_dot_components_are_refused(allowed, path):
    with pytest.raises(MountRefused, match="'.' or '..'"):
        check_volume(Volume(path.format(a=allowed), "/x"), (str(allowed),))


def test_path_outside_every_prefix_is_refused(allowed, tmp_path):
    with pytest.raises(MountRefused, match="not under a host path this cluster allows"):
        check_volume(Volume("/etc", "/x"), (str(allowed),))
    with pytest.raises(MountRefused, match=r"allows \(none\)"):
        check_volume(Volume(f"{allowed}/d", "/x"), ())


def test_sibling_with_the_same_start_is_not_under_the_prefix(allowed):
    (allowed.parent / "ab").mkdir()
    with pytest.raises(MountRefused, match="not under"):
        check_volume(Volume(f"{allowed}b", "/x"), (str(allowed),))


def test_symlinked_allowed_prefix_is_unusable(allowed, tmp_path):
    link = tmp_path / "link"
    os.symlink(allowed, link)
    with pytest.raises(MountRefused) as err:
        check_volume(Volume(f"{link}/d", "/x"), (str(link),))
    assert f"allowed prefix {link} is not a real directory" in str(err.value)
    assert "--allow-volume" in str(err.value)
    # the real path, listed by the operator, works
    assert check_volume(Volume(f"{allowed}/d", "/x"), (str(allowed),)).host_path.endswith("/d")


def test_prefix_pointing_at_root_allows_nothing_else(allowed, tmp_path):
    # a job cannot widen the list by turning an allowed prefix into a link to /
    shared = allowed / "d" / "shared"
    os.symlink("/", shared)
    with pytest.raises(MountRefused, match="not a real directory"):
        check_volume(Volume(f"{shared}/etc", "/x"), (str(shared),))


def test_device_nodes_are_refused(tmp_path):
    with pytest.raises(MountRefused, match="neither a directory nor a regular file"):
        check_volume(Volume("/dev/null", "/x"), ("/dev",))


def test_walk_reports_a_file_used_as_a_directory(allowed):
    (allowed / "f").write_text("x")
    info, problem = walk(f"{allowed}/f/g")
    assert info is None and problem.what == "not a directory"


@pytest.mark.parametrize(
    "text, parsed", [("65534:65534", (65534, 65534)), ("1000", (1000, 1000)), ("0:0", (0, 0))]
)
def test_parse_user(text, parsed):
    assert parse_user(text) == parsed


@pytest.mark.parametrize("text", ["root", "nobody:1", "1000:", ":1", "-1"])
def test_parse_user_refuses_names(text):
    with pytest.raises(ValueError):
        parse_user(text)


def _spec(**policy):
    return LaunchSpec(job_id="j", image="dlc-test/busybox:1", policy=TaskPolicy(**policy))


@pytest.mark.parametrize("user", ["0:0", "0", "1000:0", "root"])
def test_root_is_refused_by_default(user):
    with pytest.raises(TaskRefused, match="container user"):
        checked_spec(_spec(container_user=user))


def test_root_allowed_by_the_operator():
    assert checked_spec(_spec(container_user="0:0", allow_root=True)).policy.allow_root


def test_registry_allow_list_on_the_agent():
    check_image(_spec(allowed_registries=("docker.io",)))
    with pytest.raises(TaskRefused, match="registry docker.io, which is not allowed"):
        check_image(_spec(allowed_registries=("127.0.0.1:5000",)))


def test_malformed_image_is_refused_on_the_agent():
    spec = LaunchSpec(job_id="j", image="busybox; rm -rf /")
    with pytest.raises(TaskRefused, match="repository name"):
        check_image(spec)


def test_policy_travels_in_the_launch_spec():
    spec = _spec(allowed_volumes=("/srv",), container_user="5:5", allowed_registries=("r.io",))
    assert LaunchSpec.decode(spec.encode()) == spec
    # an old scheduler's spec (no policy) gets the safe defaults: no volumes, no root
    bare = LaunchSpec.from_json('{"version": 1, "job_id": "j", "image": "x"}')
    assert bare.policy == TaskPolicy()
    assert bare.policy.container_user == "65534:65534" and not bare.policy.allowed_volumes
