"""``dlc open JOB``: the URL of an interactive job's JupyterLab (with its token).

The URL points at the agent's port, not at the API: a TLS proxy in front of the API does not
cover it (docs/install.md, "TLS in front of the API"), and the command says so when the API
itself is ``https://``.
"""

from __future__ import annotations

import time

import click

from dlc.api.client import ApiClient, quote_job_id
from dlc.cli.client_opts import api_options
from dlc.errors import DlcError


def env_url(client: ApiClient, job_id: str, wait_s: float, interval: float = 1.0) -> dict:
    """``{"url", "state"}`` of the job's environment, waiting up to ``wait_s`` for the URL."""
    deadline = time.monotonic() + wait_s
    while True:
        found = client._call("GET", f"/v1/jobs/{quote_job_id(job_id)}/env")
        ended = found["state"] in ("finished", "failed", "killed", "lost")
        if found["url"] or ended or time.monotonic() >= deadline:
            return found
        time.sleep(interval)


@click.command("open")
@click.argument("job_id")
@click.option("--wait", "wait_s", type=float, default=120, show_default=True,
              help="Seconds to wait for the environment to start.")  # fmt: skip
@api_options
def command(job_id, wait_s, api, token):
    """Print the URL (with its secret token) of an interactive job: dlc open JOB."""
    client = ApiClient(api, token)
    found = env_url(client, job_id, wait_s)
    if not found["url"]:
        raise DlcError(
            f"job {job_id} is {found['state']} and its environment has no URL yet; "
            "try again, or see `dlc status` / `dlc logs`"
        )
    note = plain_http_note(client.url, found["url"])
    if note:
        click.echo(note, err=True)
    click.echo(found["url"])


def plain_http_note(api_url: str, env_url: str) -> str | None:
    """A one-line note when the API is HTTPS but the environment's URL is plain HTTP."""
    if api_url.startswith("https://") and env_url.startswith("http://"):
        return (
            "note: this URL goes to the agent in plain HTTP, not through the API's TLS; "
            "on an untrusted network open it through an SSH tunnel (docs/install.md)"
        )
    return None
