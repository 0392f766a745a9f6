"""The job database's schema: its version, and the migrations that reach it.

Both engines run the SAME ordered list, :data:`MIGRATIONS`: SQLite (the embedded default,
:mod:`dlc.store.sqlite`) and PostgreSQL (HA deployments, :mod:`dlc.store.postgres`). A
migration is a function of a connection with ``execute(sql, args)`` written in plain
SQLite-flavoured SQL (``?`` placeholders, ``REAL``, ``INTEGER PRIMARY KEY AUTOINCREMENT``,
``INSERT OR REPLACE``); the PostgreSQL connection translates those few forms
(:func:`dlc.store.postgres.translate`). To inspect the schema a migration uses
:func:`table_columns` / :func:`has_table`, never ``PRAGMA`` or ``sqlite_master`` directly.
Add a migration by appending a function to :data:`MIGRATIONS` (never reorder or edit a
released one); :data:`SCHEMA_VERSION` follows.

In SQLite the version lives in ``PRAGMA user_version``; in PostgreSQL in the one-row
table ``dlc_schema``. Version 0 with no tables is
a new file; version 0 *with* a ``jobs`` table is a file from a DLC before schema
versioning (treated as version 1, whatever order its columns are in). Opening a
file runs every missing migration, in order, in one transaction: a migration
that fails leaves the file exactly as it was. A file of a newer version than
:data:`SCHEMA_VERSION` is refused: an older DLC cannot know what it means.

Every statement elsewhere names its columns, so column order never matters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

#: jobs columns and how a pre-versioning file that lacks one gets it
JOB_COLUMNS: dict[str, str] = {
    "job_id": "TEXT PRIMARY KEY",
    "user": "TEXT NOT NULL DEFAULT ''",
    "spec": "TEXT NOT NULL DEFAULT '{}'",
    "state": "TEXT NOT NULL DEFAULT 'queued'",
    "submitted_at": "REAL NOT NULL DEFAULT 0",
    "attempt": "INTEGER NOT NULL DEFAULT 0",
    "tasks": "TEXT NOT NULL DEFAULT '[]'",
    "message": "TEXT NOT NULL DEFAULT ''",
    "kill_requested": "INTEGER NOT NULL DEFAULT 0",
    "failures": "INTEGER NOT NULL DEFAULT 0",
    "updated_at": "REAL NOT NULL DEFAULT 0",
}

_BASE = """
CREATE TABLE IF NOT EXISTS jobs ({columns});
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


def _v1_base(db: sqlite3.Connection) -> None:
    """The tables of the first DLC."""
    columns = ", ".join(f"{name} {decl}" for name, decl in JOB_COLUMNS.items())
    for statement in _BASE.format(columns=columns).split(";"):
        if statement.strip():
            db.execute(statement)


def table_columns(db, table: str) -> set[str]:
    """The column names of ``table`` (either engine)."""
    if hasattr(db, "table_columns"):  # the PostgreSQL connection
        return db.table_columns(table)
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def has_table(db, table: str) -> bool:
    """Whether ``table`` exists (either engine)."""
    if hasattr(db, "has_table"):
        return db.has_table(table)
    sql = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
    return db.execute(sql, (table,)).fetchone() is not None


def _fill_job_columns(db: sqlite3.Connection) -> None:
    """Add the jobs columns a pre-versioning file lacks (with their defaults)."""
    have = table_columns(db, "jobs")
    for name, decl in JOB_COLUMNS.items():
        if name not in have:  # ADD COLUMN cannot add a key; job_id is always there
            db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")


def _v2_quarantine_and_indexes(db: sqlite3.Connection) -> None:
    """Quarantine for unreadable rows; indexes so no offer round or listing scans all jobs."""
    _fill_job_columns(db)
    db.execute(
        "CREATE TABLE IF NOT EXISTS quarantine ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL, row TEXT NOT NULL,"
        " reason TEXT NOT NULL, at REAL NOT NULL)"
    )
    db.execute("DROP INDEX IF EXISTS jobs_state")
    # The queue (state = 'queued' in submit order) and active jobs for reconciliation.
    db.execute("CREATE INDEX IF NOT EXISTS jobs_state_time ON jobs(state, submitted_at, job_id)")
    # A user's jobs, newest first (dlc jobs, paginated listing).
    db.execute(
        "CREATE INDEX IF NOT EXISTS jobs_user_time ON jobs(user, submitted_at DESC, job_id DESC)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS jobs_time ON jobs(submitted_at DESC, job_id DESC)")


