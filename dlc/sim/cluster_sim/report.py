"""The scenario's outputs: a rich table, a JSON file and plots (PNG and SVG)."""

from __future__ import annotations

import json
from pathlib import Path

#: the table's rows: metric -> label (allocation and SM activity on separate rows)
ROWS = {
    "allocated_h_per_card_day": "allocated h / card / day",
    "active_h_per_card_day": "active h / card / day (SM > threshold)",
    "allocation_ratio": "(a) allocation ratio",
    "sm_activity": "(b) modelled SM activity",
    "training_completed_per_week": "training jobs completed / week",
    "session_completed_per_week": "sessions completed / week",
    "sessions_withdrawn_per_week": "sessions withdrawn (never started) / week",
    "session_wait_p50_min": "session wait p50 (min)",
    "session_wait_p95_min": "session wait p95 (min)",
    "training_wait_p50_min": "training wait p50 (min)",
    "training_wait_p95_min": "training wait p95 (min)",
    "training_jct_over_isolated_p95": "training JCT / isolated, p95",
    "preemptions_per_week": "preemptions / week",
    "preempted_gpu_h_lost_per_week": "GPU-h lost to preemption / week",
    "tenants_per_gpu_mean": "tenants per allocated GPU, mean",
    "tenants_ge_2_share": "allocated GPU time with >= 2 tenants",
    "gpu_h_over_memory_per_week": "shared GPU-h over memory (OOM risk) / week",
    "slo_met": "SLOs met (share of seeds)",
    "round_ms_mean": "core offer round, mean ms (this machine)",
}


def _cell(stat: dict | None) -> str:
    if not stat or stat["mean"] is None:
        return "-"
    mean, ci = stat["mean"], stat["ci95"]
    digits = 2 if abs(mean) < 10 else 1 if abs(mean) < 1000 else 0
    return f"{mean:.{digits}f}" + (f" ± {ci:.{digits}f}" if ci is not None else "")


def print_table(summary: list[dict], title: str) -> None:
    """One table per (sweep value, duty): metrics down, policies across."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    blocks: dict[tuple, list[dict]] = {}
    for row in summary:
        blocks.setdefault((str(row["sweep"]), row["sm_duty"]), []).append(row)
    for (sweep, duty), rows in blocks.items():
        seeds = len(rows[0]["seeds"])
        head = f"{title}: {seeds} seeds, mean ± 95% CI; session SM duty {duty:g}"
        if sweep != "None":
            head += f"; {sweep}"
        table = Table(title=head)
        table.add_column("metric")
        for row in rows:
            table.add_column(row["policy"], justify="right")
        for name, label in ROWS.items():
            table.add_row(label, *[_cell(r["metrics"].get(name)) for r in rows])
        console.print(table)


def markdown(summary: list[dict], duty: float | None = None) -> str:
    """The table as Markdown (for docs/simulator.md), one duty cycle, no sweep."""
    rows = [r for r in summary if r["sweep"] is None and (duty is None or r["sm_duty"] == duty)]
    if duty is None and rows:
        rows = [r for r in rows if r["sm_duty"] == rows[0]["sm_duty"]]
    lines = ["| metric | " + " | ".join(r["policy"] for r in rows) + " |",
             "|---|" + "---|" * len(rows)]  # fmt: skip
    for name, label in ROWS.items():
        lines.append(
            f"| {label} | " + " | ".join(_cell(r["metrics"].get(name)) for r in rows) + " |"
        )
    return "\n".join(lines)


def _pm(mean: float | None, ci: float | None, digits: int = 1) -> str:
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" + (f" ± {ci:.{digits}f}" if ci is not None else "")


def _pm_pair(pair: tuple[float | None, float | None], digits: int = 1) -> str:
    """:func:`_pm` of a ``(mean, ci)`` pair (``runs.mean_ci``)."""
    return _pm(pair[0], pair[1], digits)


def cards_markdown(found: dict) -> str:
    """The cards-needed table (``runs.cards_table``) as Markdown, one row per policy."""
    lines = [
        "| policy | cards for both SLOs | per seed | seeds unmet | cards for the session SLO "
        "| fewer cards than P0 (paired) | at that size: allocation ratio | allocated h/card/day "
        "| active h/card/day | tenants per GPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, f in found.items():
        seeds = ", ".join(str(v["both"] or "-") for _, v in sorted(f["per_seed"].items()))
        fewer = _pm(f.get("fewer_cards_mean"), f.get("fewer_cards_ci95"), 2)
        cells = [
            policy, _pm(f["both_mean"], f["both_ci95"]), seeds, str(f["both_unmet_seeds"]),
            _pm(f["session_mean"], f["session_ci95"]), fewer,
            _pm_pair(f["at_need_allocation_ratio"], 2),
            _pm_pair(f["at_need_allocated_h_per_card_day"]),
            _pm_pair(f["at_need_active_h_per_card_day"]),
            _pm_pair(f["at_need_tenants_per_gpu_mean"], 2),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, payload: dict) -> None:
    """The full results: the scenario, every run's metrics and the summary."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=True, default=str))


