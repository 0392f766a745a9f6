"""Tables of the sharing-cost runs: Markdown for docs, rich for the terminal."""

from __future__ import annotations

from collections.abc import Mapping

#: (metric, column title, decimals)
COLUMNS = (
    ("allocated_gpu_h", "GPU-h allocated", 0),
    ("useful_gpu_h", "useful GPU-h", 0),
    ("useful_vs_baseline_pct", "useful vs first, %", 2),
    ("useful_per_allocated", "useful/alloc", 3),
    ("lost_gpu_h", "GPU-h lost", 1),
    ("lost_other_tenant_gpu_h", "lost to other tenants", 1),
    ("killed_other_tenant", "killed by other tenant", 1),
    ("killed_same_tenant", "killed by own tenant", 1),
    ("completed", "completed", 0),
)


def cell(entry: Mapping, metric: str, decimals: int) -> str:
    """``mean ± half-width`` of one metric."""
    m = entry[metric]
    ci = m["ci95"]
    text = f"{m['mean']:.{decimals}f}"
    return text if ci != ci else f"{text} ± {ci:.{decimals}f}"  # NaN: one seed


def markdown(summary: Mapping[str, Mapping]) -> str:
    """One row per policy, one column per metric."""
    head = "| policy | " + " | ".join(t for _, t, _ in COLUMNS) + " |"
    rule = "|---" * (len(COLUMNS) + 1) + "|"
    rows = [
        f"| {name} | " + " | ".join(cell(e, m, d) for m, _, d in COLUMNS) + " |"
        for name, e in summary.items()
    ]
    return "\n".join([head, rule, *rows])


def print_table(summary: Mapping[str, Mapping], title: str) -> None:
    """The same table in the terminal."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("policy")
    for _, t, _ in COLUMNS:
        table.add_column(t, justify="right")
    for name, e in summary.items():
        table.add_row(name, *(cell(e, m, d) for m, _, d in COLUMNS))
    Console().print(table)
