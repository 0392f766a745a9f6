"""``dlc usage``: GPUs allocated versus used per user, group or running job.

The figures are the executors' latest NVML readings (docs/executor.md, "GPU usage"): mean
utilisation over the sampled GPUs, memory the jobs' processes hold, and how many allocated
GPUs stayed idle (under 5 % for the whole window).
"""

from __future__ import annotations

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options
from dlc.cli.output import emit, format_table, output_option

#: columns after the first (USER, GROUP or JOB)
COLUMNS = ("GPUS", "SAMPLED", "IDLE", "UTIL", "MEM USED")


def rows(body: dict) -> list[tuple]:
    """Table rows of a ``GET /v1/usage`` answer."""
    return [
        (
            r["key"],
            f"{r['gpus_allocated']:g}",
            r["gpus_sampled"],
            r["gpus_idle"],
            "-" if r["util_pct"] is None else f"{r['util_pct']:.0f}%",
            "-" if not r["gpus_sampled"] else f"{r['mem_used_mib'] / 1024:.1f} GiB",
        )
        for r in body["rows"]
    ]


@click.command(name="usage")
@click.option("--by", type=click.Choice(["user", "group", "job"]), default="user",
              show_default=True, help="One row per user, group or running job.")  # fmt: skip
@output_option
@api_options
def command(api, token, by, output):
    """GPUs allocated and used per user, group or job (yours only without an admin token)."""
    body = ApiClient(api, token).usage(by)
    if output in ("json", "yaml"):
        emit(body, output)
        return
    if not body["rows"]:
        click.echo("no running job holds GPUs")
        return
    for line in format_table((by.upper(), *COLUMNS), rows(body)):
        click.echo(line)
