"""``-o json|yaml|wide`` for listing and show commands, and plain tables that fit the terminal.

``json`` and ``yaml`` print the API's own objects (what a script would get from the API);
``wide`` is the table with more columns and no cut cells; the default is the table cut to fit.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from typing import Any

import click
import yaml

FORMATS = ("table", "json", "yaml", "wide")


def output_option(func):
    """Add ``-o/--output table|json|yaml|wide`` (default ``table``) as ``output``."""
    return click.option(
        "-o", "--output", "output", type=click.Choice(FORMATS), default="table",
        show_default=True, help="json/yaml: the API's objects, for scripts; wide: more columns.",
    )(func)  # fmt: skip


def emit(data: Any, output: str) -> None:
    """Print ``data`` as JSON (indented) or YAML."""
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))


def emit_line(data: Any, output: str) -> None:
    """Print one object as one JSON line (``--watch -o json``) or one YAML document."""
    if output == "json":
        click.echo(json.dumps(data, separators=(",", ":")))
    else:
        click.echo("---\n" + yaml.safe_dump(data, sort_keys=False).rstrip("\n"))


def terminal_width(floor: int = 150) -> int:
    """Columns to fill: ``$COLUMNS`` or the terminal's, at least ``floor`` (pipes get ``floor``)."""
    return max(floor, shutil.get_terminal_size((floor, 24)).columns)


def clean(value: Any) -> str:
    """A cell's text: control characters blanked (user data must not move the cursor)."""
    return "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in str(value))


def cut(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (``None``: never cut)."""
    if width is not None and len(text) > width:
        return text[: max(0, width - 1)] + "\u2026"
    return text


#: said on stderr under a table whose text was cut to fit (stdout stays the table alone)
CUT_NOTE = "(\u2026 marks text cut to fit: -o wide shows it whole)"


def note_if_cut(lines: Sequence[str]) -> None:
    """Say on stderr how to see cut text whole, when a line of the table has some."""
    if any("\u2026" in line for line in lines):
        click.echo(CUT_NOTE, err=True)


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    widths: Sequence[int | None] | None = None,
    total: int | None = None,
) -> list[str]:
    """Rows under headers, columns two spaces apart; the last column takes what is left.

    Args:
        widths: the most each column may take (``None``: no limit).
        total: the line width to fit: the last column is cut to what the others leave
            (but never below 20 characters). ``None``: nothing is cut for the total.
    """
    widths = list(widths or [None] * len(headers))
    cells = [[cut(clean(v), w) for v, w in zip(row, widths, strict=True)] for row in rows]
    sizes = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    if total is not None and cells:
        room = max(20, total - sum(sizes[:-1]) - 2 * (len(sizes) - 1))
        cells = [[*r[:-1], cut(r[-1], room)] for r in cells]
        sizes[-1] = max([len(headers[-1])] + [len(r[-1]) for r in cells])
    lines = []
    for row in [list(headers), *cells]:
        padded = [c.ljust(s) for c, s in zip(row[:-1], sizes, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines
