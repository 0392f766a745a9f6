"""``dlc tokens``: list, create, expire and revoke the scheduler's API tokens.

Run on the scheduler host against its job store: ``--db`` (as ``dlc scheduler``) or
``--work-dir`` (as ``dlc local``); without either, the first of ``dlc-scheduler.db`` and
``.dlc-local/scheduler.db`` that exists. The running scheduler sees every change at the next
request (tokens are checked in the store each time). Tokens are stored hashed: ``list`` shows
each one's id (12 hex digits of its hash), never the token.

``create --api`` asks a running scheduler instead (``POST /v1/tokens``, admin token needed),
from any host.
"""

from __future__ import annotations

import re
import time

import click

from dlc.cli.output import emit, format_table, output_option
from dlc.errors import DlcError

#: where a store is looked for when neither --db nor --work-dir is given (first found wins)
DEFAULT_STORES = ("dlc-scheduler.db", ".dlc-local/scheduler.db")


def _db_options(func):
    work_dir = "The state directory of `dlc local` (its DIR/scheduler.db)."
    func = click.option("--work-dir", metavar="DIR", help=work_dir)(func)
    db = (
        "The scheduler's SQLite job store "
        "[default: ./dlc-scheduler.db, else .dlc-local/scheduler.db]."
    )
    return click.option("--db", metavar="PATH", help=db)(func)


#: a user name a token may carry (the same as ``POST /v1/tokens`` takes)
USER_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")

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


def find_store_path(db: str | None, work_dir: str | None) -> str:
    """The job store ``dlc tokens`` works on (see the module docstring).

    Raises:
        DlcError: the given one does not exist, or none of the defaults does.
    """
    from pathlib import Path

    if db and work_dir:
        raise DlcError("--db: give --db or --work-dir, not both")
    if work_dir:
        db = str(Path(work_dir) / "scheduler.db")
        if not Path(db).is_file():
            raise DlcError(f"--work-dir {work_dir}: no scheduler.db there; give the --work-dir "
                           "of `dlc local`")  # fmt: skip
        return db
    if db:
        if not Path(db).exists():
            raise DlcError(f"--db {db}: no such job store; give the --db of `dlc scheduler`")
        return db
    found = next((p for p in DEFAULT_STORES if Path(p).is_file()), None)
    if found is None:
        raise DlcError(
            f"--db: no job store here ({' or '.join(DEFAULT_STORES)}); give --db PATH or "
            "--work-dir DIR (`tokens create --api` works from any host with an admin token)"
        )
    return found


def _store(db: str | None, work_dir: str | None = None):
    from dlc.store.sqlite import JobStore

    return JobStore(find_store_path(db, work_dir))


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
    """API tokens of the scheduler (on its host: --db, --work-dir or found; else --api)."""


@command.command("list")
@_db_options
@click.option("--all", "show_all", is_flag=True, help="Also revoked and expired tokens.")
@output_option
def list_tokens(db, work_dir, show_all, output):
    """List tokens: id, user, admin, priority ceiling, created, expires, state."""
    now = time.time()
    items = [_as_dict(t, now) for t in _store(db, work_dir).list_tokens()]
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
@_db_options
@click.option("--admin", is_flag=True, help="An admin token (sees and kills every job).")
@click.option("--max-priority", type=click.IntRange(-1000, 1000), default=0, show_default=True,
              help="Highest --priority its jobs may use (admins: any).")  # fmt: skip
@click.option("--expires-in", metavar="DURATION", help="Refuse it after 12h, 30d, 2w, ...")
@click.option("--api", "api_url", metavar="URL", is_flag=False, flag_value="env",
              help="Ask the running scheduler at URL (bare --api: $DLC_API) with the admin "
              "token in $DLC_TOKEN/--token, instead of opening its store.")  # fmt: skip
@click.option("--token", envvar="DLC_TOKEN", metavar="TOKEN",
              help="With --api: an admin token (env DLC_TOKEN).")  # fmt: skip
def create(user, db, work_dir, admin, max_priority, expires_in, api_url, token):
    """Print a new token for USER (shown once: it is stored hashed)."""
    if not USER_NAME.match(user):
        raise DlcError(
            f"USER: {user!r} is not a user name; use 1 to 64 letters, digits, '_', '.', '@' or '-'"
        )
    seconds = parse_duration(expires_in, "--expires-in") if expires_in else None
    if api_url is not None:
        if db or work_dir:
            raise DlcError("--api: give --api or --db/--work-dir, not both")
        from dlc.api.client import ApiClient

        client = ApiClient(None if api_url == "env" else api_url, token)
        click.echo(client.create_token(user, admin, max_priority, seconds)["token"])
        return
    at = time.time() + seconds if seconds is not None else None
    store = _store(db, work_dir)
    click.echo(store.add_token(user, admin=admin, max_priority=max_priority, expires_at=at))


@command.command("revoke")
@click.argument("token_id", metavar="ID")
@_db_options
def revoke(token_id, db, work_dir):
    """Refuse token ID (8+ hex digits of its id, or the token itself) from now on."""
    info = _store(db, work_dir).revoke_token(token_id)
    click.echo(f"revoked token {info.token_id} of {info.user}")


@command.command("expire")
@click.argument("token_id", metavar="ID")
@_db_options
@click.option("--in", "expires_in", metavar="DURATION",
              help="Expire after this long (12h, 30d, ...) instead of now.")  # fmt: skip
@click.option("--never", is_flag=True, help="Remove the expiry instead.")
def expire(token_id, db, work_dir, expires_in, never):
    """Make token ID expire now (or --in DURATION, or --never)."""
    if never and expires_in:
        raise DlcError("--never: give --never or --in, not both")
    at = None if never else time.time() + (parse_duration(expires_in, "--in") if expires_in else 0)
    info = _store(db, work_dir).expire_token(token_id, at)
    click.echo(f"token {info.token_id} of {info.user} expires: {_when(at)}")
