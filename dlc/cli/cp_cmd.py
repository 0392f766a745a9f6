"""``dlc cp JOB:PATH DEST``: fetch a file from a job's ``/outputs`` (during or after the run)."""

from __future__ import annotations

import base64
import sys
import urllib.parse
from pathlib import Path

import click

from dlc.api.client import ApiClient, quote_job_id
from dlc.cli.client_opts import api_options


def fetch_output(client: ApiClient, job_id: str, path: str, out, rank: int = 0) -> int:
    """Copy ``/outputs/<path>`` of ``job_id`` into the binary file ``out``; returns bytes."""
    offset = 0
    while True:
        query = urllib.parse.urlencode({"path": path, "offset": offset, "rank": rank})
        chunk = client._call("GET", f"/v1/jobs/{quote_job_id(job_id)}/outputs?{query}")
        data = base64.b64decode(chunk["data"])
        out.write(data)
        offset = chunk["offset"]
        if chunk["eof"] or not data:
            return offset


@click.command("cp")
@click.argument("source", metavar="JOB:PATH")
@click.argument("dest", metavar="DEST")
@click.option("--rank", type=click.IntRange(0), default=0, show_default=True,
              help="Which node of a multi-node job.")  # fmt: skip
@api_options
def command(source, dest, rank, api, token):
    """Copy a file from a job's /outputs folder: dlc cp JOB:model.pt ./model.pt (- for stdout)."""
    job_id, sep, path = source.partition(":")
    if not sep or not job_id or not path:
        raise click.UsageError("source must be JOB:PATH, a path inside the job's /outputs")
    client = ApiClient(api, token)
    if dest == "-":
        fetch_output(client, job_id, path, sys.stdout.buffer, rank)
        return
    target = Path(dest)
    if target.is_dir():
        target = target / Path(path).name
    partial = target.with_name(target.name + ".part")
    try:
        with partial.open("wb") as fh:  # a failed copy never leaves a half file under DEST
            size = fetch_output(client, job_id, path, fh, rank)
    except BaseException:
        partial.unlink(missing_ok=True)  # nor a DEST.part (a refusal, a dropped connection)
        raise
    partial.replace(target)
    click.echo(f"{target} ({size} bytes)", err=True)
