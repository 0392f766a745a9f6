"""``dlc nodes``: agents by pool with GPUs free, taken, shared and draining (like ``sinfo``)."""

from __future__ import annotations

import click

from dlc.cli.client_opts import api_options
from dlc.cli.output import output_option
from dlc.cli.queue_cmd import call, print_table, structured


def _shared(node: dict) -> str:
    """``2 (12 GiB)``: GPUs holding shares and the share memory they hold; ``0``."""
    count = node.get("shared", 0)
    if not count:
        return "0"
    return f"{count} ({node.get('share_mem_mib', 0) / 1024:g} GiB)"


@click.command("nodes")
@output_option
@api_options
def command(output: str, api: str | None, token: str | None) -> None:
    """Agents by pool: GPUs in all, taken whole by jobs, holding shares, draining, free."""
    nodes = call(api, token, "GET", "/v1/nodes")["nodes"]
    if structured(output, nodes):
        return
    if not nodes:
        click.echo("no agent known yet")
        return
    totals: dict[str, list[int]] = {}
    for n in nodes:
        t = totals.setdefault(n["pool"], [0, 0, 0, 0])
        t[0] += n["gpus"]
        t[1] += n["taken"]
        t[2] += n["free"]
        t[3] += n.get("shared", 0)
    print_table(
        ("POOL", "AGENT", "ZONE", "RACK", "SWITCH", "VENDOR", "GPU MODEL", "GPUS", "TAKEN",
         "SHARED (MEM)", "DRAINING", "FREE", "CPUS", "MEM"),
        ((n["pool"], n["hostname"] or n["agent_id"], n.get("zone") or "-", n.get("rack") or "-",
          n.get("switch") or "-", n.get("gpu_vendor", "nvidia"), n["gpu_model"],
          n["gpus"], n["taken"], _shared(n), n["draining"], n["free"], f"{n['cpus']:g}",
          f"{n['mem_mib'] / 1024:.0f}G")
         for n in nodes),
        wide=output == "wide",
    )  # fmt: skip
    for pool, (gpus, taken, free, shared) in sorted(totals.items()):
        click.echo(f"pool {pool}: {free} of {gpus} GPUs free, {taken} taken, {shared} shared")
    per_gpu = [(n, s) for n in nodes for s in n.get("shared_gpus", ())]
    if per_gpu:  # who shares which GPU, under which backend (docs/sharing.md 3b)
        click.echo("")
        print_table(
            ("AGENT", "GPU", "BACKEND", "TENANTS"),
            ((n["hostname"] or n["agent_id"], s["gpu"], n.get("sharing") or "watchdog",
              ",".join(s["tenants"])) for n, s in per_gpu),
            wide=output == "wide",
        )  # fmt: skip
