"""``dlc tokens``: list, create, expire, revoke on the scheduler's store (SQLite file)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.store.sqlite import JobStore


def run(*args):
    return CliRunner().invoke(cli, ["tokens", *map(str, args)])


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "db"
    JobStore(path).close()
    return path


def listing(db, *extra):
    result = run("list", "--db", db, "-o", "json", *extra)
    assert result.exit_code == 0, result.output
    return {t["user"]: t for t in json.loads(result.output)}


def test_create_list_expire_revoke(db):
    alice = run("create", "alice", "--db", db, "--max-priority", "5").output.strip()
    root = run("create", "root", "--db", db, "--admin", "--expires-in", "30d").output.strip()
    store = JobStore(db)
    assert store.authenticate(alice)[0] == "alice" and store.authenticate(root)[1] is True
    tokens = listing(db)
    assert tokens["alice"]["max_priority"] == 5 and tokens["alice"]["expires_at"] is None
    assert tokens["root"]["admin"] and tokens["root"]["expires_at"] > tokens["root"]["created_at"]
    assert alice not in run("list", "--db", db).output  # ids only, never tokens
    assert run("expire", tokens["alice"]["id"], "--db", db).exit_code == 0
    assert store.authenticate(alice) is None
    assert "alice" not in listing(db) and listing(db, "--all")["alice"]["state"] == "expired"
    assert run("expire", tokens["alice"]["id"], "--db", db, "--never").exit_code == 0
    assert store.authenticate(alice)[0] == "alice"
    revoked = run("revoke", tokens["root"]["id"][:8], "--db", db)
    assert revoked.exit_code == 0 and "revoked token" in revoked.output
    assert store.authenticate(root) is None
    assert listing(db, "--all")["root"]["state"] == "revoked"


@pytest.mark.parametrize(
    "args, message",
    [(["revoke", "deadbeef00"], "no token match"),
     (["create", "bob", "--expires-in", "soon"], "--expires-in: 'soon' is not a duration"),
     (["expire", "deadbeef00", "--in", "3d", "--never"], "--never: give --never or --in")],
)  # fmt: skip
def test_bad_inputs_are_one_line(db, args, message):
    result = run(*args, "--db", db)
    assert result.exit_code != 0 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("Error: ")


def test_missing_store_is_named(tmp_path):
    result = run("list", "--db", tmp_path / "nope.db")
    assert result.exit_code == 1 and "no such job store" in result.output
