"""``dlc queue``: every waiting job in run order, with its group, pool and reason."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import click

from dlc.api.client import ApiClient
from dlc.cli.client_opts import api_options
from dlc.cli.job_view import CPU_ONLY
from dlc.cli.output import CUT_NOTE, clean, cut, emit, format_table, output_option


def cell(value: Any, width: int):
    """A table cell: plain text (no rich markup), control characters blanked, cut to ``width``."""
    from rich.text import Text

    return Text(cut(clean(value), width))


def call(api: str | None, token: str | None, method: str, path: str, body: Any = None) -> Any:
    """One API call (one-line errors come from the client)."""
    return ApiClient(api, token)._call(method, path, body)


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], width: int = 60, wide: bool = False
) -> None:
    """A plain table (cells cut to ``width``, or whole with ``wide``; user text cannot
    restyle it)."""
    from rich.console import Console
    from rich.table import Table

    if wide:
        rows = [["-" if v is None else v for v in row] for row in rows]
        for line in format_table(columns, rows):
            click.echo(line)
        return
    texts = [[cell("-" if v is None else v, width) for v in row] for row in rows]
    console = Console(width=max(150, Console().width))
    sizes = [max([len(n)] + [len(r[i]) for r in texts]) for i, n in enumerate(columns)]
    # every column but the last keeps its widest cell whole; the last one gets what is left,
    # cut with a visible mark (the console's edge cropped it silently)
    room = max(20, console.width - sum(sizes[:-1]) - 2 * (len(sizes) - 1))
    table = Table(box=None, pad_edge=False)
    for index, name in enumerate(columns):
        last = index == len(columns) - 1
        table.add_column(name, no_wrap=True, overflow="ellipsis",
                         min_width=None if last else sizes[index],
                         max_width=room if last else None)  # fmt: skip
    for row in texts:
        table.add_row(*row)
    console.print(table)
    if sizes[-1] > room or any("\u2026" in str(t) for row in texts for t in row):
        click.echo(CUT_NOTE, err=True)


def num(value: float | None) -> str:
    """``6``, ``2.5``, ``-`` for none."""
    if value is None:
        return "-"
    return f"{round(value, 3):g}"


def structured(output: str, body: Any) -> bool:
    """Print ``body`` (the API's answer) for ``-o json|yaml`` and say so."""
    if output in ("json", "yaml"):
        emit(body, output)
        return True
    return False


def _gpus(row: dict) -> str:
    """A queue row's GPUs over all its nodes, or ``CPU only`` (``2x CPU only``: a gang) for a
    ``--gpus 0`` job, as ``dlc jobs`` shows it (an older server's row: its number)."""
    if not row.get("cpu_only"):
        return num(row["gpus"])
    nodes = row.get("nodes") or 1
    return CPU_ONLY if nodes == 1 else f"{nodes}x {CPU_ONLY}"


@click.command("queue")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as -o json.")
@output_option
@api_options
def command(as_json, output, api, token):
    """Waiting jobs in run order: position, priority, group, pool, GPUs (or CPU only) and
    CPUs over all nodes, reason (-o wide: whole reasons)."""
    rows = call(api, token, "GET", "/v1/queue")["queue"]
    if structured("json" if as_json else output, rows):
        return
    if not rows:
        click.echo("no job is waiting")
        return
    print_table(
        ("POS", "ID", "USER", "GROUP", "POOL", "PRIO", "GPUS", "CPUS", "REASON"),
        (
            (r["position"], "-", "(another user)", "-", "-", "-", "-", "-", "")
            if r.get("hidden")  # a non-admin sees other users' jobs by position only
            else (
                r["position"],
                r["id"],
                r["user"],
                f"{r['group']} #{r['group_position']}",
                r["pool"],
                r["priority_class"] or r["priority"],
                _gpus(r),
                num(r.get("cpus")),
                ("next to run; " if r["admitted"] else "") + r["reason"],
            )
            for r in rows
        ),  # fmt: skip
        width=120,
        wide=output == "wide",
    )
