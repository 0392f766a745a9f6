"""The descriptor-relative path helpers never follow a link (snapshots and ``dlc cp`` use them)."""

from __future__ import annotations

import errno
import os

import pytest

from dlc.executor import fd_paths


def test_split_relative_refuses_what_could_leave():
    assert fd_paths.split_relative("./a//b/./c/") == ["a", "b", "c"]
    for bad in ("/etc/passwd", "a/../b", "..", "a\0b"):
        with pytest.raises(ValueError):
            fd_paths.split_relative(bad)


def test_open_dir_creates_and_refuses_links_on_the_way(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    (root / "file").write_text("x")
    fd = os.open(root, fd_paths.DIR_FLAGS)
    try:
        os.close(fd_paths.open_dir(fd, ["new", "deep"], create_mode=0o750))
        assert (root / "new" / "deep").is_dir()
        assert (root / "new").stat().st_mode & 0o777 == 0o750  # not narrowed by the umask
        for through in (["link"], ["link", "x"], ["file", "x"]):
            with pytest.raises(OSError) as err:
                fd_paths.open_dir(fd, through, create_mode=0o777)
            assert err.value.errno in fd_paths.THROUGH_LINK
        with pytest.raises(OSError) as err:
            fd_paths.open_beneath(fd, ["link"], os.O_RDONLY)
        assert err.value.errno in fd_paths.THROUGH_LINK
        with pytest.raises(OSError) as err:
            fd_paths.open_file(fd, "..", os.O_RDONLY)
        assert err.value.errno == errno.EINVAL
    finally:
        os.close(fd)
    assert list(outside.iterdir()) == []
