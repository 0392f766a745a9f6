"""``dlc quota``: usage against guarantees per group and pool; ``dlc quota set`` (admin)."""

from __future__ import annotations

import click

from dlc.cli.client_opts import api_options
from dlc.cli.output import output_option
from dlc.cli.queue_cmd import call, num, print_table, structured


def _mem(mib: float | None) -> str:
    if mib is None:
        return "-"
    return f"{mib / 1024:g}G"


def _of(used: dict, limit: dict | None, key: str, fmt=num) -> str:
    return f"{fmt(used[key])}/{fmt(limit[key]) if limit else '-'}"


@click.group("quota", invoke_without_command=True)
@output_option
@api_options
@click.pass_context
def command(ctx, output, api, token):
    """Each group's usage against its guarantee per pool, and what it borrows."""
    if ctx.invoked_subcommand is not None:
        return
    body = call(api, token, "GET", "/v1/quota")
    if structured(output, body):
        return
    pools = ", ".join(f"{p} {num(c['gpus'])} GPUs" for p, c in body["pools"].items())
    click.echo(f"pools: {pools or 'none known yet'}; preemption grace {num(body['grace_s'])} s")
    if not body["quotas"]:
        click.echo("no quota set; `dlc quota set GROUP --pool P --gpus N` (admin)")
        _print_limits(body.get("limits"), output)
        return
    print_table(
        (
            "GROUP",
            "POOL",
            "GPUS used/guar",
            "CPUS used/guar",
            "MEM used/guar",
            "BORROWED GPUS",
            "CEILING GPUS",
            "WAITING GPUS",
        ),
        (
            (
                q["group"],
                q["pool"],
                _of(q["used"], q["guaranteed"], "gpus"),
                _of(q["used"], q["guaranteed"], "cpus"),
                _of(q["used"], q["guaranteed"], "mem_mib", _mem),
                num(q["borrowed"]["gpus"]),
                num((q["ceiling"] or {}).get("gpus")),
                num(q["waiting"]["gpus"]),
            )
            for q in body["quotas"]
        ),  # fmt: skip
        wide=output == "wide",
    )
    _print_limits(body.get("limits"), output)
    _print_fair_share(body.get("fair_share"), output)


def _print_limits(limits: list[dict] | None, output: str | None) -> None:
    """The per-user caps (a non-admin: their own), a row each: what the user holds now over
    their cap (``-``: no cap); nothing where none is set."""
    if not limits:
        return
    click.echo(
        "\nuser limits (`dlc groups limit`; held now/cap, -: no cap; CPUs and memory "
        "with each task's executor):"
    )
    print_table(
        ("USER", "JOBS", "GPUS", "CPUS", "MEMORY", "ENVIRONMENTS", "LONGEST INTERACTIVE"),
        ((r["user"], _held(r, "running", "max_running"), _held(r, "gpus", "max_gpus"),
          _held(r, "cpus", "max_cpus"), _held(r, "mem_mib", "max_mem_mib", _mem),
          _held(r, "environments", "max_interactive"),
          "-" if r["max_interactive_s"] is None else f"{num(r['max_interactive_s'])} s")
         for r in limits),
        wide=output == "wide",
    )  # fmt: skip


def _held(row: dict, amount: str, cap: str, shown=num) -> str:
    """``held/cap`` of one limit (a server without ``held``: 0 held)."""
    return f"{shown((row.get('held') or {}).get(amount, 0))}/{shown(row.get(cap))}"


def _print_fair_share(fair: dict | None, output: str | None) -> None:
    """Each group's decayed GPU-hours, weight and usage over weight, and its users'."""
    if not fair or not fair["groups"]:
        return
    days = fair["half_life_s"] / 86400
    click.echo(f"\nfair share over time (decayed billed GPU-hours, half-life {num(round(days, 3))} "
               "d; lower usage/weight borrows first, higher is reclaimed first):")  # fmt: skip
    click.echo(_billing_note(fair.get("billing")))
    print_table(
        ("GROUP", "GPU-HOURS", "WEIGHT", "USAGE/WEIGHT", "USERS (GPU-HOURS)"),
        ((g["group"], num(round(g["gpu_hours"], 3)), num(g["weight"]), num(round(g["ratio"], 3)),
          ", ".join(f"{u['user']} {num(round(u['gpu_hours'], 3))}" for u in g["users"]) or "-")
         for g in fair["groups"]),
        wide=output == "wide",
    )  # fmt: skip


