"""The job's ``/workspace`` (its uploaded code) and ``/outputs`` folders in the sandbox.

The executor fetches the snapshot from the scheduler's API with the job's secret (carried in the
launch spec, never stored) and unpacks it into ``<sandbox>/workspace``. A snapshot is data from
a user: nothing in it may land outside that folder. :mod:`dlc.executor.snapshot_rules` decides
every entry from the headers before anything is written (files, directories and links that
resolve inside; no writing through links; size and entry caps, checked as each header is read:
a small gzip can inflate to gigabytes). Then the entries are made one component at a time
relative to the workspace's descriptor, never following a link (:mod:`dlc.executor.fd_paths`),
not by :meth:`tarfile.TarFile.extractall`: the stdlib's ``data`` filter resolves links with
``realpath``, which gives up past ``PATH_MAX`` on Python builds without the 2025 fix
(CVE-2025-4517), and a snapshot wrote host files as root through it (red-team 2026-11-26).

And the unpacking runs in a forked child that has dropped to the container's uid and gid (no
supplementary groups) before it reads the archive: the workspace is chowned to that uid, so
even a gap in the rules could only write where the container's user may write anyway.

``<sandbox>/outputs`` is mounted at ``/outputs``; ``dlc cp JOB:PATH`` reads it through the API
during or after the run. Both folders and what the snapshot makes in them are writable by all
(files mode ``0666`` plus the archive's execute bits, folders ``0777``): an executor that is not
root cannot chown them to the container's uid, and the sandbox above them is the agent's own
(not reachable by other containers).
"""

from __future__ import annotations

import bz2  # noqa: F401  (imported before the fork: the child reads "r:*" archives)
import collections
import functools
import gzip  # noqa: F401
import io
import json
import lzma  # noqa: F401
import os
import select
import tarfile
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

from dlc.errors import ContainerError
from dlc.executor import fd_paths
from dlc.executor.snapshot_rules import Entry, SnapshotRules

MAX_UNPACKED_BYTES = 256 << 20
MAX_ENTRIES = 20000
MAX_DOWNLOAD_BYTES = 64 << 20
#: the longest an unpack may take before its child is killed (256 MiB takes seconds)
UNPACK_TIMEOUT_S = 300.0
WORKSPACE, OUTPUTS = "/workspace", "/outputs"
SECRET_HEADER = "X-DLC-Job-Secret"
_CHUNK = 1 << 20
_UNREADABLE = (tarfile.TarError, EOFError, OSError, zlib.error)


def fetch_snapshot(url: str, secret: str, timeout_s: float = 60.0) -> bytes:
    """Download the job's snapshot from the API.

    Raises:
        ContainerError: the API refused or could not be reached (one line, with the reason).
    """
    request = urllib.request.Request(url, headers={SECRET_HEADER: secret})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310
            data = resp.read(MAX_DOWNLOAD_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ContainerError(f"workdir: the scheduler refused the snapshot ({exc.code})") from None
    except OSError as exc:
        raise ContainerError(
            f"workdir: cannot fetch the snapshot from {url} ({exc}); the scheduler's API must "
            "be reachable from the agents (--api-host)"
        ) from None
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise ContainerError("workdir: the snapshot is over the download limit")
    return data


def unpack_snapshot(
    data: bytes, dest: Path, max_bytes: int = MAX_UNPACKED_BYTES, max_entries: int = MAX_ENTRIES
) -> int:
    """Unpack a tar.gz snapshot into the directory ``dest``, in this process, as this user.

    Returns:
        The number of entries made.

    Raises:
        ContainerError: an unreadable archive or an entry that breaks the rules above.
    """
    root_fd = os.open(dest, fd_paths.DIR_FLAGS)
    try:
        return unpack_into(data, root_fd, max_bytes, max_entries)
    finally:
        os.close(root_fd)


def unpack_into(data: bytes, root_fd: int, max_bytes: int, max_entries: int) -> int:
    """Check every header, then make the entries beneath the directory ``root_fd``.

    Nothing is written unless the whole archive passes the rules.
    """
    rules = SnapshotRules(max_bytes, max_entries)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            planned = []
            while (member := tar.next()) is not None:  # checked as each header is read
                entry = rules.check(member)
                if entry is not None:
                    planned.append((member, entry))
            folders = _Folders(root_fd)
            try:
                for member, entry in planned:
                    _make(tar, member, entry, folders)  # its own errors are ContainerErrors
            finally:
                folders.close()
    except _UNREADABLE as exc:
        raise _unreadable(exc) from None
    return len(planned)


def _unreadable(exc: BaseException) -> ContainerError:
    return ContainerError(f"workdir: the snapshot is not a readable tar.gz ({exc})")


class _Folders:
    """Descriptors of the folders made so far, the most recently used kept open.

    Opening every entry's folder from the root cost its depth in syscalls per entry (20,000
    files 128 folders deep took two minutes); siblings now share their folder's descriptor.
    Keeping one is safe: nothing but this unpacking changes the tree meanwhile, and no entry
    may replace a folder.
    """

    KEEP = 64

    def __init__(self, root_fd: int):
        self.root_fd = root_fd
        self.open: collections.OrderedDict[tuple[str, ...], int] = collections.OrderedDict()

    def get(self, parts: tuple[str, ...]) -> int:
        """The folder ``parts`` (made if missing), opened without following links; borrowed:
        the caller must not close it."""
        if not parts:
            return self.root_fd
        fd = self.open.get(parts)
        if fd is not None:
            self.open.move_to_end(parts)
            return fd
        fd = fd_paths.open_dir(self.get(parts[:-1]), [parts[-1]], create_mode=0o777)
        self.open[parts] = fd
        if len(self.open) > self.KEEP:
            os.close(self.open.popitem(last=False)[1])
        return fd

    def close(self) -> None:
        """Close every descriptor kept."""
        while self.open:
            os.close(self.open.popitem()[1])


def _make(tar: tarfile.TarFile, member: tarfile.TarInfo, entry: Entry, folders: _Folders) -> None:
    """Make one entry; its parent folders are opened (or made) without following links."""
    shown = "/".join(entry.parts)[:120]
    try:
        _make_in(tar, member, entry, folders.get(entry.parts[:-1]))
    except FileExistsError:
        raise ContainerError(f"workdir: snapshot entry {shown} appears twice") from None
    except OSError as exc:
        if exc.errno in fd_paths.THROUGH_LINK:
            raise ContainerError(
                f"workdir: snapshot entry {shown} goes through a link on disk; refused"
            ) from None
        raise ContainerError(f"workdir: cannot unpack {shown} ({exc.strerror})") from None


def _make_in(tar: tarfile.TarFile, member: tarfile.TarInfo, entry: Entry, parent: int) -> None:
    name = entry.parts[-1]
    if entry.kind == "dir":
        os.close(fd_paths.open_dir(parent, [name], create_mode=0o777))
    elif entry.kind == "link":
        os.symlink(entry.target, name, dir_fd=parent)
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = fd_paths.open_file(parent, name, flags, 0o600)
        try:
            _copy(tar, member, fd)
            os.fchmod(fd, entry.mode)
            os.utime(fd, (entry.mtime, entry.mtime))
        finally:
            os.close(fd)


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, fd: int) -> None:
    """The entry's bytes into ``fd``: read errors are the archive's, write errors the disk's."""
    try:
        source = tar.extractfile(member)
    except _UNREADABLE as exc:
        raise _unreadable(exc) from None
    while True:
        try:
            chunk = source.read(_CHUNK) if source is not None else b""
        except _UNREADABLE as exc:
            raise _unreadable(exc) from None
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def unpack_as(
    data: bytes, dest: Path, user: tuple[int, int] | None, timeout_s: float = UNPACK_TIMEOUT_S
) -> int:
    """Unpack into ``dest`` from a child process running as ``user`` (``(uid, gid)``).

    ``dest`` is chowned to ``user`` first (when this process is root, the only case where it
    can change uid at all) and opened here; the child gets the descriptor, drops to ``user``
    with no supplementary groups, then reads the archive. Returns the entries made.

    Raises:
        ContainerError: the archive broke a rule, or the child failed or ran past ``timeout_s``.
    """
    root_fd = os.open(dest, fd_paths.DIR_FLAGS)
    try:
        drop = user if user is not None and os.geteuid() == 0 else None
        if drop is not None:
            os.fchown(root_fd, *drop)
        os.fchmod(root_fd, 0o777)
        work = functools.partial(unpack_into, data, root_fd, MAX_UNPACKED_BYTES, MAX_ENTRIES)
        return _in_child(work, drop, timeout_s, keep=(root_fd,))
    finally:
        os.close(root_fd)


