"""``dlc kill``: kill a job, or all of your live jobs at once (``--all``)."""

from __future__ import annotations

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options, complete_job_ids
from dlc.cli.job_view import done
from dlc.cli.output import emit, output_option
from dlc.errors import FieldError

#: what ``--state`` takes: the states in which a job may still start or run
LIVE = ("queued", "staging", "running", "preempted")


@click.command("kill")
@click.argument("job_id", metavar="JOB", required=False, shell_complete=complete_job_ids)
@click.option("--all", "all_jobs", is_flag=True, help="Kill all of your live jobs (no JOB).")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(LIVE),
    help="With --all: only jobs in this state (repeatable; default: every live state).",
)
@click.option("--user", help="With --all: this user's jobs (admins only; default: yours).")
@click.option("--all-users", is_flag=True, help="With --all: every user's jobs (admins only).")
@output_option
@api_options
def command(job_id, all_jobs, states, user, all_users, output, api, token):
    """Kill a job (its container is stopped; a queued job never starts).

    `dlc kill --all --state queued` empties your queue; admins may add --user NAME or
    --all-users.
    """
    if all_jobs == bool(job_id):
        raise FieldError("JOB", "give one job id, or --all (not both, not neither)")
    if not all_jobs and (states or user or all_users):
        raise FieldError("--all", "--state, --user and --all-users go with --all")
    # killing is about 2.5 ms a job (each kill is stored first): thousands take seconds
    client = ApiClient(api, token, timeout_s=300 if all_jobs else 10)
    if all_jobs:
        result = client.kill_all(user, all_users, list(states))
        if output in ("json", "yaml"):
            emit(result, output)
        else:
            click.echo(f"killed {result['count']} job{'s' if result['count'] != 1 else ''}")
        return
    job = client.kill(job_id)
    if output in ("json", "yaml"):
        emit(job, output)
    else:
        click.echo(f"{job['id']} {job['state']}{' (kill requested)' if not done(job) else ''}")