def _billing_note(billing: dict | None) -> str:
    """What a job is billed per hour, in the rates the scheduler uses now."""
    if billing is None:
        return "billed: the largest of a job's GPUs, CPUs and memory in GPUs (no agent known yet)"
    parts = ["its GPUs"]
    per_cpu, per_mib = billing["cpus_per_gpu"], billing["mem_mib_per_gpu"]
    if per_cpu is not None:
        parts.append("its CPUs" if per_cpu == 1 else f"its CPUs / {num(round(per_cpu, 3))}")
    if per_mib is not None:
        parts.append(f"its memory / {num(round(per_mib / 1024, 3))} GiB")
    what = f"the largest of {', '.join(parts)}" if len(parts) > 1 else "".join(parts)
    # one unit, GPU-hours, even where the cluster has none: say where the CPU ratio came from
    why = ("no GPU in the cluster: CPUs at the default ratio; --fair-share-billing cpus=N"
           if billing.get("cpus_default") else "--fair-share-billing")  # fmt: skip
    return f"billed per hour: {what} ({why})"


@command.command("set")
@click.argument("group")
@click.option("--pool", required=True, help="The pool the quota is for (dev, train ...).")
@click.option("--gpus", type=float, default=0, help="Guaranteed GPUs (shares count as fractions).")
@click.option("--cpus", type=float, default=0, help="Guaranteed CPUs.")
@click.option("--mem", default="0", help="Guaranteed memory: 256G, 4096 (MiB).")
@click.option("--ceiling-gpus", type=float, help="Most GPUs the group may hold (borrowing too).")
@click.option("--ceiling-cpus", type=float, help="Most CPUs the group may hold.")
@click.option("--ceiling-mem", help="Most memory the group may hold.")
@api_options
def set_quota(group, pool, gpus, cpus, mem, ceiling_gpus, ceiling_cpus, ceiling_mem, api, token):
    """Set GROUP's guarantee (and ceiling) in a pool (admin; audited)."""
    body = {"pool": pool, "gpus": gpus, "cpus": cpus, "mem": mem, "ceiling_gpus": ceiling_gpus,
            "ceiling_cpus": ceiling_cpus, "ceiling_mem": ceiling_mem}  # fmt: skip
    call(api, token, "PUT", f"/v1/quota/{group}", {k: v for k, v in body.items() if v is not None})
    click.echo(f"{group} in pool {pool}: {num(gpus)} GPUs, {num(cpus)} CPUs, {mem} guaranteed")
    # A pool may get its quota before its agents join, so this is a note, not a refusal; but a
    # typo would otherwise guarantee GPUs that never come without a word.
    agent_pools = sorted(call(api, token, "GET", "/v1/quota").get("pools") or {})
    if agent_pools and pool not in agent_pools:
        click.echo(
            f"note: --pool {pool}: no agent is in that pool yet (agents' pools: "
            f"{', '.join(agent_pools)}); the guarantee counts once agents join it "
            "(their dlc_pool attribute)",
            err=True,
        )


@command.command("grace")
@click.argument("seconds", type=click.FloatRange(0, 3600))
@api_options
def grace(seconds, api, token):
    """Set the preemption grace period: SIGTERM, SECONDS, then SIGKILL (admin; audited).
    Tasks launched from now on get it."""
    out = call(api, token, "PUT", "/v1/preemption-grace", {"grace_s": seconds})
    click.echo(f"preemption grace {num(out['grace_s'])} s for tasks launched from now on")


@command.command("audit")
@click.option("--limit", "-n", type=click.IntRange(1, 1000), default=20, show_default=True)
@output_option
@api_options
def audit(limit, output, api, token):
    """The latest changes to groups, quotas and limits (admin)."""
    import datetime

    rows = call(api, token, "GET", f"/v1/quota/audit?limit={limit}")["audit"]
    if structured(output, rows):
        return
    print_table(
        ("WHEN", "WHO", "WHAT", "DETAIL"),
        ((datetime.datetime.fromtimestamp(e["at"]).isoformat(timespec="seconds"), e["actor"],
          e["action"], " ".join(f"{k}={v}" for k, v in e["detail"].items())) for e in rows),
        width=120, wide=output == "wide",
    )  # fmt: skip
