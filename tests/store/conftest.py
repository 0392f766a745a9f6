"""The store suites run against both engines: SQLite (embedded) and PostgreSQL (HA).

``make_store(clock=None)`` opens a fresh store of the engine the test is parametrized
with; ``reopen(store)`` opens the same database again (a scheduler restart). The
PostgreSQL server is started once per session by ``scripts/postgres.sh``; a test fails
(never skips) when it cannot start.
"""

from __future__ import annotations

import pytest

from tests.services import Postgres


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (scripts/postgres.sh)."""
    server = Postgres()
    yield server
    server.remove()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request):
    """The engine name of this run of the test."""
    return request.param


@pytest.fixture
def make_store(engine, request, tmp_path):
    """``make_store(clock=None)``: a fresh, empty store of ``engine``."""
    opened = []

    def make(clock=None):
        kwargs = {"clock": clock} if clock else {}
        if engine == "sqlite":
            from dlc.store.sqlite import JobStore

            store = JobStore(tmp_path / f"s{len(opened)}.db", **kwargs)
        else:
            from dlc.store.postgres import JobStore

            server = request.getfixturevalue("postgres")
            store = JobStore(server.new_db(), **kwargs)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def reopen(store, clock=None):
    """The same database opened again, as a restarted scheduler would."""
    kwargs = {"clock": clock} if clock else {}
    return type(store)(getattr(store, "url", store.path), **kwargs)
