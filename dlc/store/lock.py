"""One scheduler per job database: an exclusive ``flock`` on ``<db>.lock``.

Two schedulers on one file would both register the framework and overwrite each
other's jobs. The lock is taken when a scheduler service opens its store and held
until it stops (the kernel drops it when the process dies, however it dies). The
file holds the holder's pid, for the error the second scheduler prints. Real high
availability (a standby taking over) comes later with ZooKeeper leader election.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from dlc.errors import StoreError


class DbLock:
    """The exclusive lock of one job database file.

    Args:
        db_path: the database file; the lock is ``<db_path>.lock`` next to it.
    """

    def __init__(self, db_path: str | Path):
        self.db_path = str(db_path)
        self.path = Path(f"{db_path}.lock")
        self._fd: int | None = None

    def acquire(self) -> DbLock:
        """Take the lock, or fail at once.

        Raises:
            StoreError: another process holds it (the message names its pid), or the
                lock file cannot be created.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # os.open fds are not inherited by executors that dlc local starts.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(
                f"cannot create the lock file {self.path}: {exc.strerror or exc}; "
                "pass a --db in a writable directory",
                path=self.db_path,
                kind="io",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreError(
                f"{self.db_path} is in use by another DLC scheduler (pid {holder}); "
                "stop that one first, or pass another --db",
                path=self.db_path,
                kind="in_use",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go of the lock (a second call does nothing); the file stays."""
        if self._fd is not None:
            os.close(self._fd)  # closing the only fd drops the flock
            self._fd = None
