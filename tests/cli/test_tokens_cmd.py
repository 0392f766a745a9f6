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
     (["expire", "deadbeef00", "--in", "3d", "--never"], "--never: give --never or --in"),
     # an empty or odd name made a token no API call could ever have made
     (["create", ""], "USER: '' is not a user name; use 1 to 64 letters"),
     (["create", "bob smith"], "USER: 'bob smith' is not a user name")],
)  # fmt: skip
def test_bad_inputs_are_one_line(db, args, message):
    result = run(*args, "--db", db)
    assert result.exit_code != 0 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("Error: ")


def test_missing_store_is_named(tmp_path):
    result = run("list", "--db", tmp_path / "nope.db")
    assert result.exit_code == 1 and "no such job store" in result.output


def test_the_store_of_dlc_local_is_found_without_db(tmp_path, monkeypatch):
    """`dlc tokens create alice` on a `dlc local` host finds .dlc-local/scheduler.db."""
    monkeypatch.chdir(tmp_path)
    missing = run("create", "alice")
    assert missing.exit_code != 0 and "--db: no job store here" in missing.output
    (tmp_path / ".dlc-local").mkdir()
    JobStore(tmp_path / ".dlc-local" / "scheduler.db").close()
    made = run("create", "alice")
    assert made.exit_code == 0, made.output
    store = JobStore(tmp_path / ".dlc-local" / "scheduler.db")
    assert store.authenticate(made.output.strip())[0] == "alice"
    elsewhere = tmp_path / "state"
    elsewhere.mkdir()
    JobStore(elsewhere / "scheduler.db").close()
    bob = run("create", "bob", "--work-dir", elsewhere)
    assert JobStore(elsewhere / "scheduler.db").authenticate(bob.output.strip())[0] == "bob"
    assert "alice" in run("list", "--work-dir", ".dlc-local").output


@pytest.fixture
def api(tmp_path):
    from dlc.api.logs import LogReader
    from dlc.api.server import ApiServer
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore

    store = JobStore(tmp_path / "api.db")
    core = SchedulerCore(store, CoreConfig(), lambda spec: (spec.image, "12.1"))
    server = ApiServer(core, LogReader(lambda: core.framework_id), lambda actions: None)
    server.start()
    yield server.url, store
    server.stop()


def test_an_admin_makes_tokens_over_the_api(api, monkeypatch):
    url, store = api
    root = store.add_token("root", admin=True)
    made = run("create", "carol", "--api", url, "--token", root, "--expires-in", "2h")
    assert made.exit_code == 0, made.output
    user, admin, ceiling = store.authenticate(made.output.strip())
    assert (user, admin, ceiling) == ("carol", False, 0)
    (info,) = [t for t in store.list_tokens() if t.user == "carol"]
    assert 7000 < info.expires_at - info.created_at <= 7200
    # bare --api reads $DLC_API, like every other command
    monkeypatch.setenv("DLC_API", url)
    monkeypatch.setenv("DLC_TOKEN", root)
    admin_made = run("create", "dave", "--api", "--admin")
    assert store.authenticate(admin_made.output.strip())[:2] == ("dave", True)


def test_a_user_cannot_make_tokens_over_the_api(api):
    url, store = api
    alice = store.add_token("alice")
    refused = run("create", "mallory", "--api", url, "--token", alice, "--admin")
    assert refused.exit_code != 0
    assert refused.output == "Error: only admins can make tokens; ask an admin\n"
    assert [t.user for t in store.list_tokens()] == ["alice"]


def test_the_user_names_the_cli_takes_are_the_apis():
    from dlc.api.app import TokenIn
    from dlc.cli.tokens_cmd import USER_NAME

    assert TokenIn.model_fields["user"].metadata[0].pattern == USER_NAME.pattern
