"""``dlc status``: one job with its history (``--watch``: until it ends)."""

from __future__ import annotations

import time
import urllib.parse

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options, complete_job_ids
from dlc.cli.job_view import cpu_only, follow, nodes, placement, share, used
from dlc.cli.output import emit, emit_line, output_option
from dlc.errors import ApiError


def _gpus_row(job: dict) -> str:
    """``2 x 1 node(s)``, or a share: ``4 GiB of GPU 2 (4096 MiB, compute shared)``, or
    ``none (CPU only: 4 cpus, 8192 MiB x 1 node(s))``."""
    shared = share(job)
    if shared is None and cpu_only(job):
        return f"none (CPU only: {job['cpus']:g} cpus, {job['mem_mib']} MiB x {nodes(job)} node(s))"
    if shared is None:
        return f"{job['gpus']} x {nodes(job)} node(s)"
    task = next((t for t in job.get("tasks") or () if t.get("share_gpu") is not None), None)
    if task is None:
        return f"a share of one GPU: {shared} (not placed yet)"
    core = task.get("share_core_milli") or 0
    compute = f"{core / 10:g}% of its compute" if core else "compute shared without a floor"
    return f"{shared} ({task.get('share_memory_mib') or 0} MiB, {compute})"


def describe(job: dict, url: str = "") -> list[str]:
    """The job as ``key: value`` lines (an environment's ``url`` too) and its state history."""
    rows = [
        ("id", job["id"]),
        ("user", job["user"]),
        ("state", job["state"]),
        ("what", job["framework"] or job["image"]),
        ("image", job["image"]),
        ("gpus", _gpus_row(job)),
        ("gpu use", used(job)),
        ("priority", job["priority"]),
        ("placed on", placement(job) or "-"),
        ("attempt", f"{job['attempt']} (failures {job['failures']}, retries {job['retries']})"),
        ("command", " ".join(job["command"]) or "(image default)"),
        ("message", job["message"]),
    ]
    if url:
        rows.append(("url", url))
    lines = [f"{key:>10}: {value}" for key, value in rows]
    lines.append("   history:")
    lines += [history_line(item) for item in job.get("history", ())]
    return lines


def env_url(client: ApiClient, job: dict) -> str:
    """A running interactive job's URL (``""`` for batch jobs: the API answers 409)."""
    if job["state"] != "running":
        return ""
    try:
        return client._call("GET", f"/v1/jobs/{urllib.parse.quote(job['id'], safe='')}/env")["url"]
    except ApiError:
        return ""


def history_line(item: dict) -> str:
    """One state change: ``    2026-01-02 03:04:05 running   message``."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item["at"]))
    return f"    {stamp} {item['state']:<9} {item['message']}"


@click.command("status")
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@click.option("-w", "--watch", is_flag=True, help="Keep printing state changes until it ends.")
@click.option("--interval", type=click.FloatRange(0.1), default=2.0, show_default=True,
              help="Seconds between polls with --watch.")  # fmt: skip
@output_option
@api_options
def command(job_id, watch, interval, output, api, token):
    """Show one job: spec, placement and state history."""
    client = ApiClient(api, token)
    job = client.show(job_id)
    if output in ("json", "yaml") and not watch:
        emit(job, output)
        return
    if output in ("json", "yaml"):
        emit_line(job, output)
    else:
        for line in describe(job, env_url(client, job)):
            click.echo(line)
    if not watch:
        return
    printed = len(job.get("history", ()))
    try:
        for now in follow(client, job_id, interval):
            if output in ("json", "yaml"):
                if now != job:
                    emit_line(now, output)
                continue
            for item in now.get("history", ())[printed:]:
                click.echo(history_line(item))
            printed = max(printed, len(now.get("history", ())))
    except KeyboardInterrupt:
        pass
