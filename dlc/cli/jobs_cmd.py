"""``dlc jobs``: list jobs, filter them by state and user, watch them change."""

from __future__ import annotations

import time

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options
from dlc.cli.job_view import STATES, age, gpus, placement, used
from dlc.cli.output import (
    emit,
    emit_line,
    format_table,
    note_if_cut,
    output_option,
    terminal_width,
)
from dlc.errors import DlcError

HEADERS = ("ID", "USER", "STATE", "NAME", "GPUS", "PLACED ON", "AGE", "MESSAGE")
#: widest a cell gets in the default table: one job's long name never pushes the rest away
WIDTHS = (24, 20, 9, 32, 16, 40, 5, None)  # GPUS: "1.5 GiB of GPU 12"
WIDE_HEADERS = ("ID", "USER", "STATE", "NAME", "GPUS", "USED", "MODEL", "CPUS", "MEM", "PRIO",
                "ATTEMPT", "PLACED ON", "AGE", "MESSAGE")  # fmt: skip


def rows(jobs: list[dict], wide: bool) -> list[tuple]:
    """Table rows for ``jobs`` (the wide set of columns with ``wide``)."""
    out: list[tuple[object, ...]] = []
    for job in jobs:
        if wide:
            out.append((job["id"], job["user"], job["state"], job["name"], gpus(job), used(job),
                        job.get("gpu_model") or "-", f"{job['cpus']:g}", f"{job['mem_mib']}M",
                        job["priority"], job["attempt"], placement(job),
                        age(job["submitted_at"]), job["message"]))  # fmt: skip
        else:
            out.append((job["id"], job["user"], job["state"], job["name"], gpus(job),
                        placement(job), age(job["submitted_at"]), job["message"]))  # fmt: skip
    return out


def table(jobs: list[dict], output: str) -> list[str]:
    """The listing as lines: cut to the terminal, or whole with ``-o wide``."""
    if output == "wide":
        return format_table(WIDE_HEADERS, rows(jobs, True))
    return format_table(HEADERS, rows(jobs, False), WIDTHS, total=terminal_width())


def fetch(client: ApiClient, limit: int | None, states: tuple[str, ...], users: tuple[str, ...]):
    """The newest jobs matching the filters (all pages are read when filtering)."""
    if not states and not users:
        return client.jobs(limit=limit)
    found = [
        j for j in client.jobs(limit=None)
        if (not states or j["state"] in states) and (not users or j["user"] in users)
    ]  # fmt: skip
    return found[:limit] if limit is not None else found


def check_users(client: ApiClient, users: tuple[str, ...]) -> None:
    """Refuse ``--user`` naming someone else for a non-admin token (the API would show
    an empty list, which reads as "bob has no jobs").

    Raises:
        DlcError: one line naming the option and who the token belongs to.
    """
    if not users:
        return
    me = client.whoami()
    if me["user"] is None:
        return  # no valid token: the listing itself says so
    others = sorted(set(users) - {me["user"]})
    if others and not me["admin"]:
        raise DlcError(
            f"--user {others[0]}: only admins can list other users' jobs; your token is "
            f"{me['user']}'s (drop --user, or use an admin token)"
        )


@click.command("jobs")
@click.option("--limit", "-n", type=click.IntRange(1), default=50, show_default=True,
              help="Show the newest N jobs.")  # fmt: skip
@click.option("--all", "show_all", is_flag=True, help="Show every job (pages through the API).")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="Only jobs in this state (repeatable).")  # fmt: skip
@click.option("--user", "users", multiple=True,
              help="Only this user's jobs (repeatable; others' need an admin token).")  # fmt: skip
@click.option("-w", "--watch", is_flag=True,
              help="Then print each job again when it changes (Ctrl-C stops).")  # fmt: skip
@click.option("--interval", type=click.FloatRange(0.1), default=2.0, show_default=True,
              help="Seconds between polls with --watch.")  # fmt: skip
@click.option("--rounds", type=int, hidden=True)  # bounds --watch in tests
@output_option
@api_options
def command(api, token, limit, show_all, states, users, watch, interval, rounds, output):
    """List your jobs, newest first (all users' jobs with an admin token)."""
    client = ApiClient(api, token)
    check_users(client, users)
    limit = None if show_all else limit
    jobs = fetch(client, limit, states, users)
    if output in ("json", "yaml") and not watch:
        emit(jobs, output)
        return
    if output in ("json", "yaml"):
        for job in jobs:
            emit_line(job, output)
    else:
        lines = table(jobs, output)
        for line in lines:
            click.echo(line)
        note_if_cut(lines)
    if watch:
        _watch(client, jobs, limit, states, users, interval, rounds, output)


def _watch(client, jobs, limit, states, users, interval, rounds, output) -> None:
    """kubectl-style ``--watch``: one line (or JSON object) per job that changed."""
    seen = {j["id"]: (j["state"], j["message"]) for j in jobs}
    count = 0
    try:
        while rounds is None or count < rounds:
            count += 1
            time.sleep(interval)
            changed = []
            for job in fetch(client, limit, states, users):
                key = (job["state"], job["message"])
                if seen.get(job["id"]) != key:
                    seen[job["id"]] = key
                    changed.append(job)
            for job in reversed(changed):  # oldest change first, like a log
                if output in ("json", "yaml"):
                    emit_line(job, output)
                else:
                    click.echo(table([job], output)[1])
    except KeyboardInterrupt:
        pass
