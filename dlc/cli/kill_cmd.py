"""``dlc kill``: kill a job."""

from __future__ import annotations

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options, complete_job_ids
from dlc.cli.job_view import done
from dlc.cli.output import emit, output_option


@click.command("kill")
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@output_option
@api_options
def command(job_id, output, api, token):
    """Kill a job (its container is stopped; a queued job never starts)."""
    job = ApiClient(api, token).kill(job_id)
    if output in ("json", "yaml"):
        emit(job, output)
    else:
        click.echo(f"{job['id']} {job['state']}{' (kill requested)' if not done(job) else ''}")
