"""``dlc groups``: list groups; create them and manage members (admin)."""

from __future__ import annotations

import click

from dlc.cli.client_opts import api_options
from dlc.cli.output import output_option
from dlc.cli.queue_cmd import call, num, print_table, structured
from dlc.errors import DlcError
from dlc.scheduler.tenancy.policy import fmt, parse_mem


@click.group("groups", invoke_without_command=True)
@output_option
@api_options
@click.pass_context
def command(ctx, output, api, token):
    """Groups, their members and default pools."""
    if ctx.invoked_subcommand is not None:
        return
    groups = call(api, token, "GET", "/v1/groups")["groups"]
    if structured(output, groups):
        return
    if not groups:
        click.echo("no group yet; `dlc groups create NAME --pool POOL` (admin)")
        return
    print_table(
        ("GROUP", "DEFAULT POOL", "PREEMPT WITHIN", "MEMBERS"),
        ((g["name"], g["default_pool"], "yes" if g["preempt_within"] else "no",
          ", ".join(g["members"])) for g in groups),
        width=120, wide=output == "wide",
    )  # fmt: skip


def check_pool(pool: str, quota: dict) -> None:
    """Refuse a pool that no agent advertises and no quota names (a typo would otherwise
    leave every job of the group waiting for agents that never come).

    Raises:
        DlcError: one line naming the known pools (none known yet: nothing is refused).
    """
    known = set(quota.get("pools") or {}) | {q["pool"] for q in quota.get("quotas") or []}
    if known and pool not in known:
        raise DlcError(
            f"--pool {pool}: no agent or quota has that pool; known pools: "
            f"{', '.join(sorted(known))} (agents join one with the dlc_pool attribute)"
        )


@command.command("create")
@click.argument("name")
@click.option("--pool", "default_pool", default="default", show_default=True,
              help="Pool the group's jobs use when they name none.")  # fmt: skip
@click.option("--preempt-within", is_flag=True,
              help="A higher-priority job may preempt lower ones of the group.")  # fmt: skip
@api_options
def create(name, default_pool, preempt_within, api, token):
    """Create a group (or change its settings; admin, audited)."""
    check_pool(default_pool, call(api, token, "GET", "/v1/quota"))
    body = {"name": name, "default_pool": default_pool, "preempt_within": preempt_within}
    call(api, token, "POST", "/v1/groups", body)
    click.echo(f"group {name} (default pool {default_pool})")


@command.command("add")
@click.argument("group")
@click.argument("users", nargs=-1, required=True)
@api_options
def add(group, users, api, token):
    """Put USERS in GROUP (a user is in one group; admin, audited). A USER no token, group
    member or job has is warned of on stderr (a typo?) and added all the same."""
    for user in users:
        out = call(api, token, "POST", f"/v1/groups/{group}/members", {"user": user})
        if out.get("warning"):  # a name the cluster never saw: added, but likely a typo
            click.echo(f"warning: {out['warning']}", err=True)
    click.echo(f"{group}: added {', '.join(users)}")


@command.command("remove")
@click.argument("group")
@click.argument("user")
@api_options
def remove(group, user, api, token):
    """Take USER out of GROUP (admin, audited)."""
    call(api, token, "DELETE", f"/v1/groups/{group}/members/{user}")
    click.echo(f"{group}: removed {user}")


#: ``--max-... none``: that cap removed (JSON null), distinct from an option not given
NO_CAP = object()

_CAPS = ("max_running", "max_gpus", "max_cpus", "max_mem_mib", "max_interactive_s",
         "max_interactive")  # fmt: skip


class MemSize(click.ParamType):
    """A memory size: ``256G``, ``512M``, ``1T`` or a number of MiB -> MiB."""

    name = "size"

    def convert(self, value, param, ctx):
        try:
            return parse_mem(value, "max_mem")
        except DlcError as exc:
            self.fail(str(exc), param, ctx)


