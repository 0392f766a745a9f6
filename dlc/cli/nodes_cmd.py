"""``dlc nodes``: agents by pool with GPUs free, taken and draining (like ``sinfo``)."""

from __future__ import annotations

import click

from dlc.cli.client_opts import api_options
from dlc.cli.queue_cmd import call, print_table


@click.command("nodes")
@api_options
def command(api, token):
    """Agents by pool: GPUs in all, taken by jobs, draining, free."""
    nodes = call(api, token, "GET", "/v1/nodes")["nodes"]
    if not nodes:
        click.echo("no agent known yet")
        return
    totals: dict[str, list[int]] = {}
    for n in nodes:
        t = totals.setdefault(n["pool"], [0, 0, 0])
        t[0] += n["gpus"]
        t[1] += n["taken"]
        t[2] += n["free"]
    print_table(
        ("POOL", "AGENT", "GPU MODEL", "GPUS", "TAKEN", "DRAINING", "FREE", "CPUS", "MEM"),
        ((n["pool"], n["hostname"] or n["agent_id"], n["gpu_model"], n["gpus"], n["taken"],
          n["draining"], n["free"], f"{n['cpus']:g}", f"{n['mem_mib'] / 1024:.0f}G")
         for n in nodes),
    )  # fmt: skip
    for pool, (gpus, taken, free) in sorted(totals.items()):
        click.echo(f"pool {pool}: {free} of {gpus} GPUs free, {taken} taken")
    shared = [(n, s) for n in nodes for s in n.get("shared_gpus", ())]
    if shared:  # who shares which GPU, under which backend (docs/sharing.md 3b)
        click.echo("")
        print_table(
            ("AGENT", "GPU", "BACKEND", "TENANTS"),
            ((n["hostname"] or n["agent_id"], s["gpu"], n.get("sharing") or "watchdog",
              ",".join(s["tenants"])) for n, s in shared),
        )  # fmt: skip
