"""The job store: one SQLite file in WAL mode.

It holds everything a restarted scheduler needs to lose nothing: jobs (spec,
state, attempt, tasks with agent and GPUs, last message), the history of state
changes with timestamps, the Mesos framework id, and the API's users and tokens.

WAL lets the API threads read while the framework thread writes. One
connection guarded by a lock is enough at DLC's write rates (a few per task
state change) and keeps SQLite's threading rules simple.

State that cannot wedge the scheduler:

* the file is versioned and migrated on open (:mod:`dlc.store.schema`);
  a file from a newer DLC is refused at once;
* a job row that cannot be read is moved to the ``quarantine`` table, logged once
  and listed by :meth:`JobStore.quarantined`; everything else keeps working;
* every SQLite failure is a one-line :class:`~dlc.errors.StoreError`, and each write
  is one transaction, so a failed write leaves nothing half-saved;
* the file (and its ``-wal``/``-shm``) is readable by its owner only: it holds job
  environments.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dlc.errors import DlcError, JobNotFound, StoreError
from dlc.scheduler.jobs.job import Job, JobState
from dlc.store.errors import store_error
from dlc.store.rows import BadRow, decode_job, encode_job
from dlc.store.schema import SCHEMA_VERSION, file_version, migrate
from dlc.store.tenancy import TenancyStore

log = logging.getLogger(__name__)

#: priority ceiling of a non-admin token the operator granted nothing more
DEFAULT_MAX_PRIORITY = 0

_JOB_COLUMNS = (
    "job_id, user, spec, state, submitted_at, attempt, tasks, message, kill_requested,"
    " failures, updated_at"
)


def _hash(token: str) -> str:
    # Tokens are stored hashed: a copied DB file does not hand out API access.
    return hashlib.sha256(token.encode()).hexdigest()


def _ceiling(max_priority: int | None) -> int:
    return DEFAULT_MAX_PRIORITY if max_priority is None else max_priority


#: one history entry of a job
_EVENT_INSERT = "INSERT INTO job_events (job_id, at, state, message) VALUES (?,?,?,?)"
#: the columns a save writes (all but the id), and the statement (:meth:`JobStore.save_jobs`)
_UPDATED = (
    "user", "spec", "state", "submitted_at", "attempt", "tasks", "message", "kill_requested",
    "failures",
)  # fmt: skip
_UPDATE_JOB = (
    f"UPDATE jobs SET {', '.join(f'{c}=?' for c in _UPDATED)}, updated_at=? WHERE job_id=?"
)
#: at most so many ids in one ``IN (...)`` (SQLite's older builds allow 999 parameters)
_IN_CHUNK = 500


@dataclass(frozen=True)
class QuarantinedJob:
    """A job row that could not be read, kept aside.

    Attributes:
        job_id: the row's job id.
        reason: why it could not be read (one line).
        at: UNIX time it was quarantined.
        row: the raw column values.
        in_memory_only: the move could not be written (the file refused it); the row
            stays in ``jobs`` and is skipped until the next restart finds it again.
    """

    job_id: str
    reason: str
    at: float
    row: dict[str, Any]
    in_memory_only: bool = False


@dataclass(frozen=True)
class TokenInfo:
    """A stored API token, without the token itself.

    Attributes:
        token_id: first 12 hex digits of the token's hash (names it for revocation).
        user: who it authenticates.
        admin: admin rights (no priority ceiling).
        max_priority: highest ``--priority`` it may submit (``None``: admin, unlimited).
        created_at, expires_at: UNIX times (``expires_at`` ``None``: never).
        revoked: refused from now on.
    """

    token_id: str
    user: str
    admin: bool
    max_priority: int | None
    created_at: float
    expires_at: float | None
    revoked: bool


def make_private(path: Path) -> None:
    """Create ``path`` mode 0600 if missing; tighten an existing file (with a warning)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return
    except FileExistsError:
        pass
    for item in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if item.exists() and item.stat().st_mode & 0o077:
            log.warning("%s was readable by other users; making it private (mode 600)", item)
            item.chmod(0o600)


