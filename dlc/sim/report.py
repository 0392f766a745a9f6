"""Tables, JSON and plots of openb experiments (the I/O side of :mod:`dlc.sim.run`)."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dlc.sim import io
from dlc.sim.policies import label
from dlc.sim.run import REPORT_STEPS, PolicyRuns, run_trace

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def experiment(
    root: Path,
    traces: list[str],
    policies: list[str],
    seeds: list[int],
    tune: float,
    mode: str = "replay",
    agents: int | None = None,
    batch_pct: float = 1.0,
):
    """Run every trace; returns ``{trace: {"runs", "published", "total_gpus", "mode"}}``.

    ``mode``: ``replay`` (direct, on arrays) or ``core`` (through the scheduler core);
    ``agents``: only the first that many openb nodes (the demand scales with them);
    ``batch_pct``: ``core`` only, percent of the GPUs arriving between offer rounds.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    nodes = io.load_nodes(root)[:agents]
    total_gpus = sum(n.gpus for n in nodes)
    out = {}
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        for trace in traces:
            pods = io.load_pods(root, trace)
            expected = int(tune * total_gpus * 1.0 / max(1, _gpus(pods)) * len(pods))
            task = bar.add_task(f"{trace}", total=expected * len(policies) * len(seeds))
            tick = partial(_advance, bar, task)
            runs = run_trace(nodes, pods, policies, seeds, tune, tick, mode, batch_pct)
            bar.update(task, completed=bar.tasks[task].total)
            out[trace] = {
                "runs": runs,
                "published": _published(io.load_expected(root, trace)),
                "total_gpus": total_gpus,
                "mode": mode,
                "agents": len(nodes),
            }
    return out


def _advance(bar: Progress, task: TaskID, _policy: str, n: int) -> None:
    bar.advance(task, n)


def _gpus(pods) -> float:
    return sum(p.total_gpu_milli for p in pods) / 1000


def _published(expected: dict) -> dict[str, np.ndarray]:
    return {p: np.nanmean(np.array(list(s.values())), axis=0) for p, s in expected.items()}


def run_label(name: str, res: dict) -> str:
    """A policy's display name; ``--mode core`` runs say so."""
    return label(name) + (" (core)" if res.get("mode") == "core" else "")


def _fmt(ci: dict) -> str:
    if math.isnan(ci["ci95"]):
        return f"{ci['mean']:.2f}"
    return f"{ci['mean']:.2f} ± {ci['ci95']:.2f}"


def print_table(trace: str, res: dict) -> None:
    """One row per policy: allocation at 100..130% (95% CI), unallocated GPUs, published."""
    from rich.console import Console
    from rich.table import Table

    how = " through the scheduler core" if res.get("mode") == "core" else ""
    table = Table(title=f"openb {trace}{how}: GPU allocation ratio (%) vs arrived demand")
    table.add_column("policy")
    for k in REPORT_STEPS:
        table.add_column(f"{k}%", justify="right")
    table.add_column("unalloc. GPUs", justify="right")
    table.add_column("published 130%", justify="right")
    table.add_column("s/replay", justify="right")
    for name, runs in res["runs"].items():
        s = runs.summary(res["total_gpus"])
        pub = res["published"].get(name)
        table.add_row(
            run_label(name, res),
            *[_fmt(s[f"alloc_{k}"]) for k in REPORT_STEPS],
            f"{s['unallocated_gpus_130']:.0f}",
            "-" if pub is None else f"{pub[130]:.2f}",
            f"{s['seconds_per_replay']:.1f}",
        )
    Console().print(table)


def to_json(res: dict) -> dict:
    """A trace's results as plain data (curves as lists, NaN as null)."""
    out = {"total_gpus": res["total_gpus"], "mode": res.get("mode", "replay"), "policies": {}}
    if "agents" in res:
        out["agents"] = res["agents"]
    runs_of: dict[str, PolicyRuns] = res["runs"]
    for name, runs in runs_of.items():
        entry = runs.summary(res["total_gpus"])
        entry["mean_curve"] = _list(runs.mean_curve())
        entry["curves"] = {str(s): _list(c) for s, c in zip(runs.seeds, runs.curves, strict=True)}
        entry["frag_curves"] = {
            str(s): _list(c) for s, c in zip(runs.seeds, runs.frag_curves, strict=True)
        }
        pub = res["published"].get(name)
        if pub is not None:
            entry["published_mean_curve"] = _list(pub)
            entry["max_abs_diff_vs_published"] = float(np.nanmax(np.abs(runs.mean_curve() - pub)))
        out["policies"][name] = entry
    return out


def _list(a: np.ndarray) -> list:
    return [None if math.isnan(x) else round(float(x), 3) for x in a]


def write_outputs(out_dir: Path, results: dict) -> None:
    """``results.json`` plus ``sim-<trace>.png``/``.svg`` in ``out_dir``."""
    from dlc.sim.plot import plot_curves

    io.write_json(out_dir / "results.json", {t: to_json(r) for t, r in results.items()})
    for trace, res in results.items():
        curves = {run_label(n, res): r.mean_curve() for n, r in res["runs"].items()}
        pub = {run_label(n, res): c for n, c in res["published"].items() if n in res["runs"]}
        for ext in ("png", "svg"):
            plot_curves(curves, out_dir / f"sim-{trace}.{ext}", f"openb {trace}", pub)
