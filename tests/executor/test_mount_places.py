"""A volume's place in its filesystem (red-team finding 63, session 14).

The inode check caught a bind mount of a state folder or of one above it, not of a folder
below one: ``mount --bind /run/dlc-mps/gpu0 /data/alias`` made ``/data/alias`` (under an
allowed ``/data``) the MPS pipes of GPU 0. The pure part reads real-format mountinfo lines;
the real part makes such bind mounts in a temporary folder (the tests run as root) and shows
them refused, an unrelated bind-mounted data folder still mounted.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlc.executor.host_paths import MountRefused, checked_spec
from dlc.executor.mount_places import (
    MountEntry,
    Place,
    mount_id,
    parse_mountinfo,
    place_in,
    place_of,
    read_mounts,
    unescape,
)
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.mps import MpsManager
from dlc.executor.state_paths import StatePath
from dlc.executor.volume_pins import bind, pin_volumes, unbind
from dlc.scheduler.jobs.launch_spec import LaunchSpec, TaskPolicy, Volume

from .test_task_runner import data, make

FIX = "mount a directory that does not hold DLC's state"

# lines as the kernel writes them (the second is `mount --bind /run/dlc-mps/gpu0 "/data/my x"`)
MOUNTINFO = """\
22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
27 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,discard
30 27 0:25 / /run rw,nosuid,nodev,noexec,relatime shared:12 - tmpfs tmpfs rw,size=1608468k
412 27 0:25 /dlc-mps/gpu0 /data/my\\040x rw,nosuid,nodev shared:12 - tmpfs tmpfs rw
413 27 252:1 /srv/a\\134b\\011c /mnt/odd rw,relatime - ext4 /dev/vda1 rw
garbage line
"""


def test_mountinfo_lines_are_read_with_their_escapes():
    table = parse_mountinfo(MOUNTINFO)
    assert sorted(table) == [22, 27, 30, 412, 413]
    assert table[412] == MountEntry(412, (0, 25), "/dlc-mps/gpu0", "/data/my x")
    assert table[413].root == "/srv/a\\b\tc"
    assert table[27] == MountEntry(27, (252, 1), "/", "/")
    assert unescape("/a\\040b\\012c") == "/a b\nc"


def test_a_folder_below_a_bind_mount_has_its_place_in_the_filesystem():
    table = parse_mountinfo(MOUNTINFO)
    alias = place_in(table[412], "/data/my x/pipe")
    assert alias == Place((0, 25), "/dlc-mps/gpu0/pipe")
    assert place_in(table[412], "/data/my x") == Place((0, 25), "/dlc-mps/gpu0")
    assert place_in(table[30], "/run") == Place((0, 25), "/")
    assert place_in(table[27], "/srv/data") == Place((252, 1), "/srv/data")
    assert place_in(table[412], "/data/my xy") is None  # not below the mount point
    state = place_in(table[30], "/run/dlc-mps")
    assert state == Place((0, 25), "/dlc-mps")
    assert alias.relation(state) == "lies inside"
    assert state.relation(alias) == "contains"
    assert state.relation(Place((0, 25), "/dlc-mps")) == "is"
    assert Place((0, 25), "/dlc-mpsx").relation(state) is None  # a sibling, not inside
    assert Place((252, 1), "/dlc-mps/gpu0").relation(state) is None  # another filesystem


def test_the_kernel_names_the_mount_of_an_open_folder():
    fd = os.open("/proc", os.O_PATH)
    try:
        found = mount_id(fd)
        assert found is not None
        assert place_of(fd, "/proc") == Place(read_mounts()[found].device, "/")
    finally:
        os.close(fd)


@contextlib.contextmanager
def bound(source: Path, target: Path) -> Iterator[None]:
    """``mount --bind source target`` for the block, unmounted in a finally."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        bind(str(source), str(target))
    except OSError as exc:
        if exc.errno == errno.EPERM:
            pytest.fail(
                "mount --bind needs CAP_SYS_ADMIN: run the tests as root, as .ci/run does "
                "(the agent pins volumes with bind mounts too)"
            )
        raise
    try:
        yield
    finally:
        unbind(str(target))


