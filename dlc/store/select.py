"""Which store ``--db`` names: a PostgreSQL URL (HA) or a SQLite file (the embedded default)."""

from __future__ import annotations

import time


def is_postgres_url(db: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return db.startswith(("postgresql://", "postgres://"))


def open_store(db: str, clock=time.time):
    """The job store for ``--db`` (psycopg is imported only for a PostgreSQL URL).

    Raises:
        StoreError: it cannot be opened (one line naming it and the fix).
    """
    if is_postgres_url(db):
        from dlc.store.postgres import JobStore as PgStore

        return PgStore(db, clock=clock)
    from dlc.store.sqlite import JobStore

    return JobStore(db, clock=clock)