def _v3_token_limits(db: sqlite3.Connection) -> None:
    """Per-token priority ceiling, expiry and revocation."""
    db.execute("ALTER TABLE tokens ADD COLUMN max_priority INTEGER")
    db.execute("ALTER TABLE tokens ADD COLUMN expires_at REAL")
    db.execute("ALTER TABLE tokens ADD COLUMN revoked INTEGER NOT NULL DEFAULT 0")


def _v4_tenancy(db: sqlite3.Connection) -> None:
    """Groups, members, quotas per pool, user limits and the quota audit log (issue 13).
    Additive: no existing table changes."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS tenancy_groups (name TEXT PRIMARY KEY,"
        " default_pool TEXT NOT NULL DEFAULT 'default',"
        " preempt_within INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL DEFAULT 0)"
    )
    # a user is in one group (the primary key), so a job's group is never ambiguous
    db.execute(
        "CREATE TABLE IF NOT EXISTS group_members (user TEXT PRIMARY KEY, group_name TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS quotas (group_name TEXT NOT NULL, pool TEXT NOT NULL,"
        " gpus REAL NOT NULL DEFAULT 0, cpus REAL NOT NULL DEFAULT 0,"
        " mem_mib REAL NOT NULL DEFAULT 0, ceil_gpus REAL, ceil_cpus REAL, ceil_mem_mib REAL,"
        " PRIMARY KEY (group_name, pool))"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS user_limits (user TEXT PRIMARY KEY, max_running INTEGER,"
        " max_gpus REAL, max_interactive_s REAL)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS quota_audit (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " at REAL NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, detail TEXT NOT NULL)"
    )


def _v5_interactive_cap(db: sqlite3.Connection) -> None:
    """Per-user cap on interactive environments running at once (issue 13). Additive."""
    db.execute("ALTER TABLE user_limits ADD COLUMN max_interactive INTEGER")


def _v6_fair_usage(db: sqlite3.Connection) -> None:
    """Decayed GPU-hours per group and user, as of ``at`` (fair share over time, issue 28).
    Additive: one new table."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS fair_usage (group_name TEXT NOT NULL, user TEXT NOT NULL,"
        " gpu_hours REAL NOT NULL DEFAULT 0, at REAL NOT NULL DEFAULT 0,"
        " PRIMARY KEY (group_name, user))"
    )


def _v7_cpu_limit(db: sqlite3.Connection) -> None:
    """Per-user cap on CPUs held at once (``max_cpus``: CPU-only jobs had no per-user bound
    but ``max_running``). Additive: existing users get no cap."""
    db.execute("ALTER TABLE user_limits ADD COLUMN max_cpus REAL")


def _v8_mem_limit(db: sqlite3.Connection) -> None:
    """Per-user cap on memory held at once (``max_mem_mib``: a CPU-only job of little CPU
    and much memory was bounded by no per-user limit). Additive: existing users get no cap."""
    db.execute("ALTER TABLE user_limits ADD COLUMN max_mem_mib REAL")


#: migration ``i`` brings a database from version ``i`` to ``i + 1``; both engines run
#: this list (append only: see the module docstring)
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _v1_base,
    _v2_quarantine_and_indexes,
    _v3_token_limits,
    _v4_tenancy,
    _v5_interactive_cap,
    _v6_fair_usage,
    _v7_cpu_limit,
    _v8_mem_limit,
]

#: the newest schema this DLC knows
SCHEMA_VERSION = len(MIGRATIONS)


def file_version(db: sqlite3.Connection) -> int:
    """The schema version of an open database (1 for a file from before versioning)."""
    if hasattr(db, "schema_version"):  # the PostgreSQL connection
        return db.schema_version()
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == 0 and has_table(db, "jobs"):
        return 1
    return version


def _set_version(db, version: int) -> None:
    if hasattr(db, "set_schema_version"):
        db.set_schema_version(version)
    else:
        db.execute(f"PRAGMA user_version = {int(version)}")


def migrate(db: sqlite3.Connection, migrations=None) -> tuple[int, int]:
    """Run the missing migrations in one transaction; returns ``(from, to)`` versions.

    ``db`` must be in autocommit mode (SQLite: ``isolation_level=None``). A newer file is not
    touched: the caller compares the returned ``from`` with :data:`SCHEMA_VERSION`.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    # No other writer may see a half-migrated database (PostgreSQL: an advisory lock too,
    # so two schedulers opening one new database do not both create it).
    db.execute("BEGIN IMMEDIATE")
    try:
        if hasattr(db, "lock_schema"):
            db.lock_schema()
        start = file_version(db)
        if start < len(migrations):
            for step in migrations[start:]:
                step(db)
            _set_version(db, len(migrations))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return start, max(start, len(migrations))