@pytest.fixture
def tree(tmp_path):
    """A stand-in ``/run`` with ``dlc-mps/gpu0/pipe``, an allowed ``/data`` and, outside
    both, ``other/d`` (unrelated data)."""
    root = tmp_path.resolve()
    (root / "run" / "dlc-mps" / "gpu0" / "pipe").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "other" / "d").mkdir(parents=True)
    return root


def _spec(root: Path, *volumes: str) -> LaunchSpec:
    return LaunchSpec(
        job_id="j",
        image="busybox:1",
        volumes=tuple(Volume(v, f"/x{n}") for n, v in enumerate(volumes)),
        policy=TaskPolicy(allowed_volumes=(str(root / "data"),)),
    )


def test_a_bind_mount_of_a_folder_below_the_state_is_refused(tree):
    """Failed before: ``/data/alias`` (the MPS pipes of GPU 0) and ``/data/alias/pipe`` were
    mounted; their inodes are none of the state's or of the folders above it."""
    state = (StatePath(str(tree / "run" / "dlc-mps"), "DLC's MPS pipes"),)
    alias = tree / "data" / "alias"
    with bound(tree / "run" / "dlc-mps" / "gpu0", alias):
        for volume in (str(alias), f"{alias}/pipe"):
            with pytest.raises(MountRefused) as err:
                checked_spec(_spec(tree, volume), state)
            assert str(err.value) == (
                f"volume {volume}:/x0: it lies inside DLC's MPS pipes {tree}/run/dlc-mps "
                f"(a folder of it mounted by another name); {FIX}"
            )
        # the data tree holding the alias passes the check, but its pin is a bind without
        # MS_REC: the alias mounted under it does not come along to the container
        spec = checked_spec(_spec(tree, str(tree / "data")), state)
        pinned, cleanup = pin_volumes(spec, tree / "staging")
        try:
            seen = Path(pinned.volumes[0].host_path)
            assert (seen / "alias").is_dir() and not (seen / "alias" / "pipe").exists()
        finally:
            cleanup()


def test_an_unrelated_bind_mounted_data_folder_is_still_mounted(tree):
    state = (StatePath(str(tree / "run" / "dlc-mps"), "DLC's MPS pipes"),)
    shared = tree / "data" / "shared"
    with bound(tree / "other" / "d", shared):
        spec = _spec(tree, str(shared))
        assert checked_spec(spec, state).volumes == (Volume(str(shared), "/x0"),)


def test_the_runner_refuses_the_alias_and_runs_the_data_beside_it(tree):
    (tree / "sandbox").mkdir()
    hook = ShareHook(mps=MpsManager(root=str(tree / "run" / "dlc-mps")))  # the runner's own
    runner, runtime, sink = make(tree / "sandbox", shares=hook)
    runner.pin_volumes = lambda spec, staging: (spec, lambda: None)  # the check is the point
    policy = TaskPolicy(allowed_volumes=(str(tree / "data"),))
    alias, shared = tree / "data" / "alias", tree / "data" / "shared"
    with bound(tree / "run" / "dlc-mps" / "gpu0", alias), bound(tree / "other" / "d", shared):
        for task, host in (("t1", alias), ("t2", shared)):
            runner.launch(task, data(volumes=(Volume(str(host), "/x"),), policy=policy))
        runner.join(10)
    last = {u[0]: u for u in sink.updates}
    assert last["t1"][1] == "TASK_FAILED"
    assert last["t1"][2] == (
        f"volume {alias}:/x: it lies inside DLC's MPS pipes {tree}/run/dlc-mps "
        f"(a folder of it mounted by another name); {FIX}"
    )
    assert last["t2"][1] == "TASK_FINISHED"
    assert len([c for c in runtime.calls if c[0] == "create"]) == 1