class Cap(click.ParamType):
    """A limit: a number of 0 or more (``number``: integer or float), or ``none`` (no cap)."""

    def __init__(self, number: click.ParamType):
        self.number = number
        self.name = f"{number.name}|none"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "none":
            return NO_CAP
        try:
            return self.number.convert(value, param, ctx)
        except click.BadParameter:
            what = "number"
            if isinstance(self.number, MemSize):
                what = "size such as 256G or 4096 (MiB)"
            elif isinstance(self.number, click.IntRange):
                what = "whole number"
            self.fail(f"{value!r}: give a {what} of 0 or more, or none for no cap",
                      param, ctx)  # fmt: skip


def _cap_option(*decls: str, number: click.ParamType, help: str, metavar: str = "N|none"):
    return click.option(*decls, type=Cap(number), metavar=metavar, help=help)


@command.command("limit")
@click.argument("user")
@_cap_option("--max-running", number=click.IntRange(0), help="Jobs the user may run at once.")
@_cap_option("--max-gpus", number=click.FloatRange(0), help="GPUs the user may hold at once.")
@_cap_option("--max-cpus", number=click.FloatRange(0),
             help="CPUs the user may hold at once, all their jobs (GPU jobs too).")  # fmt: skip
@_cap_option("--max-mem", "max_mem_mib", number=MemSize(), metavar="SIZE|none",
             help="Memory the user may hold at once, all their jobs: 256G, 4096 (MiB).",
             )  # fmt: skip
@_cap_option("--max-interactive", "max_interactive_s", number=click.FloatRange(0),
             help="Longest an interactive environment may run, in seconds.")  # fmt: skip
@_cap_option("--max-environments", "max_interactive", number=click.IntRange(0),
             help="Interactive environments the user may run at once.")  # fmt: skip
@click.option("--clear", is_flag=True,
              help="Remove USER's other limits first (alone: USER has no limit left).")  # fmt: skip
@api_options
def limit(user, clear, api, token, **caps):
    """Change USER's limits (admin, audited): only those given change, the others stay;
    "none" removes one (--max-gpus none: no GPU cap). No option: show them. A USER no
    token, group member or job has is warned of on stderr (a typo?) and stored all the same.

    \b
      dlc groups limit alice --max-cpus 16       # alice's other limits are kept
      dlc groups limit alice --max-gpus none     # no GPU cap any more
      dlc groups limit alice --clear             # no limit at all
      dlc groups limit alice --clear --max-running 2   # only this one
    """
    given = {name: None if v is NO_CAP else v for name, v in caps.items() if v is not None}
    if clear and not given:
        out = call(api, token, "DELETE", f"/v1/limits/{user}")
        click.echo(f"{user}: no limits" + ("" if out["removed"] else " (there were none)"))
        return
    if not given:
        click.echo(limits_text(call(api, token, "GET", f"/v1/limits/{user}")))
        return
    if clear:  # names all six: those not given are null, no cap
        out = call(api, token, "PUT", f"/v1/limits/{user}", {n: given.get(n) for n in _CAPS})
    else:
        out = call(api, token, "PATCH", f"/v1/limits/{user}", given)
    if out.get("warning"):  # a name the cluster never saw: stored, but likely a typo
        click.echo(f"warning: {out['warning']}", err=True)
    click.echo(limits_text(out))


def limits_text(out: dict) -> str:
    """One user's caps as a line: ``alice: 2 running jobs, 4 GPUs, 64 CPUs, 256G memory,
    interactive 28800 s, 1 environments at once`` (``-``: no cap; 0 is a cap: nothing of it
    runs), or ``alice: no limits``."""
    if all(out.get(name) is None for name in _CAPS):
        return f"{out['user']}: no limits"
    mem = out.get("max_mem_mib")
    return (f"{out['user']}: {num(out['max_running'])} running jobs, {num(out['max_gpus'])} "
            f"GPUs, {num(out.get('max_cpus'))} CPUs, "
            f"{'-' if mem is None else fmt(mem, 'memory')} memory, interactive "
            f"{num(out['max_interactive_s'])} s, {num(out.get('max_interactive'))} "
            "environments at once")  # fmt: skip
