"""The job store on PostgreSQL, for HA deployments (``dlc scheduler --db postgresql://...``).

The same :class:`~dlc.scheduler.core.ports.JobStore` port, the same methods and the same
schema migrations (:data:`dlc.store.schema.MIGRATIONS`) as the SQLite store: this class
*is* the SQLite store's logic over a psycopg 3 connection that speaks the few SQLite forms
the store and the migrations use (:func:`translate`). Differences that matter:

* several schedulers share one database (one leads, the others stand by), so writes are
  fenced with the leader epoch (:meth:`JobStore.claim_epoch`), read ``FOR UPDATE`` in the
  write's own transaction;
* losing the server is a transient :class:`~dlc.errors.StoreError` (kind
  ``"unavailable"``): the connection is re-opened and the call retried for a few seconds,
  then the error is raised (one line; a Mesos status update is then not acknowledged and
  comes again).

The password, if any, never appears in messages: they name ``host:port/db`` only.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import cast
from urllib.parse import urlsplit

import psycopg
from psycopg import pq

from dlc.errors import StoreError
from dlc.scheduler.jobs.job import Job
from dlc.store import sqlite as _sqlite
from dlc.store.schema import SCHEMA_VERSION, file_version, migrate

log = logging.getLogger(__name__)

#: how long a call keeps retrying a lost server before it gives up (seconds)
RETRY_S = 5.0
_SCHEMA_LOCK = 0x444C43  # "DLC": the advisory lock of migrations

_UPSERT = re.compile(
    r"INSERT OR REPLACE INTO (\w+)\s*\(([^)]*)\)\s*VALUES\s*(\([^)]*\))", re.IGNORECASE
)


def translate(sql: str) -> str:
    """SQLite-flavoured SQL of the store and the migrations, as PostgreSQL SQL.

    ``?`` placeholders, ``REAL`` (8-byte floats: timestamps), ``INTEGER PRIMARY KEY
    AUTOINCREMENT``, ``BEGIN IMMEDIATE``, ``INSERT OR REPLACE`` (an upsert on the first
    column, the key in every use) and the ``user`` column (a reserved word there).
    """
    sql = sql.replace("%", "%%").replace("?", "%s")
    sql = re.sub(r"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY", sql)
    sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql)
    sql = sql.replace("BEGIN IMMEDIATE", "BEGIN")
    sql = re.sub(r'(?<!["\w])user(?![\w"])', '"user"', sql)

    def upsert(match: re.Match) -> str:
        table, cols, values = (
            match.group(1),
            [c.strip() for c in match.group(2).split(",")],
            match.group(3),
        )
        rest = ", ".join(f"{c}=EXCLUDED.{c}" for c in cols[1:])
        return (
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES {values}"
            f" ON CONFLICT ({cols[0]}) DO UPDATE SET {rest}"
        )

    return _UPSERT.sub(upsert, sql)


class Row(tuple):
    """A result row read by position or by column name (like ``sqlite3.Row``)."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """Column names, in order."""
        return list(self._names)


def _row_factory(cursor):
    names = tuple(c.name for c in cursor.description or ())

    def make(values):
        row = Row(values)
        row._names = names
        return row

    return make


class PgConnection:
    """A psycopg connection with the ``sqlite3.Connection`` surface the store uses."""

    def __init__(self, url: str, connect_timeout: float = 5.0):
        self.url = url
        self._timeout = connect_timeout
        self._conn: psycopg.Connection | None = None
        self.connect()

    def connect(self) -> None:
        """(Re)open the connection, in autocommit mode (transactions are explicit)."""
        if self._conn is not None:
            self.close()
        self._conn = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(1, int(self._timeout)),
            row_factory=_row_factory,
        )

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or broken: it must be rolled back)."""
        status = self._conn.info.transaction_status if self._conn else pq.TransactionStatus.IDLE
        return status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)

    def execute(self, sql: str, args=()):
        """Run one statement (translated); returns the cursor."""
        if self._conn is None or self._conn.closed:
            self.connect()
        assert self._conn is not None  # connect() opened it
        return self._conn.execute(translate(sql), tuple(args) if args else None)

    def executemany(self, sql: str, rows) -> None:
        """Run one statement (translated) once per row of arguments, in one round trip's
        worth of pipelining (psycopg's ``executemany``)."""
        if self._conn is None or self._conn.closed:
            self.connect()
        assert self._conn is not None  # connect() opened it
        with self._conn.cursor() as cursor:
            cursor.executemany(translate(sql), [tuple(row) for row in rows])

    def close(self) -> None:
        """Close the connection (errors while closing a broken one are ignored)."""
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):  # closing a broken connection
                self._conn.close()
            self._conn = None

    # -- what dlc.store.schema asks of a non-SQLite engine --------------------------

    def has_table(self, table: str) -> bool:
        """Whether ``table`` exists in the current schema."""
        row = self.execute("SELECT to_regclass(?) IS NOT NULL", (table,)).fetchone()
        return bool(row[0])

    def table_columns(self, table: str) -> set[str]:
        """Column names of ``table``."""
        rows = self.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name=?",
            (table,),
        ).fetchall()
        return {r[0] for r in rows}

    def lock_schema(self) -> None:
        """Serialize migrations of one database across schedulers (transaction-scoped)."""
        self.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))

    def schema_version(self) -> int:
        """The version in ``dlc_schema`` (0: a new database)."""
        if not self.has_table("dlc_schema"):
            return 0
        row = self.execute("SELECT version FROM dlc_schema").fetchone()
        return int(row[0]) if row else 0

    def set_schema_version(self, version: int) -> None:
        """Record ``version`` (inside the migration's transaction)."""
        self.execute("CREATE TABLE IF NOT EXISTS dlc_schema (version INTEGER NOT NULL)")
        self.execute("DELETE FROM dlc_schema")
        self.execute("INSERT INTO dlc_schema (version) VALUES (?)", (version,))


