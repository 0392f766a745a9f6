"""An in-memory job store: the :class:`~dlc.scheduler.core.ports.JobStore` port without a file.

For tests and the simulator, which want the scheduler's exact behaviour without SQLite.
It keeps what :class:`dlc.store.sqlite.JobStore` keeps (jobs, their history, settings,
tokens, tenancy) with the same answers; ``tests/store/test_store_contract.py`` and
``tests/store/test_store_tenancy.py`` run their tests against both. Nothing survives
the process; nothing is ever quarantined (a job kept as an object cannot be unreadable).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from dlc.errors import DlcError, JobNotFound
from dlc.scheduler.jobs.job import Job, JobState
from dlc.store.memory_tenancy import MemoryTenancy
from dlc.store.sqlite import DEFAULT_MAX_PRIORITY, QuarantinedJob, TokenInfo


@dataclass
class _Token:
    user: str
    admin: bool
    max_priority: int | None
    created_at: float
    expires_at: float | None
    revoked: bool = False


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class MemoryJobStore(MemoryTenancy):
    """Jobs, history, settings, tokens and the tenancy policy in dicts (thread-safe).

    Args:
        clock: time source (the simulator passes its virtual clock).
        sequential_ids: number jobs in submit order (``j00000001``, ...) instead of random
            ids. The queue breaks ties of priority and submit time by job id, and the
            simulator submits a whole batch at one virtual instant: with random ids two
            identical runs placed different counts; with these, the order is the submit order.
    """

    def __init__(self, clock: Callable[[], float] = time.time, sequential_ids: bool = False):
        self._clock = clock
        self._sequence = 0 if sequential_ids else None
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._events: list[tuple[str, float, str, str]] = []
        self._meta: dict[str, str] = {}
        self._tokens: dict[str, _Token] = {}
        self._init_tenancy()
        self.path = ":memory:"

    def close(self) -> None:
        """Nothing to release (kept for the same shape as the SQLite store)."""

    # -- jobs -----------------------------------------------------------------

    def new_job_id(self) -> str:
        """A fresh, unused job id (``j`` + 8 hex digits)."""
        with self._lock:
            while True:
                if self._sequence is not None:
                    self._sequence += 1
                    job_id = f"j{self._sequence:08x}"
                else:
                    job_id = "j" + secrets.token_hex(4)
                if job_id not in self._jobs:
                    return job_id

    def add_job(self, job: Job) -> Job:
        """Store a new job (its first history entry is its state).

        Raises:
            DlcError: a job with this id exists already.
        """
        with self._lock:
            if job.job_id in self._jobs:
                raise DlcError(f"job {job.job_id} exists already; use a new job id")
            now = self._clock()
            job = replace(job, submitted_at=job.submitted_at or now)
            self._jobs[job.job_id] = job
            self._events.append((job.job_id, now, job.state.value, job.message or "submitted"))
            return job

    def save_job(self, job: Job, event: str | None = None) -> Job:
        """Update a job; a state change (or an explicit ``event``) adds a history entry.

        Raises:
            JobNotFound: no such job.
        """
        with self._lock:
            old = self._jobs.get(job.job_id)
            if old is None:
                raise JobNotFound(f"no job {job.job_id}")
            self._jobs[job.job_id] = job
            if old.state is not job.state or event is not None:
                self._events.append(
                    (job.job_id, self._clock(), job.state.value, event or job.message or "")
                )
            return job

    def save_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        """:meth:`save_job` for each of ``jobs``, all or none (as the SQLite store).

        Raises:
            JobNotFound: one of them is not stored (nothing was saved).
        """
        with self._lock:
            for job in jobs:
                if job.job_id not in self._jobs:
                    raise JobNotFound(f"no job {job.job_id}")
            return [self.save_job(job) for job in jobs]

    def save_messages(self, jobs: Sequence[Job]) -> None:
        """Store the new message of each of ``jobs`` (as the SQLite store: no history)."""
        with self._lock:
            for job in jobs:
                if job.job_id not in self._jobs:
                    raise JobNotFound(f"no job {job.job_id}")
                self._jobs[job.job_id] = job

    def get_job(self, job_id: str) -> Job:
        """The job with ``job_id``.

        Raises:
            JobNotFound: no such job.
        """
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")
        return job

    def list_jobs(
        self,
        user: str | None = None,
        states: set[JobState] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs (of ``user`` when given, in ``states`` when given), oldest first."""
        with self._lock:
            jobs = [
                j
                for j in self._jobs.values()
                if (user is None or j.user == user) and (states is None or j.state in states)
            ]
        jobs.sort(key=_time_key, reverse=newest_first)
        return jobs if limit is None else jobs[: int(limit)]

    def list_jobs_page(self, user: str | None, limit: int, before: str | None = None) -> list[Job]:
        """Up to ``limit`` jobs (of ``user`` when given), newest first, older than ``before``
        (no job: an empty page, as the SQLite store answers)."""
        jobs = self.list_jobs(user, newest_first=True)
        if before is not None:
            with self._lock:
                mark = self._jobs.get(before)
            if mark is None:
                return []
            jobs = [j for j in jobs if _time_key(j) < _time_key(mark)]
        return jobs[:limit]

    def history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        with self._lock:
            return [(at, state, msg) for jid, at, state, msg in self._events if jid == job_id]

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        with self._lock:
            events = [(jid, at, state) for jid, at, state, _ in self._events]
        return sorted(events, key=lambda e: e[1])  # stable: equal times keep insertion order

    def quarantined(self) -> list[QuarantinedJob]:
        """Always empty: an object in memory cannot be unreadable."""
        return []

    # -- meta -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A stored setting, or ``None``."""
        with self._lock:
            return self._meta.get(key)

    def set_meta(self, key: str, value: str | None) -> None:
        """Store (or with ``None`` delete) a setting."""
        with self._lock:
            if value is None:
                self._meta.pop(key, None)
            else:
                self._meta[key] = value

    @property
    def framework_id(self) -> str | None:
        """The Mesos framework id from the last registration."""
        return self.get_meta("framework_id")

    @framework_id.setter
    def framework_id(self, value: str | None) -> None:
        self.set_meta("framework_id", value)

    # -- tokens ---------------------------------------------------------------

    def add_token(
        self,
        user: str,
        admin: bool = False,
        token: str | None = None,
        max_priority: int | None = None,
        expires_at: float | None = None,
    ) -> str:
        """Create (or register the given) bearer token for ``user``; returns the token."""
        token = token or secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[_hash(token)] = _Token(
                user, admin, max_priority, self._clock(), expires_at
            )
        return token

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid token, else ``None``."""
        with self._lock:
            found = self._tokens.get(_hash(token))
        if found is None or found.revoked:
            return None
        if found.expires_at is not None and found.expires_at <= self._clock():
            return None
        if found.admin:
            return found.user, True, None
        return found.user, False, _ceiling(found.max_priority)

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid token, else ``None``."""
        found = self.authenticate(token)
        return (found[0], found[1]) if found else None

    def list_tokens(self) -> list[TokenInfo]:
        """Every stored token (without the token), oldest first."""
        with self._lock:
            items = sorted(self._tokens.items(), key=lambda kv: (kv[1].created_at, kv[0]))
        return [
            TokenInfo(
                token_id=digest[:12],
                user=t.user,
                admin=t.admin,
                max_priority=None if t.admin else _ceiling(t.max_priority),
                created_at=t.created_at,
                expires_at=t.expires_at,
                revoked=t.revoked,
            )
            for digest, t in items
        ]

    def revoke_token(self, token_or_id: str) -> TokenInfo:
        """Refuse a token from now on, named by itself or its ``token_id`` (8+ hex digits).

        Raises:
            DlcError: no token, or an id prefix that matches more than one.
        """
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
        with self._lock:
            for digest, record in self._tokens.items():
                if digest.startswith(matches[0].token_id):
                    record.revoked = True
        return replace(matches[0], revoked=True)

    def knows_user(self, user: str) -> bool:
        """Whether any token (revoked or expired too), group member or job is ``user``'s (as
        :meth:`dlc.store.sqlite.JobStore.knows_user`)."""
        with self._lock:
            return (any(t.user == user for t in self._tokens.values()) or user in self._members
                    or any(j.user == user for j in self._jobs.values()))  # fmt: skip

    def user_names(self) -> list[str]:
        """The names of every token's user and group member, sorted (as
        :meth:`dlc.store.sqlite.JobStore.user_names`)."""
        with self._lock:
            return sorted({t.user for t in self._tokens.values()} | set(self._members))


def _time_key(job: Job) -> tuple[float, str]:
    return (job.submitted_at, job.job_id)


def _ceiling(max_priority: int | None) -> int:
    return DEFAULT_MAX_PRIORITY if max_priority is None else max_priority
