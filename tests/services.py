"""PostgreSQL and ZooKeeper servers for tests, started by the project's own scripts.

``scripts/postgres.sh`` and ``scripts/zookeeper.sh`` install the Debian packages when
missing and fail loudly when they cannot; so does every fixture built on these helpers
(a missing service fails the test, it never skips it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.fixture_files import REPO_ROOT

SCRIPTS = Path(REPO_ROOT) / "scripts"


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _script(name: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{name} {' '.join(args)} failed: {done.stderr.strip()}"
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


class Postgres:
    """A private PostgreSQL server (``scripts/postgres.sh``); ``new_db()`` gives a fresh URL."""

    def __init__(self, root: Path | None = None):
        # Under /tmp, not pytest's root-only tmp dir: the server runs as `postgres`.
        self.root = root or Path(tempfile.mkdtemp(prefix="dlc-pg-"))
        self.port = free_port()
        self.url = _script("postgres.sh", "start", str(self.root), str(self.port))

    def new_db(self) -> str:
        """A URL of a new, empty database owned by the ``dlc`` user."""
        import psycopg

        name = "t" + uuid.uuid4().hex[:12]
        admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" OWNER dlc')
        return f"postgresql://dlc@127.0.0.1:{self.port}/{name}"

    def terminate_connections(self, url: str) -> int:
        """Cut every client connection to ``url``'s database (the server stays up)."""
        import psycopg

        db = url.rsplit("/", 1)[1]
        admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname=%s", (db,)
            ).fetchall()
        return len(rows)

    def stop(self) -> None:
        """Stop the server."""
        _script("postgres.sh", "stop", str(self.root))

    def remove(self) -> None:
        """Stop the server and delete its files."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self) -> None:
        """Start it again on the same port."""
        _script("postgres.sh", "start", str(self.root), str(self.port))


class ZooKeeper:
    """A private ZooKeeper server (``scripts/zookeeper.sh``) on a free loopback port."""

    def __init__(self, root: Path, port: int | None = None):
        self.root = root
        self.port = port or free_port()
        self.start()

    @property
    def hosts(self) -> str:
        """Its connect string, ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start (or restart) the server with its data dir."""
        _script("zookeeper.sh", "start", str(self.root), str(self.port))

    def stop(self) -> None:
        """Stop the server."""
        _script("zookeeper.sh", "stop", str(self.root))
