"""``dlc groups``: list groups; create them and manage members (admin)."""

from __future__ import annotations

import click

from dlc.cli.client_opts import api_options
from dlc.cli.queue_cmd import call, num, print_table


@click.group("groups", invoke_without_command=True)
@api_options
@click.pass_context
def command(ctx, api, token):
    """Groups, their members and default pools."""
    if ctx.invoked_subcommand is not None:
        return
    groups = call(api, token, "GET", "/v1/groups")["groups"]
    if not groups:
        click.echo("no group yet; `dlc groups create NAME --pool POOL` (admin)")
        return
    print_table(
        ("GROUP", "DEFAULT POOL", "PREEMPT WITHIN", "MEMBERS"),
        ((g["name"], g["default_pool"], "yes" if g["preempt_within"] else "no",
          ", ".join(g["members"])) for g in groups),
        width=120,
    )  # fmt: skip


@command.command("create")
@click.argument("name")
@click.option("--pool", "default_pool", default="default", show_default=True,
              help="Pool the group's jobs use when they name none.")  # fmt: skip
@click.option("--preempt-within", is_flag=True,
              help="A higher-priority job may preempt lower ones of the group.")  # fmt: skip
@api_options
def create(name, default_pool, preempt_within, api, token):
    """Create a group (or change its settings; admin, audited)."""
    body = {"name": name, "default_pool": default_pool, "preempt_within": preempt_within}
    call(api, token, "POST", "/v1/groups", body)
    click.echo(f"group {name} (default pool {default_pool})")


@command.command("add")
@click.argument("group")
@click.argument("users", nargs=-1, required=True)
@api_options
def add(group, users, api, token):
    """Put USERS in GROUP (a user is in one group; admin, audited)."""
    for user in users:
        call(api, token, "POST", f"/v1/groups/{group}/members", {"user": user})
    click.echo(f"{group}: added {', '.join(users)}")


@command.command("remove")
@click.argument("group")
@click.argument("user")
@api_options
def remove(group, user, api, token):
    """Take USER out of GROUP (admin, audited)."""
    call(api, token, "DELETE", f"/v1/groups/{group}/members/{user}")
    click.echo(f"{group}: removed {user}")


@command.command("limit")
@click.argument("user")
@click.option("--max-running", type=click.IntRange(0), help="Jobs the user may run at once.")
@click.option("--max-gpus", type=click.FloatRange(0), help="GPUs the user may hold at once.")
@click.option("--max-interactive", "max_interactive_s", type=click.FloatRange(0),
              help="Longest an interactive environment may run, in seconds.")  # fmt: skip
@click.option("--max-environments", "max_interactive", type=click.IntRange(0),
              help="Interactive environments the user may run at once.")  # fmt: skip
@api_options
def limit(user, max_running, max_gpus, max_interactive_s, max_interactive, api, token):
    """Set USER's limits (absent: no cap; admin, audited)."""
    body = {"max_running": max_running, "max_gpus": max_gpus,
            "max_interactive_s": max_interactive_s, "max_interactive": max_interactive}  # fmt: skip
    out = call(api, token, "PUT", f"/v1/limits/{user}", body)
    click.echo(f"{user}: {out['max_running'] or '-'} running jobs, {num(out['max_gpus'])} GPUs, "
               f"interactive {num(out['max_interactive_s'])} s, "
               f"{out.get('max_interactive') or '-'} environments at once")  # fmt: skip
