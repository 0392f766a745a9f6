"""A ``--workdir`` snapshot cannot write outside its workspace (red-team 2026-11-26).

DLC checked names and link targets as strings and left the rest to ``tarfile``'s ``data``
filter, whose ``realpath`` stops expanding links past ``PATH_MAX`` on Pythons without the
CVE-2025-4517 fix (ours, 3.11.7): a chain of 16 directory links wrote a file of the user's
choosing outside the workspace, as root. Now the rules know the links the archive made, every
entry is made one component at a time without following links, and the unpacking runs as the
container's uid.
"""

from __future__ import annotations

import os
import stat
import tarfile

import pytest

from dlc.errors import ContainerError
from dlc.executor import workdir
from tests.executor.snapshot_attacks import (
    PLANTED,
    archive,
    dot_link_escape,
    entry,
    late_link_escape,
    link_chain_escape,
)

NOBODY = (65534, 65534)


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "sandbox" / "workspace"
    path.mkdir(parents=True)
    return path


def _planted(root) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f == PLANTED]


def test_a_chain_of_directory_links_cannot_climb_out(workspace, tmp_path):
    data = link_chain_escape(len(str(workspace)))
    with pytest.raises(ContainerError, match=r"goes through the link a; .* not write through"):
        workdir.unpack_snapshot(data, workspace)
    assert _planted(tmp_path) == []
    assert list(workspace.iterdir()) == []  # refused before anything is written


@pytest.mark.parametrize(
    "data, message",
    [
        (dot_link_escape(), r"entry d1/d2 goes through the link d1"),
        (late_link_escape(), r"link d1 -> \. stands where an earlier link's target walks"),
    ],
    ids=["d1->.,d1/d2->..", "up->d1/..,d1->."],
)
def test_links_to_the_workspace_cannot_reach_its_parent(workspace, tmp_path, data, message):
    with pytest.raises(ContainerError, match=message):
        workdir.unpack_snapshot(data, workspace)
    assert _planted(tmp_path) == [] and list(workspace.iterdir()) == []


@pytest.mark.parametrize(
    "members, message",
    [
        ([(entry(f"/tmp/{PLANTED}"), b"x")], "leaves the workspace"),
        ([(entry(f"../{PLANTED}"), b"x")], "leaves the workspace"),
        ([(entry(f"a/../../{PLANTED}"), b"x")], "leaves the workspace"),
        ([(entry("up", tarfile.SYMTYPE, ".."), None)], "points outside"),
        ([(entry("d/up", tarfile.SYMTYPE, "../x/../.."), None)], "points outside"),
        ([(entry("abs", tarfile.SYMTYPE, "/"), None)], "points outside"),
        (
            [(entry("lib", tarfile.SYMTYPE, "real"), None),
             (entry("x", tarfile.SYMTYPE, "lib/../.."), None)],
            "climbs back out of a link",
        ),
        ([(entry("h", tarfile.LNKTYPE, "../x"), None)], "not a file, directory or link"),
        ([(entry("f"), b"1"), (entry("f/g"), b"2")], "goes through the file f"),
        ([(entry("f"), b"1"), (entry("f", tarfile.SYMTYPE, "."), None)], "appears twice"),
        ([(entry("d/" * 128 + "f"), b"x")], "or 128 folders deep"),  # cost grows with depth
        ([(entry("l", tarfile.SYMTYPE, "d/" * 129), None)], "or 128 folders deep"),
    ],
)  # fmt: skip
def test_absolute_dotdot_and_hard_links_are_refused(workspace, tmp_path, members, message):
    with pytest.raises(ContainerError, match=message):
        workdir.unpack_snapshot(archive(*members), workspace)
    assert _planted(tmp_path) == [] and list(workspace.iterdir()) == []


