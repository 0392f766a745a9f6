"""Uploaded working-directory snapshots, kept as files next to the job database.

A snapshot (``dlc submit --workdir``) can be tens of MiB: it never goes into a job row. The API
writes it here, in chunks (each API request body is capped), under a random id; the job spec
names the id; the executor fetches it once through the API with the job's secret. Every blob
records its owner, so a job can only use its own user's uploads.

Layout: ``ROOT/<id>.tgz`` (the bytes) and ``ROOT/<id>.owner`` (the uploading user). ``ROOT`` is
created mode 0700. ``ROOT/.lock`` serialises :meth:`BlobStore.create_within` (an ``flock``:
threads of the API and other processes on the same folder alike).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from pathlib import Path

from dlc.errors import DlcError

#: the largest snapshot accepted (compressed bytes)
MAX_BLOB_BYTES = 64 << 20
#: snapshots one user may keep (red-team 2026-11-23: every upload made a new file, forever,
#: so one user could fill the scheduler's disk); older ones no live job uses are reclaimed
MAX_BLOBS_PER_USER = 32
#: a snapshot younger than this is never reclaimed (its upload or its submit may be under way)
MIN_RECLAIM_AGE_S = 3600.0
_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def valid_blob_id(blob_id: str) -> bool:
    """Whether ``blob_id`` has the form :meth:`BlobStore.create` gives (32 hex digits)."""
    return bool(_ID_RE.match(blob_id or ""))


class BlobStore:
    """Blob files under ``root`` (``<db>.blobs`` beside the job database)."""

    def __init__(self, root: str | Path, max_bytes: int = MAX_BLOB_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes

    def _path(self, blob_id: str, suffix: str) -> Path:
        if not valid_blob_id(blob_id):
            raise DlcError(f"workdir: {blob_id[:40]!r} is not a snapshot id; upload with --workdir")
        return self.root / f"{blob_id}{suffix}"

    def create(self, owner: str) -> str:
        """A new, empty blob of ``owner``; returns its id."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        blob_id = secrets.token_hex(16)
        self._path(blob_id, ".owner").write_text(owner)
        self._path(blob_id, ".tgz").touch(mode=0o600)
        return blob_id

    def create_within(
        self,
        owner: str,
        in_use: set[str],
        now: float,
        max_blobs: int = MAX_BLOBS_PER_USER,
        min_age_s: float = MIN_RECLAIM_AGE_S,
    ) -> str:
        """:meth:`make_room` then :meth:`create`, as one step no other upload can split.

        Counting and creating apart let concurrent first chunks all count the same number and
        all create (red-team 2026-11-26: 48 at once took a user from 2 snapshots to 41 of 32).

        Raises:
            DlcError: ``owner`` still holds ``max_blobs`` (see :meth:`make_room`).
        """
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
            self.make_room(owner, in_use, now, max_blobs, min_age_s)
            return self.create(owner)
        finally:
            os.close(fd)

    def owner(self, blob_id: str) -> str | None:
        """Who uploaded ``blob_id`` (``None``: no such blob)."""
        try:
            return self._path(blob_id, ".owner").read_text()
        except (OSError, DlcError):
            return None

    def append(self, blob_id: str, owner: str, data: bytes) -> int:
        """Append a chunk to ``owner``'s blob; returns its new size.

        Raises:
            DlcError: not ``owner``'s blob, or the size would pass :attr:`max_bytes`.
        """
        if self.owner(blob_id) != owner:
            raise DlcError(f"workdir: no snapshot {blob_id} of yours; upload it again")
        path = self._path(blob_id, ".tgz")
        size = path.stat().st_size + len(data)
        if size > self.max_bytes:
            raise DlcError(
                f"workdir: the snapshot passes {self.max_bytes >> 20} MiB; add big files "
                "(data, checkpoints) to .dlcignore and mount data with -v instead"
            )
        with path.open("ab") as fh:
            fh.write(data)
        return size

    def read(self, blob_id: str) -> bytes:
        """The whole blob.

        Raises:
            DlcError: no such blob.
        """
        try:
            return self._path(blob_id, ".tgz").read_bytes()
        except OSError:
            raise DlcError(f"workdir: snapshot {blob_id} is gone from the scheduler") from None

    def owned(self, owner: str) -> list[tuple[float, str]]:
        """``(modified time, id)`` of ``owner``'s blobs, oldest first."""
        found = []
        for marker in self.root.glob("*.owner") if self.root.is_dir() else ():
            with contextlib.suppress(OSError):
                if marker.read_text() == owner:
                    found.append((marker.with_suffix(".tgz").stat().st_mtime, marker.stem))
        return sorted(found)

    def make_room(
        self,
        owner: str,
        in_use: set[str],
        now: float,
        max_blobs: int = MAX_BLOBS_PER_USER,
        min_age_s: float = MIN_RECLAIM_AGE_S,
    ) -> None:
        """Before ``owner`` uploads another blob: delete their oldest blobs that no live job
        uses (``in_use``) and that are older than ``min_age_s``, down to ``max_blobs - 1``.
        Uploads call it through :meth:`create_within`, which holds the lock around both.

        Raises:
            DlcError: ``owner`` still holds ``max_blobs`` (all in use or recent).
        """
        mine = self.owned(owner)
        for mtime, blob_id in mine:
            if len(mine) < max_blobs:
                return
            if blob_id not in in_use and now - mtime >= min_age_s:
                self.delete(blob_id)
                mine = [m for m in mine if m[1] != blob_id]
        if len(mine) >= max_blobs:
            raise DlcError(
                f"workdir: {owner} already keeps {len(mine)} snapshots, the most one user may "
                f"(queued or running jobs use them, or they are under an hour old); wait, or "
                "kill jobs you no longer need"
            )

    def delete(self, blob_id: str) -> None:
        """Remove a blob (no error if it is gone)."""
        for suffix in (".tgz", ".owner"):
            with contextlib.suppress(OSError):
                os.unlink(self._path(blob_id, suffix))
