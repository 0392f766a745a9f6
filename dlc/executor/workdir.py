"""The job's ``/workspace`` (its uploaded code) and ``/outputs`` folders in the sandbox.

The executor fetches the snapshot from the scheduler's API with the job's secret (carried in the
launch spec, never stored) and unpacks it into ``<sandbox>/workspace``. A snapshot is data from
a user: nothing in it may land outside that folder. Each entry must be a regular file, a
directory or a symbolic link whose target stays inside; absolute names, ``..`` components,
hard links, devices and FIFOs are refused, and so are archives over the size or entry caps (a
small gzip can inflate to gigabytes). ``<sandbox>/outputs`` is mounted at ``/outputs``; ``dlc
cp JOB:PATH`` reads it through the API during or after the run.

Both folders are mode 0777: the container runs as a non-root uid that owns nothing on the host,
and the sandbox above them is the agent's own (not reachable by other containers).
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from dlc.errors import ContainerError

MAX_UNPACKED_BYTES = 256 << 20
MAX_ENTRIES = 20000
MAX_DOWNLOAD_BYTES = 64 << 20
WORKSPACE, OUTPUTS = "/workspace", "/outputs"
SECRET_HEADER = "X-DLC-Job-Secret"


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


def _safe_name(name: str) -> str:
    norm = posixpath.normpath(name)
    if name.startswith("/") or norm == ".." or norm.startswith("../") or "\0" in name:
        raise ContainerError(f"workdir: snapshot entry {name[:80]!r} leaves the workspace")
    return norm


def check_members(members: list[tarfile.TarInfo], max_bytes: int, max_entries: int) -> None:
    """Refuse an archive that would write outside its folder or past the caps."""
    if len(members) > max_entries:
        raise ContainerError(f"workdir: the snapshot has over {max_entries} entries")
    total = 0
    for member in members:
        total = _check_member(member, total, max_bytes)


def _check_member(member: tarfile.TarInfo, total: int, max_bytes: int) -> int:
    """Check one entry; returns the bytes unpacked so far with it."""
    name = _safe_name(member.name)
    if member.issym():
        target = member.linkname
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            raise ContainerError(
                f"workdir: snapshot link {name[:80]} -> {target[:80]} points outside"
            )
    elif not (member.isreg() or member.isdir()):
        raise ContainerError(
            f"workdir: snapshot entry {name[:80]} is not a file, directory or link"
        )
    total += max(0, member.size)
    if total > max_bytes:
        raise ContainerError(f"workdir: the snapshot unpacks to over {max_bytes >> 20} MiB")
    return total


def _checked_members(tar: tarfile.TarFile, max_bytes: int, max_entries: int) -> list:
    """The entries, each checked as soon as its header is read.

    ``getmembers()`` reads (decompresses) the whole archive before any check: a 64 MiB upload
    of gzip members of zeros behind one header declaring 64 GiB kept the executor busy for
    minutes (4 GiB took 42 s) only to be refused by the size cap afterwards.
    """
    members, total = [], 0
    while (member := tar.next()) is not None:
        if len(members) >= max_entries:
            raise ContainerError(f"workdir: the snapshot has over {max_entries} entries")
        total = _check_member(member, total, max_bytes)
        members.append(member)
    return members


def unpack_snapshot(
    data: bytes, dest: Path, max_bytes: int = MAX_UNPACKED_BYTES, max_entries: int = MAX_ENTRIES
) -> int:
    """Unpack a tar.gz snapshot into ``dest`` safely; returns the number of entries.

    Raises:
        ContainerError: an unreadable archive or an entry that breaks the rules above.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            members = _checked_members(tar, max_bytes, max_entries)
            for member in members:
                member.mode = (member.mode or 0o644) | 0o644  # readable whatever the archive
                member.uid = member.gid = os.getuid()
            # the "data" filter checks the same again inside tarfile; it came with Python
            # 3.11.4, and Debian 12's python3 is 3.11.2: there _checked_members alone guards
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=members)  # noqa: S202 - members checked above
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ContainerError(f"workdir: the snapshot is not a readable tar.gz ({exc})") from None
    return len(members)


def prepare(sandbox: Path, url: str, secret: str) -> list[tuple[str, str]]:
    """Make ``outputs`` (and ``workspace`` with the snapshot when ``url``) in the sandbox.

    Returns:
        ``(host path, container path)`` read-write mounts for the container.
    """
    mounts = []
    if url:
        workspace = sandbox / "workspace"
        workspace.mkdir(exist_ok=True)
        unpack_snapshot(fetch_snapshot(url, secret), workspace)
        _open_up(workspace)
        mounts.append((str(workspace), WORKSPACE))
    outputs = sandbox / "outputs"
    outputs.mkdir(exist_ok=True)
    outputs.chmod(0o777)
    mounts.append((str(outputs), OUTPUTS))
    return mounts


def _open_up(root: Path) -> None:
    """Let the container's non-root uid write its workspace (files come from the user)."""
    for dirpath, _, files in os.walk(root):
        os.chmod(dirpath, 0o777)
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o666)