_PLOTS = [
    (("allocated_h_per_card_day", "active_h_per_card_day"), "hours per card per day"),
    (("allocation_ratio", "sm_activity"), "(a) allocation ratio and (b) SM activity"),
    (("training_completed_per_week", "session_completed_per_week"), "completed per week"),
    (("session_wait_p95_min", "training_wait_p95_min"), "wait p95 (minutes, log)"),
    (("preemptions_per_week", "preempted_gpu_h_lost_per_week"), "preemptions and GPU-h lost"),
]


def plot(summary: list[dict], out_dir: Path, title: str) -> list[Path]:
    """Bar charts with 95% error bars per (sweep value, duty); PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    blocks: dict[tuple, list[dict]] = {}
    for row in summary:
        blocks.setdefault((str(row["sweep"]), row["sm_duty"]), []).append(row)
    written = []
    for n, ((sweep, duty), rows) in enumerate(blocks.items()):
        fig, axes = plt.subplots(1, len(_PLOTS), figsize=(4.2 * len(_PLOTS), 3.6))
        policies = [r["policy"] for r in rows]
        for ax, (names, label) in zip(axes, _PLOTS, strict=True):
            width = 0.8 / len(names)
            for k, name in enumerate(names):
                stats = [r["metrics"].get(name) or {} for r in rows]
                means = [s.get("mean") or 0.0 for s in stats]
                cis = [s.get("ci95") or 0.0 for s in stats]
                xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(rows))]
                ax.bar(xs, means, width, yerr=cis, capsize=3, label=ROWS.get(name, name))
            ax.set_xticks(range(len(rows)), policies)
            ax.set_title(label, fontsize=9)
            if "log" in label:
                ax.set_yscale("log")
            ax.legend(fontsize=6)
        suffix = "" if sweep == "None" else f" ({sweep})"
        fig.suptitle(f"{title}: session SM duty {duty:g}{suffix}", fontsize=10)
        fig.tight_layout()
        for ext in ("png", "svg"):
            path = out_dir / f"{title}-{n}.{ext}"
            fig.savefig(path, dpi=110)
            written.append(path)
        plt.close(fig)
    return written


def plot_cards(found: dict, path: Path, title: str) -> list[Path]:
    """Share of seeds whose cluster meets both SLOs (and the session SLO alone) against its
    number of cards, one step curve per policy (``runs.cards_table``); PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    panels = ((axes[0], "both", "both SLOs"), (axes[1], "session", "the session SLO"))
    for ax, name, label in panels:
        for policy, f in found.items():
            needs = sorted(v[name] for v in f["per_seed"].values() if v[name] is not None)
            if not needs:
                continue
            seeds = len(f["per_seed"])
            xs = [0, *needs, max(needs) + 8]
            ys = [0.0, *[(i + 1) / seeds for i in range(len(needs))], len(needs) / seeds]
            ax.step(xs, ys, where="post", label=policy)
        ax.set_xlabel("cards")
        ax.set_title(f"share of seeds meeting {label}", fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("share of seeds")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for ext in ("png", "svg"):
        out = path.with_suffix(f".{ext}")
        fig.savefig(out, dpi=110)
        written.append(out)
    plt.close(fig)
    return written
