"""``dlc exec JOB -- CMD``: run a command in a running job's container; exits with its code."""

from __future__ import annotations

import base64
import sys

import click

from dlc.api.client import ApiClient, quote_job_id
from dlc.cli.client_opts import api_options

#: how long the CLI waits for the answer: longer than the API's own 300 s wait for the command
#: (the client's usual 10 s made any command over 10 s fail as "cannot reach the scheduler")
EXEC_WAIT_S = 330.0


@click.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("job_id")
@api_options
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def command(job_id, api, token, argv):
    """Run a command in your running job's container: dlc exec JOB -- nvidia-smi"""
    path = f"/v1/jobs/{quote_job_id(job_id)}/exec"
    client = ApiClient(api, token, timeout_s=EXEC_WAIT_S)
    result = client._call("POST", path, {"argv": list(argv)})
    sys.stdout.buffer.write(base64.b64decode(result["output"]))
    sys.stdout.flush()
    sys.exit(int(result["exit_code"]))
