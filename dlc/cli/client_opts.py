"""``--api``/``--token``/``--context`` for the commands that talk to the scheduler API.

First found wins: the flags, ``$DLC_API``/``$DLC_TOKEN``, the context chosen by ``--context``
or ``$DLC_CONTEXT``, the config file's current context (:mod:`dlc.cli.config_file`), the
default URL. Commands keep their ``(api, token)`` parameters: the resolution happens in
the options' callbacks.
"""

from __future__ import annotations

from typing import Any

import click

from dlc.api.client import ApiClient, checked_api_url


def _context(ctx: click.Context):
    from dlc.cli.config_file import get_context

    if "dlc.context" not in ctx.meta:
        ctx.meta["dlc.context"] = get_context(ctx.meta.get("dlc.context_name"))
    return ctx.meta["dlc.context"]


def _remember_context(ctx: click.Context, param: Any, value: str | None) -> None:
    ctx.meta["dlc.context_name"] = value


def check_api_url(ctx: click.Context | None, param: Any, value: str | None) -> str | None:
    """Click callback: the ``--api`` URL (else the context's), checked before any request.

    Raises:
        ApiError: not an ``http(s)://HOST[:PORT]`` URL.
    """
    if value is None and ctx is not None:
        found = _context(ctx)
        value = found.api if found else None
    return checked_api_url(value) if value is not None else None


def _token(ctx: click.Context, param: Any, value: str | None) -> str | None:
    if value is None:
        found = _context(ctx)
        value = found.read_token() if found else None
    return value


def api_options(func):
    """Add ``--api``, ``--token`` and ``--context`` (env and config file behind them)."""
    func = click.option(
        "--token", envvar="DLC_TOKEN", callback=_token, metavar="TOKEN",
        help="API token (env DLC_TOKEN; else the context's token or token-file).",
    )(func)  # fmt: skip
    func = click.option(
        "--api", envvar="DLC_API", callback=check_api_url, metavar="URL",
        help="Scheduler API URL (env DLC_API; else the context's; default http://127.0.0.1:8642).",
    )(func)  # fmt: skip
    # Eager, so that --api/--token see it whatever the order on the command line.
    return click.option(
        "--context", envvar="DLC_CONTEXT", is_eager=True, expose_value=False,
        callback=_remember_context, metavar="NAME",
        help="Named context of the config file (env DLC_CONTEXT; default: its current one).",
    )(func)  # fmt: skip


def complete_job_ids(ctx: click.Context, param: Any, incomplete: str) -> list[str]:
    """Shell completion of a JOB argument: the caller's job ids, asked quietly of the API.

    Completion must never print an error into the user's prompt: any failure (no scheduler,
    bad token, bad config) completes nothing.
    """
    try:
        api = ctx.params.get("api")
        token = ctx.params.get("token")
        found = None if api and token else _context(ctx)
        api = api or (found.api if found else None)
        token = token or (found.read_token() if found else None)
        client = ApiClient(api, token, timeout_s=2)
        return [j["id"] for j in client.jobs(limit=200) if j["id"].startswith(incomplete)]
    except Exception:  # noqa: BLE001 - see the docstring
        return []