def _in_child(
    work, drop: tuple[int, int] | None, timeout_s: float, keep: tuple[int, ...] = ()
) -> int:
    """Run ``work`` in a forked child (as ``drop`` when given); its count, or its error.

    The child keeps only the descriptors in ``keep`` (and stdio) besides its pipe.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's cleanup
        status = 1
        try:
            _close_all_but(keep, write_end)  # the executor's sockets are none of its business
            if drop is not None:
                os.setgroups([])
                os.setgid(drop[1])
                os.setuid(drop[0])
            try:
                report = {"count": work()}
            except ContainerError as exc:
                report = {"error": str(exc)}
            except Exception as exc:  # a bug: still one line for the job
                report = {"error": f"workdir: unpacking the snapshot failed ({exc!r})"}
            os.write(write_end, json.dumps(report).encode()[:65536])
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        raw = _read_until_eof(read_end, time.monotonic() + timeout_s)
    finally:
        os.close(read_end)
        if raw is None:
            os.kill(pid, 9)
        _, wait_status = os.waitpid(pid, 0)
    if raw is None:
        raise ContainerError(f"workdir: unpacking the snapshot took over {timeout_s:.0f} s")
    try:
        report = json.loads(raw)
    except ValueError:
        code = os.waitstatus_to_exitcode(wait_status)
        raise ContainerError(f"workdir: unpacking the snapshot failed (exit {code})") from None
    if "error" in report:
        raise ContainerError(str(report["error"]))
    return int(report["count"])


def _close_all_but(keep: tuple[int, ...], pipe: int) -> None:
    low = 3
    for fd in sorted({*keep, pipe}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _read_until_eof(fd: int, deadline: float) -> bytes | None:
    """All of ``fd`` until its writer closes it; ``None`` past ``deadline``."""
    chunks: list[bytes] = []
    poller = select.poll()  # not select(): that one fails for descriptors past 1023
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def prepare(
    sandbox: Path, url: str, secret: str, user: tuple[int, int] | None = None
) -> list[tuple[str, str]]:
    """Make ``outputs`` (and ``workspace`` with the snapshot when ``url``) in the sandbox.

    ``user`` is the container's ``(uid, gid)``: the snapshot is unpacked as that user.

    Returns:
        ``(host path, container path)`` read-write mounts for the container.
    """
    mounts = []
    if url:
        workspace = sandbox / "workspace"
        workspace.mkdir(exist_ok=True)
        unpack_as(fetch_snapshot(url, secret), workspace, user)
        mounts.append((str(workspace), WORKSPACE))
    outputs = sandbox / "outputs"
    outputs.mkdir(exist_ok=True)
    outputs.chmod(0o777)
    mounts.append((str(outputs), OUTPUTS))
    return mounts
