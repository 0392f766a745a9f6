"""``dlc tokens``: list, create, expire and revoke the scheduler's API tokens.

Run on the scheduler host against its job store (``--db``, as ``dlc scheduler``); the
running scheduler sees every change at the next request (tokens are checked in the store
each time). Tokens are stored hashed: ``list`` shows each one's id (12 hex digits of its
hash), never the token.
"""

from __future__ import annotations

import re
import time

import click

from dlc.cli.output import emit, format_table, output_option
from dlc.errors import DlcError

_DB = click.option("--db", default="dlc-scheduler.db", show_default=True,
                   help="The scheduler's SQLite job store.")  # fmt: skip
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str) -> float:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w`` -> seconds.

    Raises:
        DlcError: anything else, naming ``option``.
    """
    match = _DURATION.match(text.strip())
    if not match:
        raise DlcError(f"{option}: {text!r} is not a duration; use e.g. 12h, 30d or 2w")
    return float(match.group(1)) * _SECONDS[match.group(2)]


def _store(db: str):
    from pathlib import Path

    from dlc.store.sqlite import JobStore

    if not Path(db).exists():
        raise DlcError(f"--db {db}: no such job store; give the --db of `dlc scheduler`")
    return JobStore(db)


def _when(at: float | None) -> str:
    return "never" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _as_dict(info, now: float) -> dict:
    expired = info.expires_at is not None and info.expires_at <= now
    state = "revoked" if info.revoked else "expired" if expired else "active"
    return {"id": info.token_id, "user": info.user, "admin": info.admin,
            "max_priority": info.max_priority, "created_at": info.created_at,
            "expires_at": info.expires_at, "state": state}  # fmt: skip


@click.group("tokens")
def command() -> None:
    """API tokens of the scheduler (run on its host, with its --db)."""


@command.command("list")
@_DB
@click.option("--all", "show_all", is_flag=True, help="Also revoked and expired tokens.")
@output_option
def list_tokens(db, show_all, output):
    """List tokens: id, user, admin, priority ceiling, created, expires, state."""
    now = time.time()
    items = [_as_dict(t, now) for t in _store(db).list_tokens()]
    if not show_all:
        items = [t for t in items if t["state"] == "active"]
    if output in ("json", "yaml"):
        emit(items, output)
        return
    rows = [
        (
            t["id"],
            t["user"],
            "yes" if t["admin"] else "no",
            "any" if t["max_priority"] is None else t["max_priority"],
            _when(t["created_at"]),
            _when(t["expires_at"]),
            t["state"],
        )
        for t in items
    ]
    headers = ("ID", "USER", "ADMIN", "MAX PRIO", "CREATED", "EXPIRES", "STATE")
    for line in format_table(headers, rows):
        click.echo(line)


@command.command("create")
@click.argument("user")
@_DB
@click.option("--admin", is_flag=True, help="An admin token (sees and kills every job).")
@click.option("--max-priority", type=click.IntRange(-1000, 1000), default=0, show_default=True,
              help="Highest --priority its jobs may use (admins: any).")  # fmt: skip
@click.option("--expires-in", metavar="DURATION", help="Refuse it after 12h, 30d, 2w, ...")
def create(user, db, admin, max_priority, expires_in):
    """Print a new token for USER (shown once: it is stored hashed)."""
    at = time.time() + parse_duration(expires_in, "--expires-in") if expires_in else None
    click.echo(_store(db).add_token(user, admin=admin, max_priority=max_priority, expires_at=at))


@command.command("revoke")
@click.argument("token_id", metavar="ID")
@_DB
def revoke(token_id, db):
    """Refuse token ID (8+ hex digits of its id, or the token itself) from now on."""
    info = _store(db).revoke_token(token_id)
    click.echo(f"revoked token {info.token_id} of {info.user}")


@command.command("expire")
@click.argument("token_id", metavar="ID")
@_DB
@click.option("--in", "expires_in", metavar="DURATION",
              help="Expire after this long (12h, 30d, ...) instead of now.")  # fmt: skip
@click.option("--never", is_flag=True, help="Remove the expiry instead.")
def expire(token_id, db, expires_in, never):
    """Make token ID expire now (or --in DURATION, or --never)."""
    if never and expires_in:
        raise DlcError("--never: give --never or --in, not both")
    at = None if never else time.time() + (parse_duration(expires_in, "--in") if expires_in else 0)
    info = _store(db).expire_token(token_id, at)
    click.echo(f"token {info.token_id} of {info.user} expires: {_when(at)}")