def safe_name(url: str) -> str:
    """``postgresql://host:port/db`` without user or password (for messages and logs)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{host}{port}{parts.path or '/'}"


def _retrying(method):
    """Retry ``method`` while the server is unreachable, for up to :data:`RETRY_S`."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        deadline = time.monotonic() + RETRY_S
        delay = 0.1
        while True:
            try:
                return method(self, *args, **kwargs)
            except StoreError as exc:
                if exc.kind != "unavailable" or time.monotonic() + delay > deadline:
                    raise
                log.warning("%s; retrying in %.1f s", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                self._reconnect()

    return call


class JobStore(_sqlite.JobStore):
    """The job store on a PostgreSQL database (same methods as the SQLite store).

    Args:
        url: ``postgresql://[user[:password]@]host[:port]/db``.
        clock: time source (tests pass a fake).

    Raises:
        StoreError: the server cannot be reached, the database is not DLC's or is of a
            newer DLC (one line naming ``host:port/db`` and the fix).
    """

    _DB_ERRORS = (psycopg.Error,)
    _FOR_UPDATE = " FOR UPDATE"
    #: stands in for the SQLite store's ``sqlite3.Connection`` (the surface it uses)
    _db: PgConnection  # type: ignore[assignment]

    def __init__(self, url: str, clock=time.time):
        self.path = safe_name(url)
        self.url = url
        self._clock = clock
        self._lock = threading.RLock()
        self._unreadable = {}
        self._warned = set()
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                self._db = PgConnection(url)
                break
            except psycopg.Error as exc:
                if time.monotonic() > deadline:
                    raise self._error(exc, "connecting") from None
                time.sleep(0.2)
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        db = cast(sqlite3.Connection, self._db)  # the schema code reads the sqlite3 surface
        try:
            if file_version(db) > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} is schema {file_version(db)}, this DLC knows up to "
                    f"{SCHEMA_VERSION}; upgrade DLC or use another --db",
                    path=self.path,
                    kind="schema",
                )
            old, new = migrate(db)
        except psycopg.Error as exc:
            raise self._error(exc, "opening it") from None
        if old < new:
            log.info("migrated the job database %s from schema %d to %d", self.path, old, new)

    def _reconnect(self) -> None:
        with self._lock, contextlib.suppress(psycopg.Error):  # the next try says so
            self._db.connect()

    def _error(self, exc: BaseException, action: str) -> StoreError:
        detail = " ".join(str(exc).split())
        detail = detail if len(detail) <= 160 else detail[:157] + "..."
        if isinstance(exc, psycopg.OperationalError) or self._db_closed():
            return StoreError(
                f"job database {self.path}: {action} failed: the server cannot be reached "
                f"({detail}); check that PostgreSQL runs there, DLC retries",
                path=self.path,
                kind="unavailable",
            )
        return StoreError(
            f"job database {self.path}: {action} failed ({detail}); check the server's log",
            path=self.path,
            kind="other",
        )

    def _db_closed(self) -> bool:
        conn = getattr(getattr(self, "_db", None), "_conn", None)
        return conn is None or conn.closed

    def close(self) -> None:
        """Close the connection (a second call does nothing)."""
        with self._lock:
            self._db.close()

    @property
    def schema_version(self) -> int:
        """The schema version of the database (always :data:`SCHEMA_VERSION`)."""
        with self._read("reading the schema version"):
            return self._db.schema_version()

    # Every public call survives a short server restart or a dropped connection.
    new_job_id = _retrying(_sqlite.JobStore.new_job_id)
    new_job_ids = _retrying(_sqlite.JobStore.new_job_ids)
    add_jobs_as = _retrying(_sqlite.JobStore.add_jobs_as)

    def add_job(self, job: Job) -> Job:
        """Insert a new job under its id (:meth:`add_jobs_as`: a retry after a COMMIT whose
        answer was lost finds it stored and returns it, rather than failing on its own id)."""
        return self.add_jobs_as([job])[0]

    def add_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        """:meth:`dlc.store.sqlite.JobStore.add_jobs` with the fresh ids drawn before the
        write (:meth:`add_jobs_as`): when a COMMIT reaches the server but its answer is
        lost, the retry finds the batch stored under those ids and returns it, instead of
        storing it again under new ones (a second copy nobody was told of, run after the
        next restart)."""
        if not jobs:
            return []
        ids = self.new_job_ids(len(jobs))
        return self.add_jobs_as([replace(j, job_id=i) for j, i in zip(jobs, ids, strict=True)])

    save_job = _retrying(_sqlite.JobStore.save_job)
    save_jobs = _retrying(_sqlite.JobStore.save_jobs)
    get_job = _retrying(_sqlite.JobStore.get_job)
    list_jobs = _retrying(_sqlite.JobStore.list_jobs)
    list_jobs_page = _retrying(_sqlite.JobStore.list_jobs_page)
    history = _retrying(_sqlite.JobStore.history)
    state_events = _retrying(_sqlite.JobStore.state_events)
    quarantined = _retrying(_sqlite.JobStore.quarantined)
    get_meta = _retrying(_sqlite.JobStore.get_meta)
    set_meta = _retrying(_sqlite.JobStore.set_meta)
    add_token = _retrying(_sqlite.JobStore.add_token)
    authenticate = _retrying(_sqlite.JobStore.authenticate)
    list_tokens = _retrying(_sqlite.JobStore.list_tokens)
    knows_user = _retrying(_sqlite.JobStore.knows_user)
    user_names = _retrying(_sqlite.JobStore.user_names)
    revoke_token = _retrying(_sqlite.JobStore.revoke_token)
    claim_epoch = _retrying(_sqlite.JobStore.claim_epoch)
