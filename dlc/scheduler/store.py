"""The job store: one SQLite file in WAL mode.

It holds everything a restarted scheduler needs to lose nothing: jobs (spec,
state, attempt, tasks with agent and GPUs, last message), the history of state
changes with timestamps, the Mesos framework id, and the API's users and tokens.

WAL lets the API threads read while the framework thread writes. One
connection guarded by a lock is enough at DLC's write rates (a few per task
state change) and keeps SQLite's threading rules simple.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

from dlc.errors import DlcError, JobNotFound
from dlc.scheduler.jobs import Job, JobSpec, JobState, TaskPlacement

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    tasks TEXT NOT NULL DEFAULT '[]',
    message TEXT NOT NULL DEFAULT '',
    kill_requested INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_submitted ON jobs(submitted_at, job_id);
CREATE TABLE IF NOT EXISTS job_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at REAL NOT NULL,
    state TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS job_events_job ON job_events(job_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
"""


def _hash(token: str) -> str:
    # Tokens are stored hashed: a copied DB file does not hand out API access.
    return hashlib.sha256(token.encode()).hexdigest()


class JobStore:
    """SQLite-backed persistence of jobs, their history, the framework id and tokens.

    Args:
        path: database file (``":memory:"`` for tests that need no restart).
        clock: time source (tests pass a fake).

    Raises:
        DlcError: the file cannot be opened or is not a DLC database.
    """

    def __init__(self, path: str | Path, clock=time.time):
        self.path = str(path)
        self._clock = clock
        self._lock = threading.RLock()
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise DlcError(
                f"cannot open the job database {self.path}: {exc}; pass a writable --db PATH"
            ) from None

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    # -- jobs -----------------------------------------------------------------

    def new_job_id(self) -> str:
        """A fresh, unused job id (``j`` + 8 hex digits)."""
        while True:
            job_id = "j" + secrets.token_hex(4)
            if self._row(job_id) is None:
                return job_id

    def add_job(self, job: Job) -> Job:
        """Insert a new job (its first history entry is its state)."""
        now = self._clock()
        job = replace(job, submitted_at=job.submitted_at or now)
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (*self._columns(job), now),
            )
            self._event(job.job_id, job.state, job.message or "submitted", now)
        return job

    def save_job(self, job: Job, event: str | None = None) -> Job:
        """Update a job; a state change (or an explicit ``event``) adds a history entry.

        Raises:
            JobNotFound: no such job.
        """
        now = self._clock()
        with self._lock, self._db:
            row = self._row(job.job_id)
            if row is None:
                raise JobNotFound(f"no job {job.job_id}")
            self._db.execute(
                "UPDATE jobs SET user=?, spec=?, state=?, submitted_at=?, attempt=?, tasks=?,"
                " message=?, kill_requested=?, failures=?, updated_at=? WHERE job_id=?",
                (*self._columns(job)[1:], now, job.job_id),
            )
            if row[3] != job.state.value or event is not None:
                self._event(job.job_id, job.state, event or job.message, now)
        return job

    def get_job(self, job_id: str) -> Job:
        """The job with ``job_id``.

        Raises:
            JobNotFound: no such job.
        """
        row = self._row(job_id)
        if row is None:
            raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")
        return self._job(row)

    def list_jobs(self, user: str | None = None, states: set[JobState] | None = None) -> list[Job]:
        """Jobs (of ``user`` when given), oldest first, optionally filtered by state."""
        sql, args = "SELECT * FROM jobs", []
        if user is not None:
            sql, args = sql + " WHERE user=?", [user]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY submitted_at, job_id", args).fetchall()
        jobs = [self._job(r) for r in rows]
        return [j for j in jobs if states is None or j.state in states]

    def list_jobs_page(self, user: str | None, limit: int, before: str | None = None) -> list[Job]:
        """Up to ``limit`` jobs (of ``user`` when given), newest first, older than job ``before``.

        Walks the ``jobs_submitted`` index backwards, so a page costs ``limit`` rows however
        many jobs the store holds.
        """
        sql, args = "SELECT * FROM jobs WHERE 1=1", []
        if user is not None:
            sql, args = sql + " AND user=?", [user]
        if before is not None:
            sql += (
                " AND (submitted_at, job_id) <"
                " (SELECT submitted_at, job_id FROM jobs WHERE job_id=?)"
            )
            args.append(before)
        sql += " ORDER BY submitted_at DESC, job_id DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, [*args, limit]).fetchall()
        return [self._job(r) for r in rows]

    def history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT at, state, message FROM job_events WHERE job_id=? ORDER BY id", (job_id,)
            ).fetchall()
        return [(at, state, msg) for at, state, msg in rows]

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, at, state FROM job_events ORDER BY at, id"
            ).fetchall()
        return [(job_id, at, state) for job_id, at, state in rows]

    # -- meta: framework id ---------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A stored setting, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Store (or with ``None`` delete) a setting, durably before returning."""
        with self._lock, self._db:
            if value is None:
                self._db.execute("DELETE FROM meta WHERE key=?", (key,))
            else:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", (key, value))

    @property
    def framework_id(self) -> str | None:
        """The Mesos framework id from the last registration."""
        return self.get_meta("framework_id")

    @framework_id.setter
    def framework_id(self, value: str | None) -> None:
        self.set_meta("framework_id", value)

    # -- users and tokens -----------------------------------------------------

    def add_token(self, user: str, admin: bool = False, token: str | None = None) -> str:
        """Create (or register the given) bearer token for ``user``; returns the token."""
        token = token or secrets.token_urlsafe(24)
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO tokens VALUES (?,?,?,?)",
                (_hash(token), user, int(admin), self._clock()),
            )
        return token

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid token, else ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT user, admin FROM tokens WHERE token_hash=?", (_hash(token),)
            ).fetchone()
        return (row[0], bool(row[1])) if row else None

    # -- helpers --------------------------------------------------------------

    def _row(self, job_id: str):
        with self._lock:
            return self._db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()

    def _event(self, job_id: str, state: JobState, message: str, at: float) -> None:
        self._db.execute(
            "INSERT INTO job_events (job_id, at, state, message) VALUES (?,?,?,?)",
            (job_id, at, state.value, message or ""),
        )

    @staticmethod
    def _columns(job: Job) -> tuple:
        return (
            job.job_id,
            job.user,
            json.dumps(job.spec.to_dict(), sort_keys=True),
            job.state.value,
            job.submitted_at,
            job.attempt,
            json.dumps([t.to_dict() for t in job.tasks]),
            job.message,
            int(job.kill_requested),
            job.failures,
        )

    @staticmethod
    def _job(row) -> Job:
        spec = JobSpec.from_dict(json.loads(row[2]))
        return Job(
            job_id=row[0],
            user=row[1],
            spec=spec,
            state=JobState(row[3]),
            submitted_at=row[4],
            attempt=row[5],
            tasks=tuple(TaskPlacement.from_dict(t) for t in json.loads(row[6])),
            message=row[7],
            kill_requested=bool(row[8]),
            failures=row[9],
        )