class JobStore(TenancyStore):
    """SQLite-backed persistence of jobs, their history, the framework id and tokens.

    Args:
        path: database file (``":memory:"`` for tests that need no restart).
        clock: time source (tests pass a fake).

    Raises:
        StoreError: the file cannot be opened, is damaged, is not a DLC database, or
            was written by a newer DLC (the message names the file and the fix).
    """

    def __init__(self, path: str | Path, clock=time.time):
        self.path = str(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._unreadable: dict[str, QuarantinedJob] = {}
        self._warned: set[str] = set()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                make_private(Path(self.path))  # SQLite gives -wal/-shm the file's mode
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"cannot open the job database {self.path}: {exc}; pass a writable --db PATH",
                path=self.path,
                kind="io",
            ) from None
        self._db.row_factory = sqlite3.Row
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        try:
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            check = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {check}")
            self._refuse_foreign_or_newer()
            old, new = migrate(self._db)
        except sqlite3.Error as exc:
            raise store_error(exc, self.path, "opening it") from None
        if 0 < old < new:
            log.info("migrated the job database %s from schema %d to %d", self.path, old, new)

    def _refuse_foreign_or_newer(self) -> None:
        version = file_version(self._db)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} is schema {version}, this DLC knows up to {SCHEMA_VERSION}; "
                "upgrade DLC or use another --db",
                path=self.path,
                kind="schema",
            )
        tables = [
            r[0]
            for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        if version == 0 and tables:
            raise StoreError(
                f"{self.path} is not a DLC job database (it has tables {', '.join(tables)}); "
                "pass another --db",
                path=self.path,
                kind="other",
            )

    def close(self) -> None:
        """Close the database (a second call does nothing)."""
        with self._lock:
            self._db.close()

    @property
    def schema_version(self) -> int:
        """The schema version of the open file (always :data:`SCHEMA_VERSION`)."""
        with self._read("reading the schema version"):
            return self._db.execute("PRAGMA user_version").fetchone()[0]

    # -- transactions ---------------------------------------------------------

    @contextmanager
    def _tx(self, action: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; any SQLite failure rolls it back as a :class:`StoreError`."""
        with self._lock:
            if self._db.in_transaction:  # nested: part of the caller's transaction
                yield self._db
                return
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._check_fence(action)
                    yield self._db
                except BaseException:
                    self._rollback()
                    raise
                self._db.execute("COMMIT")
            except self._DB_ERRORS as exc:
                self._rollback()
                raise self._error(exc, action) from None

    @contextmanager
    def transaction(self, action: str) -> Iterator[None]:
        """Make the writes inside one transaction (each joins it; a failure rolls all of
        them back as a :class:`StoreError`). The core writes an offer round's launches and
        reasons so: one commit a round, not one per launched job."""
        with self._tx(action):
            yield

    @contextmanager
    def _read(self, action: str) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except self._DB_ERRORS as exc:
                raise self._error(exc, action) from None

    def _rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except self._DB_ERRORS:  # SQLite already rolled back (e.g. after SQLITE_FULL)
            pass

    #: the driver's exception classes (the PostgreSQL store names psycopg's)
    _DB_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def _error(self, exc: BaseException, action: str) -> StoreError:
        """The one-line :class:`StoreError` for a driver failure while ``action``."""
        return store_error(exc, self.path, action)

    # -- fencing (HA: docs/ha.md) ----------------------------------------------

    #: the leader epoch this store writes under (``None``: unfenced, one scheduler)
    _fence: int | None = None
    #: appended to the epoch read so it locks the row until commit (PostgreSQL)
    _FOR_UPDATE = ""

    def claim_epoch(self) -> int:
        """Bump the leader epoch and write under it from now on; returns the new epoch.

        A new leader calls this once it has won the election: every write of an older
        leader (which checks its own epoch in the same transaction) is refused from the
        moment this commits, so two leaders never both write.
        """
        self._fence = None
        with self._tx("claiming the leader epoch") as db:
            row = db.execute(
                f"SELECT value FROM meta WHERE key='leader_epoch'{self._FOR_UPDATE}"
            ).fetchone()
            epoch = int(row[0]) + 1 if row else 1
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('leader_epoch', ?)", (str(epoch),)
            )
        self._fence = epoch
        return epoch

    def fence(self) -> None:
        """Refuse every write from now on (this instance lost its leadership)."""
        self._fence = -1

    def _check_fence(self, action: str) -> None:
        if self._fence is None:
            return
        row = self._db.execute(
            f"SELECT value FROM meta WHERE key='leader_epoch'{self._FOR_UPDATE}"
        ).fetchone()
        current = int(row[0]) if row else 0
        if current != self._fence:
            raise StoreError(
                f"job database {self.path}: {action} refused: this scheduler is no longer the"
                f" leader (epoch {self._fence}, the store is at {current}); it stands by",
                path=self.path,
                kind="fenced",
            )

    # -- jobs -----------------------------------------------------------------

    def new_job_id(self) -> str:
        """A fresh, unused job id (``j`` + 8 hex digits)."""
        while True:
            job_id = "j" + secrets.token_hex(4)
            if self._row(job_id) is None and not self._quarantine_reason(job_id):
                return job_id

    def add_job(self, job: Job) -> Job:
        """Insert a new job (its first history entry is its state), in one transaction."""
        now = self._clock()
        job = replace(job, submitted_at=job.submitted_at or now)
        values = {**encode_job(job), "updated_at": now}
        with self._tx(f"adding job {job.job_id}") as db:
            db.execute(
                f"INSERT INTO jobs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )
            self._event(job.job_id, job.state, job.message or "submitted", now)
        return job

    def new_job_ids(self, count: int) -> list[str]:
        """``count`` distinct fresh, unused job ids (for :meth:`add_jobs_as`: ids drawn
        before the write, as the PostgreSQL store's retried write needs)."""
        with self._read(f"drawing {count} job ids"):
            return self._fresh_ids(count)

    def add_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        """Insert new jobs in one transaction, each under a fresh id (the ids they carry are
        not used), with their first history entries; returns them as stored.

        Many submits, one commit: the core's job book writes the submits that arrived while
        the previous write ran together (``dlc/scheduler/core/job_book.py``), so a stream of
        submits is not one transaction, and one lock hand-over, per job."""
        if not jobs:
            return []
        with self._tx(f"adding {len(jobs)} jobs"):
            ids = self._fresh_ids(len(jobs))
            return self._insert_new([replace(j, job_id=i) for j, i in zip(jobs, ids, strict=True)])

    def add_jobs_as(self, jobs: Sequence[Job]) -> list[Job]:
        """:meth:`add_jobs` under the ids the jobs carry (drawn by :meth:`new_job_ids`); a
        batch stored already under them, by the same users, is returned as stored and not
        written again: a retry after a COMMIT whose answer was lost stores each job once
        (the PostgreSQL store's batch write).

        Raises:
            StoreError: the write failed, or some of the ids belong to other jobs.
        """
        if not jobs:
            return []
        with self._tx(f"adding {len(jobs)} jobs"):
            if self._stored_already(jobs):
                return self._stored_as(jobs)
            return self._insert_new(jobs)

    def _insert_new(self, jobs: Sequence[Job]) -> list[Job]:
        """Insert ``jobs`` under their ids with their first history entries (in a
        transaction); returns them as stored."""
        now = self._clock()
        db = self._db
        stored = [replace(job, submitted_at=job.submitted_at or now) for job in jobs]
        rows = [{**encode_job(job), "updated_at": now} for job in stored]
        columns = list(rows[0])
        insert = f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        values = [tuple(row[c] for c in columns) for row in rows]
        events = [(j.job_id, now, j.state.value, j.message or "submitted") for j in stored]
        many = getattr(db, "executemany", None)  # PostgreSQL's connection has none
        if many is not None:
            many(insert, values)
            many(_EVENT_INSERT, events)
        else:
            for row_values, event in zip(values, events, strict=True):
                db.execute(insert, row_values)
                db.execute(_EVENT_INSERT, event)
        return stored

    def _stored_already(self, jobs: Sequence[Job]) -> bool:
        """Whether every job of ``jobs`` is stored under its id by its user (in a
        transaction). Some, or another user's: the ids collided with other jobs, an error."""
        marks = ", ".join("?" * len(jobs))
        found = dict(
            self._db.execute(
                f"SELECT job_id, user FROM jobs WHERE job_id IN ({marks})",
                tuple(job.job_id for job in jobs),
            ).fetchall()
        )
        if not found:
            return False
        if len(found) == len(jobs) and all(found.get(j.job_id) == j.user for j in jobs):
            return True
        raise StoreError(
            f"job database {self.path}: job ids {', '.join(sorted(found))} are taken; "
            "submit again (new ids are drawn)",
            path=self.path,
        )

    def _stored_as(self, jobs: Sequence[Job]) -> list[Job]:
        """``jobs`` as stored (in their order)."""
        marks = ", ".join("?" * len(jobs))
        rows = self._db.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id IN ({marks})",
            tuple(job.job_id for job in jobs),
        ).fetchall()
        by_id = {job.job_id: job for job in self._decode(rows)}
        return [by_id.get(job.job_id, job) for job in jobs]

    def _fresh_ids(self, count: int) -> list[str]:
        """``count`` distinct job ids no stored or quarantined job has (in a transaction)."""
        ids: list[str] = []
        while len(ids) < count:
            drawn = list({"j" + secrets.token_hex(4) for _ in range(count - len(ids))} - set(ids))
            marks = ", ".join("?" * len(drawn))
            taken = {
                row[0]
                for row in self._db.execute(
                    f"SELECT job_id FROM jobs WHERE job_id IN ({marks}) "
                    f"UNION SELECT job_id FROM quarantine WHERE job_id IN ({marks})",
                    (*drawn, *drawn),
                )
            }
            ids += [i for i in drawn if i not in taken and i not in self._unreadable]
        return ids

    def save_job(self, job: Job, event: str | None = None) -> Job:
        """Update a job; a state change (or an explicit ``event``) adds a history entry.

        Raises:
            JobNotFound: no such job.
            StoreError: the write failed; nothing of it was saved.
        """
        now = self._clock()
        values = {**encode_job(job), "updated_at": now}
        del values["job_id"]
        with self._tx(f"saving job {job.job_id}") as db:
            row = self._row(job.job_id)
            if row is None:
                raise JobNotFound(f"no job {job.job_id}")
            db.execute(
                f"UPDATE jobs SET {', '.join(f'{k}=?' for k in values)} WHERE job_id=?",
                (*values.values(), job.job_id),
            )
            if row["state"] != job.state.value or event is not None:
                self._event(job.job_id, job.state, event or job.message, now)
        return job

    def save_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        """:meth:`save_job` for each of ``jobs`` (no explicit event), in one transaction
        with one statement per table: an offer round's launches. One job's write per
        transaction, each encoded with ``dataclasses.asdict``, was most of the time an offer
        round held the job book's lock (issue 26).

        Raises:
            JobNotFound: one of them is not stored (nothing was saved).
            StoreError: the write failed; nothing of it was saved.
        """
        if not jobs:
            return []
        now = self._clock()
        with self._tx(f"saving {len(jobs)} jobs") as db:
            states = self._states([job.job_id for job in jobs])
            rows, events = [], []
            for job in jobs:
                before = states.get(job.job_id)
                if before is None:
                    raise JobNotFound(f"no job {job.job_id}")
                values = encode_job(job)
                rows.append((*(values[c] for c in _UPDATED), now, job.job_id))
                if before != job.state.value:
                    events.append((job.job_id, now, job.state.value, job.message or ""))
                states[job.job_id] = job.state.value  # a job twice: its second write
            self._many(db, _UPDATE_JOB, rows)
            self._many(db, _EVENT_INSERT, events)
        return list(jobs)

    def _states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """job id -> stored state, for those of ``job_ids`` that are stored."""
        states: dict[str, str] = {}
        for start in range(0, len(job_ids), _IN_CHUNK):
            chunk = tuple(job_ids[start : start + _IN_CHUNK])
            marks = ", ".join("?" * len(chunk))
            for row in self._db.execute(
                f"SELECT job_id, state FROM jobs WHERE job_id IN ({marks})", chunk
            ).fetchall():
                states[row[0]] = row[1]
        return states

    @staticmethod
    def _many(db, sql: str, rows: Sequence[tuple]) -> None:
        """``sql`` once per row (one ``executemany`` where the driver has it)."""
        if not rows:
            return
        many = getattr(db, "executemany", None)
        if many is not None:
            many(sql, rows)
        else:
            for row in rows:
                db.execute(sql, row)

    def save_messages(self, jobs: Sequence[Job]) -> None:
        """Write the new message of each of ``jobs`` (their state and everything else as
        stored; no history entry, as :meth:`save_job` adds none for a message alone), in one
        transaction. An offer round's waiting reasons: the first round of 10,000 queued jobs
        wrote each in its own transaction, with the whole job encoded again."""
        if not jobs:
            return
        now = self._clock()
        with self._tx(f"saving the messages of {len(jobs)} jobs") as db:
            for job in jobs:
                db.execute(
                    "UPDATE jobs SET message=?, updated_at=? WHERE job_id=?",
                    (job.message, now, job.job_id),
                )

    def get_job(self, job_id: str) -> Job:
        """The job with ``job_id``.

        Raises:
            JobNotFound: no such job, or its row cannot be read (it is then quarantined).
        """
        row = self._row(job_id)
        jobs = self._decode([row]) if row is not None else []
        if jobs:
            return jobs[0]
        if row is not None or self._quarantine_reason(job_id):
            raise JobNotFound(
                f"job {job_id} cannot be read and is quarantined; "
                "the scheduler log says why (ask the operator)"
            )
        raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")

    def list_jobs(
        self,
        user: str | None = None,
        states: set[JobState] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs (of ``user`` when given, in ``states`` when given), oldest first.

        ``newest_first`` reverses the order and ``limit`` caps the count; both are
        served by indexes. Rows that cannot be read are quarantined and left out.
        """
        if states is not None and not states:
            return []
        while True:
            sql, args = self.list_sql(user, states, limit, newest_first)
            with self._read("listing jobs"):
                rows = self._db.execute(sql, args).fetchall()
            jobs = self._decode(rows)
            if limit is None or len(jobs) == len(rows):
                return jobs  # else quarantined rows left the page: fill it again

    def list_sql(
        self,
        user: str | None = None,
        states: set[JobState] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> tuple[str, list]:
        """The SELECT :meth:`list_jobs` runs (tests check its query plan uses indexes)."""
        where: list[str] = []
        args: list[str | int] = []
        if user is not None:
            where.append("user=?")
            args.append(user)
        if states is not None:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args.extend(sorted(s.value for s in states))
        if self._unreadable:
            where.append(f"job_id NOT IN ({', '.join('?' * len(self._unreadable))})")
            args.extend(self._unreadable)
        order = " DESC" if newest_first else ""
        sql = f"SELECT {_JOB_COLUMNS} FROM jobs"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        sql += f" ORDER BY submitted_at{order}, job_id{order}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return sql, args

    def list_jobs_page(self, user: str | None, limit: int, before: str | None = None) -> list[Job]:
        """Up to ``limit`` jobs (of ``user`` when given), newest first, older than job ``before``.

        Walks the ``jobs_time``/``jobs_user_time`` indexes backwards, so a page costs
        ``limit`` rows however many jobs the store holds. Unreadable rows are quarantined
        and left out, like :meth:`list_jobs`.
        """
        where, args = ["1=1"], []
        if user is not None:
            where.append("user=?")
            args.append(user)
        if before is not None:
            where.append(
                "(submitted_at, job_id) < (SELECT submitted_at, job_id FROM jobs WHERE job_id=?)"
            )
            args.append(before)
        sql = (
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)}"
            " ORDER BY submitted_at DESC, job_id DESC LIMIT ?"
        )
        while True:
            with self._read("listing jobs"):
                rows = self._db.execute(sql, [*args, limit]).fetchall()
            jobs = self._decode(rows)
            if len(jobs) == len(rows):
                return jobs  # else quarantined rows left the page: read it again

    def history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        with self._read(f"reading the history of job {job_id}"):
            rows = self._db.execute(
                "SELECT at, state, message FROM job_events WHERE job_id=? ORDER BY id", (job_id,)
            ).fetchall()
        return [(at, state, msg) for at, state, msg in rows]

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        with self._read("reading job history"):
            rows = self._db.execute(
                "SELECT job_id, at, state FROM job_events ORDER BY at, id"
            ).fetchall()
        return [(job_id, at, state) for job_id, at, state in rows]

    # -- quarantine -----------------------------------------------------------

    def quarantined(self) -> list[QuarantinedJob]:
        """Job rows that could not be read, oldest first (each was logged once)."""
        with self._read("listing quarantined jobs"):
            rows = self._db.execute(
                "SELECT job_id, reason, at, row FROM quarantine ORDER BY id"
            ).fetchall()
        stored = [
            QuarantinedJob(r["job_id"], r["reason"], r["at"], json.loads(r["row"])) for r in rows
        ]
        return stored + list(self._unreadable.values())

    def _decode(self, rows) -> list[Job]:
        jobs = []
        for row in rows:
            try:
                job, warnings = decode_job(row)
            except BadRow as exc:
                self._quarantine(row, str(exc))
                continue
            if warnings and job.job_id not in self._warned:
                self._warned.add(job.job_id)
                log.warning("job %s in %s: %s", job.job_id, self.path, "; ".join(warnings))
            jobs.append(job)
        return jobs

    def _quarantine(self, row: sqlite3.Row, reason: str) -> None:
        raw = {key: row[key] for key in row.keys()}  # noqa: SIM118 (iterating a Row gives values)
        job_id = str(raw.get("job_id"))
        entry = QuarantinedJob(job_id, reason, self._clock(), raw)
        try:
            with self._tx(f"quarantining job {job_id}") as db:
                db.execute(
                    "INSERT INTO quarantine (job_id, row, reason, at) VALUES (?,?,?,?)",
                    (job_id, json.dumps(raw, default=repr), reason, entry.at),
                )
                db.execute("DELETE FROM jobs WHERE job_id=?", (row["job_id"],))
        except StoreError as exc:
            self._unreadable[job_id] = replace(entry, in_memory_only=True)
            log.warning("job %s cannot be read (%s); skipping it: %s", job_id, reason, exc)
            return
        log.warning(
            "job %s in %s cannot be read and was moved to its quarantine table: %s",
            job_id,
            self.path,
            reason,
        )

    def _quarantine_reason(self, job_id: str) -> str | None:
        if job_id in self._unreadable:
            return self._unreadable[job_id].reason
        with self._read(f"looking up job {job_id}"):
            row = self._db.execute(
                "SELECT reason FROM quarantine WHERE job_id=?", (job_id,)
            ).fetchone()
        return row[0] if row else None

    # -- meta: framework id ---------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A stored setting, or ``None``."""
        with self._read(f"reading {key}"):
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Store (or with ``None`` delete) a setting, durably before returning."""
        with self._tx(f"saving {key}") as db:
            if value is None:
                db.execute("DELETE FROM meta WHERE key=?", (key,))
            else:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?,?)", (key, value))

    @property
    def framework_id(self) -> str | None:
        """The Mesos framework id from the last registration."""
        return self.get_meta("framework_id")

    @framework_id.setter
    def framework_id(self, value: str | None) -> None:
        self.set_meta("framework_id", value)

    # -- users and tokens -----------------------------------------------------

    def add_token(
        self,
        user: str,
        admin: bool = False,
        token: str | None = None,
        max_priority: int | None = None,
        expires_at: float | None = None,
    ) -> str:
        """Create (or register the given) bearer token for ``user``; returns the token.

        ``max_priority`` is the highest priority its jobs may ask for (ignored for
        admins, who have none; default :data:`DEFAULT_MAX_PRIORITY`); ``expires_at`` a
        UNIX time after which it is refused.
        """
        token = token or secrets.token_urlsafe(24)
        with self._tx(f"adding a token for {user}") as db:
            db.execute(
                "INSERT OR REPLACE INTO tokens"
                " (token_hash, user, admin, created_at, max_priority, expires_at, revoked)"
                " VALUES (?,?,?,?,?,?,0)",
                (_hash(token), user, int(admin), self._clock(), max_priority, expires_at),
            )
        return token

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid token, else ``None``.

        Expired and revoked tokens are refused. ``max_priority`` is ``None`` for admins
        (unlimited) and an int for everyone else.
        """
        with self._read("checking a token"):
            row = self._db.execute(
                "SELECT user, admin, max_priority, expires_at, revoked FROM tokens"
                " WHERE token_hash=?",
                (_hash(token),),
            ).fetchone()
        if row is None or row["revoked"]:
            return None
        if row["expires_at"] is not None and row["expires_at"] <= self._clock():
            return None
        if row["admin"]:
            return row["user"], True, None
        return row["user"], False, _ceiling(row["max_priority"])

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid (unexpired, unrevoked) token, else ``None``."""
        found = self.authenticate(token)
        return (found[0], found[1]) if found else None

    def list_tokens(self) -> list[TokenInfo]:
        """Every stored token (without the token), oldest first."""
        with self._read("listing tokens"):
            rows = self._db.execute(
                "SELECT token_hash, user, admin, max_priority, created_at, expires_at, revoked"
                " FROM tokens ORDER BY created_at, token_hash"
            ).fetchall()
        return [
            TokenInfo(
                token_id=r["token_hash"][:12],
                user=r["user"],
                admin=bool(r["admin"]),
                max_priority=None if r["admin"] else _ceiling(r["max_priority"]),
                created_at=r["created_at"],
                expires_at=r["expires_at"],
                revoked=bool(r["revoked"]),
            )
            for r in rows
        ]

    def expire_token(self, token_or_id: str, at: float | None) -> TokenInfo:
        """Set when a token stops working (``at`` ``None``: never), named as for
        :meth:`revoke_token`.

        Raises:
            DlcError: no token, or an id prefix that matches more than one.
        """
        found = self._one_token(token_or_id)
        with self._tx(f"setting the expiry of token {found.token_id}") as db:
            db.execute(
                "UPDATE tokens SET expires_at=? WHERE substr(token_hash, 1, 12)=?",
                (at, found.token_id),
            )
        return replace(found, expires_at=at)

    def revoke_token(self, token_or_id: str) -> TokenInfo:
        """Refuse a token from now on, named by itself or its ``token_id`` (8+ hex digits).

        Raises:
            DlcError: no token, or an id prefix that matches more than one.
        """
        found = self._one_token(token_or_id)
        with self._tx(f"revoking token {found.token_id}") as db:
            db.execute(
                "UPDATE tokens SET revoked=1 WHERE substr(token_hash, 1, 12)=?",
                (found.token_id,),
            )
        return replace(found, revoked=True)

    def _one_token(self, token_or_id: str) -> TokenInfo:
        matches = [
            t
            for t in self.list_tokens()
            if _hash(token_or_id).startswith(t.token_id)
            or (len(token_or_id) >= 8 and t.token_id.startswith(token_or_id.lower()))
        ]
        if len(matches) != 1:
            what = "no token" if not matches else f"{len(matches)} tokens"
            raise DlcError(
                f"token {token_or_id!r}: {what} match; give a token id from the token list "
                "(8 or more of its hex digits)"
            )
        return matches[0]

    def knows_user(self, user: str) -> bool:
        """Whether any token (revoked or expired too), group member or job is ``user``'s: a
        name the cluster has seen, not a typo (``PUT /v1/limits`` warns of one). The jobs
        are looked up by their user index: one probe however many jobs the store holds."""
        with self._read("looking a user up"):
            row = self._db.execute(
                "SELECT EXISTS (SELECT 1 FROM tokens WHERE user=?)"
                " OR EXISTS (SELECT 1 FROM group_members WHERE user=?)"
                " OR EXISTS (SELECT 1 FROM jobs WHERE user=?) AS known",
                (user, user, user),
            ).fetchone()
        return bool(row["known"])

    def user_names(self) -> list[str]:
        """The names of every token's user and group member, sorted (a job's owner signed in
        with a token: jobs add no name, and reading them all would cost a pass over every job)."""
        with self._read("listing users"):
            rows = self._db.execute(
                "SELECT user FROM tokens UNION SELECT user FROM group_members"
            ).fetchall()
        return sorted(r["user"] for r in rows)

    # -- helpers --------------------------------------------------------------

    def _row(self, job_id: str) -> sqlite3.Row | None:
        with self._read(f"reading job {job_id}"):
            return self._db.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id=?", (job_id,)
            ).fetchone()

    def _event(self, job_id: str, state: JobState, message: str, at: float) -> None:
        self._db.execute(
            _EVENT_INSERT,
            (job_id, at, state.value, message or ""),
        )