def test_a_link_already_on_disk_is_never_followed(workspace, tmp_path):
    """The second line: were the rules wrong, the writer's opens still refuse a link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "d")  # as if an earlier entry had slipped through
    with pytest.raises(ContainerError, match="d/x goes through a link on disk"):
        workdir.unpack_snapshot(archive((entry("d/x"), b"x")), workspace)
    with pytest.raises(ContainerError, match="d appears twice"):
        workdir.unpack_snapshot(archive((entry("d"), b"x")), workspace)
    assert list(outside.iterdir()) == []


def test_an_ordinary_snapshot_with_links_unpacks(workspace):
    data = archive(
        (entry("./", tarfile.DIRTYPE), None),
        (entry("real/run.sh"), b"echo hi\n"),
        (entry("lib", tarfile.SYMTYPE, "real"), None),
        (entry("bin/run", tarfile.SYMTYPE, "../lib/run.sh"), None),
        (entry("real/", tarfile.DIRTYPE), None),  # a folder may be listed again
    )
    assert workdir.unpack_snapshot(data, workspace) == 3  # "." and the repeat make nothing
    assert (workspace / "bin" / "run").read_text() == "echo hi\n"
    assert os.readlink(workspace / "lib") == "real"
    mode = (workspace / "real" / "run.sh").stat().st_mode
    assert stat.S_IMODE(mode) == 0o777  # executable kept, writable by the container's uid
    assert stat.S_IMODE((workspace / "bin").stat().st_mode) == 0o777


def test_unpacking_runs_as_the_containers_uid(workspace):
    data = archive((entry("src/train.py"), b"print(1)\n"), (entry("top"), b"x"))
    assert workdir.unpack_as(data, workspace, NOBODY) == 2
    for path in (workspace, workspace / "src", workspace / "src" / "train.py"):
        assert (path.stat().st_uid, path.stat().st_gid) == NOBODY


def test_a_bug_in_the_child_cannot_write_as_root(tmp_path):
    """Whatever the child's code does, it does as the container's uid: root's files are safe."""
    guarded = tmp_path / "root-only"
    guarded.mkdir(mode=0o755)

    def rogue():
        with open(guarded / PLANTED, "w") as fh:  # what an escape would try
            fh.write("x")
        return 1

    with pytest.raises(ContainerError, match="Permission denied"):
        workdir._in_child(rogue, NOBODY, timeout_s=30)
    assert not (guarded / PLANTED).exists()
    assert workdir._in_child(lambda: os.geteuid(), NOBODY, timeout_s=30) == NOBODY[0]


def test_a_stuck_child_is_killed_at_the_deadline():
    import time

    with pytest.raises(ContainerError, match="took over 1 s"):
        workdir._in_child(lambda: time.sleep(60), None, timeout_s=1)


def test_the_child_keeps_no_descriptor_of_the_executor(tmp_path):
    held = os.open(tmp_path, os.O_RDONLY)  # stands for the executor's sockets and files

    def probe():
        try:
            os.fstat(held)
        except OSError:
            return 0
        return 1

    try:
        assert workdir._in_child(probe, NOBODY, timeout_s=30) == 0
    finally:
        os.close(held)


def test_random_archives_of_links_never_resolve_outside(tmp_path):
    """A bounded, seeded search over small archives of folders, files and links over a few
    names: whatever the rules accept must leave every link resolving inside (the kernel's
    resolution, read back with ``realpath`` on these short paths) and nothing outside."""
    import random

    rng = random.Random(20261126)
    names = ["a", "b", "a/b", "b/a", "a/b/c"]
    targets = [".", "..", "a", "b", "a/..", "b/../..", "a/b/..", "../a", "a/b/../..", "c"]
    accepted = 0
    for round_ in range(150):
        sandbox = tmp_path / f"s{round_}"
        workspace = sandbox / "workspace"
        workspace.mkdir(parents=True)
        members = []
        for _ in range(rng.randint(2, 6)):
            name = rng.choice(names)
            kind = rng.choice(["link", "link", "dir", "file"])
            if kind == "link":
                members.append((entry(name, tarfile.SYMTYPE, rng.choice(targets)), None))
            elif kind == "dir":
                members.append((entry(name, tarfile.DIRTYPE), None))
            else:
                members.append((entry(f"{name}/{PLANTED}"), b"x"))
        try:
            workdir.unpack_snapshot(archive(*members), workspace)
            accepted += 1
        except ContainerError:
            pass
        assert os.listdir(sandbox) == ["workspace"], members
        real = os.path.realpath(workspace)
        for here, dirs, files in os.walk(workspace):
            for name in dirs + files:
                path = os.path.join(here, name)
                if os.path.islink(path):
                    resolved = os.path.realpath(path)
                    assert resolved == real or resolved.startswith(real + "/"), members
    assert accepted > 20  # the search also covers archives that pass
