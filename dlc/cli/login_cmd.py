"""``dlc login``: check an API address and token, and save them as a named context."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import click

from dlc.api.client import ApiClient, checked_api_url
from dlc.cli.config_file import config_path, load_config, save_config
from dlc.errors import ApiError, ConfigError


def _default_name(api: str) -> str:
    return urllib.parse.urlsplit(api).hostname or "default"


@click.command("login")
@click.option("--api", required=True, metavar="URL", help="Scheduler API URL.")
@click.option("--token-file", metavar="FILE",
              help="Read the token from FILE on each use (not copied).")  # fmt: skip
@click.option("--token", envvar="DLC_TOKEN", metavar="TOKEN",
              help="The token (kept in the config file, mode 0600; env DLC_TOKEN).")  # fmt: skip
@click.option("--context", "name", metavar="NAME", help="Context name (default: the API's host).")
@click.option("--no-check", is_flag=True, help="Save without asking the API who the token is.")
def command(api, token_file, token, name, no_check):
    """Save --api and a token as context NAME and make it the current one."""
    api = checked_api_url(api)
    if token_file and token:
        raise ConfigError("--token", "give --token or --token-file, not both")
    if not token_file and not token:
        token = click.prompt("Token", hide_input=True)
    if token_file:
        path = Path(token_file).expanduser().resolve()
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError("--token-file", f"{path}: {exc.strerror}") from None
    else:
        secret = token
    name = name or _default_name(api)
    who = None if no_check else _whoami(api, secret)
    data = load_config()
    body = {"api": api, **({"token-file": str(path)} if token_file else {"token": token})}
    data["contexts"][name] = body
    data["current-context"] = name
    where = save_config(data)
    as_who = f" as {who}" if who else ""
    click.echo(f"context {name}: {api}{as_who} (saved in {where}; now current)")


def _whoami(api: str, token: str) -> str:
    """The user the token belongs to.

    Raises:
        ApiError: the API does not answer or does not know the token.
    """
    session = ApiClient(api, token)._call("GET", "/v1/session")
    if not session.get("user"):
        raise ApiError(
            f"{api} does not accept this token; ask an admin for one, or --no-check to save anyway"
        )
    return session["user"] + (" (admin)" if session.get("admin") else "")


__all__ = ["command", "config_path"]
