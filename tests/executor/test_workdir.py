"""Snapshots: what `--workdir` packs, and what the executor refuses to unpack."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from dlc.cli.snapshot import make_snapshot, snapshot_files
from dlc.errors import ContainerError, DlcError
from dlc.executor.workdir import prepare, unpack_snapshot
from dlc.store.blobs import BlobStore


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _entry(name: str, kind=tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_snapshot_honours_dlcignore_gitignore_and_skips_git(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"0" * 10)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    (tmp_path / "model.ckpt").write_text("w")
    (tmp_path / ".gitignore").write_text("data/\n")
    (tmp_path / ".dlcignore").write_text("*.ckpt\n")
    assert snapshot_files(tmp_path) == [".dlcignore", ".gitignore", "src/", "src/train.py"]
    dest = tmp_path / "out"
    dest.mkdir()
    unpack_snapshot(make_snapshot(tmp_path), dest)
    assert (dest / "src" / "train.py").read_text() == "print(1)\n"
    assert not (dest / "data").exists() and not (dest / "model.ckpt").exists()


def test_snapshot_over_the_cap_names_the_biggest_files(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"0" * 3000)
    with pytest.raises(DlcError, match=r"weights.bin.*add them to .dlcignore"):
        make_snapshot(tmp_path, max_bytes=1000)
    with pytest.raises(DlcError, match="is not a directory"):
        make_snapshot(tmp_path / "missing")


def test_snapshot_drops_links_that_leave_the_directory(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    os.symlink("a.txt", tmp_path / "inside")
    os.symlink("/etc/passwd", tmp_path / "outside")
    os.symlink("../..", tmp_path / "up")
    dest = tmp_path / "out"
    dest.mkdir()
    unpack_snapshot(make_snapshot(tmp_path), dest)
    assert os.readlink(dest / "inside") == "a.txt"
    assert not os.path.lexists(dest / "outside") and not os.path.lexists(dest / "up")


@pytest.mark.parametrize(
    "member, message",
    [
        ((_entry("/etc/cron.d/x"), b"x"), "leaves the workspace"),
        ((_entry("../../x"), b"x"), "leaves the workspace"),
        ((_entry("a/../../x"), b"x"), "leaves the workspace"),
        ((_entry("l", tarfile.SYMTYPE, "/etc"), None), "points outside"),
        ((_entry("d/l", tarfile.SYMTYPE, "../../.."), None), "points outside"),
        ((_entry("h", tarfile.LNKTYPE, "etc/passwd"), None), "not a file, directory or link"),
        ((_entry("dev", tarfile.CHRTYPE), None), "not a file, directory or link"),
        ((_entry("fifo", tarfile.FIFOTYPE), None), "not a file, directory or link"),
    ],
)
def test_unpack_refuses_entries_that_escape(tmp_path, member, message):
    with pytest.raises(ContainerError, match=message):
        unpack_snapshot(_tar(member), tmp_path)
    assert list(tmp_path.iterdir()) == []  # checked before anything is written


def test_unpack_caps_size_and_entries(tmp_path):
    big = _tar((_entry("zeros"), b"\0" * 5000))  # compresses to almost nothing
    with pytest.raises(ContainerError, match="unpacks to over"):
        unpack_snapshot(big, tmp_path, max_bytes=4096)
    many = _tar(*[(_entry(f"f{i}"), b"") for i in range(5)])
    with pytest.raises(ContainerError, match="over 4 entries"):
        unpack_snapshot(many, tmp_path, max_entries=4)
    with pytest.raises(ContainerError, match="not a readable tar.gz"):
        unpack_snapshot(b"not a tar", tmp_path)


def test_prepare_makes_a_writable_outputs_folder_without_a_snapshot(tmp_path):
    mounts = prepare(tmp_path, "", "")
    assert mounts == [(str(tmp_path / "outputs"), "/outputs")]
    assert (tmp_path / "outputs").stat().st_mode & 0o777 == 0o777


def test_blob_store_owner_cap_and_ids(tmp_path):
    blobs = BlobStore(tmp_path / "blobs", max_bytes=10)
    blob = blobs.create("alice")
    assert blobs.append(blob, "alice", b"12345") == 5
    with pytest.raises(DlcError, match="no snapshot .* of yours"):
        blobs.append(blob, "bob", b"x")
    with pytest.raises(DlcError, match="passes 0 MiB"):
        blobs.append(blob, "alice", b"123456")
    assert blobs.read(blob) == b"12345" and blobs.owner(blob) == "alice"
    assert blobs.owner("../../etc/passwd") is None
    with pytest.raises(DlcError, match="not a snapshot id"):
        blobs.read("../x")
    blobs.delete(blob)
    assert blobs.owner(blob) is None
    assert (tmp_path / "blobs").stat().st_mode & 0o777 == 0o700


def test_unpack_works_and_still_refuses_escapes_on_python_without_the_data_filter(
    tmp_path, monkeypatch
):
    # Debian 12's python3 is 3.11.2: tarfile has no extraction filters there (3.11.4+)
    monkeypatch.delattr(tarfile, "data_filter")
    extractall = tarfile.TarFile.extractall

    def old_extractall(self, path=".", members=None, *, numeric_owner=False, **kw):
        if kw:  # 3.11.2's signature: no filter argument
            raise TypeError(f"extractall() got an unexpected keyword argument {next(iter(kw))!r}")
        return extractall(self, path, members, numeric_owner=numeric_owner, filter="fully_trusted")

    monkeypatch.setattr(tarfile.TarFile, "extractall", old_extractall)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.sh").write_text("echo hi\n")
    dest = tmp_path / "dest"
    dest.mkdir()
    assert unpack_snapshot(make_snapshot(tmp_path / "src"), dest) >= 1
    assert (dest / "run.sh").read_text() == "echo hi\n"
    with pytest.raises(ContainerError, match="leaves the workspace"):
        unpack_snapshot(_tar((_entry("../../x"), b"x")), dest)
