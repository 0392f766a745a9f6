"""``dlc simulate``: replay public cluster traces through placement policies."""

from __future__ import annotations

from pathlib import Path

import click

from dlc.errors import FieldError


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50`` (or a mix) -> seeds; bad text is a one-line error."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise FieldError("--seeds", f"{text!r} is not like 42-51 or 42,43; fix the list") from None
    if not seeds:
        raise FieldError("--seeds", "empty; give e.g. 42-51")
    return seeds


@click.group(name="simulate")
def command() -> None:
    """Simulate cluster placement on public traces (see docs/simulator.md)."""


@command.command(name="openb")
@click.option(
    "--trace",
    "traces",
    default="default",
    show_default=True,
    help="openb pod list name(s), comma-separated, or 'all'.",
)
@click.option(
    "--policy",
    "policies",
    default="fgd,dlc",
    show_default=True,
    help="random,dotprod,clustering,packing,bestfit,fgd,dlc (comma-separated) or 'all'.",
)
@click.option("--seeds", default="42-51", show_default=True, help="e.g. 42-51 or 42,43.")
@click.option(
    "--tune",
    default=1.3,
    show_default=True,
    type=float,
    help="resample the workload to this multiple of the cluster's GPUs.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for results.json and plots (PNG and SVG).",
)
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="folder holding alibaba-gpu-v2023/ (default: $DLC_TRACES or ../shared/traces).",
)
def openb(traces, policies, seeds, tune, out_dir, trace_dir) -> None:
    """The FGD paper's openb replay: allocation ratio vs arrived GPU demand."""
    from dlc.sim import io
    from dlc.sim.policies import POLICIES
    from dlc.sim.report import experiment, print_table, write_outputs

    root = io.trace_root(trace_dir)
    names = io.available_traces(root) if traces == "all" else _split(traces)
    pols = list(POLICIES) if policies == "all" else _split(policies)
    for p in pols:
        if p not in POLICIES:
            raise FieldError("--policy", f"unknown policy {p!r}; use one of {', '.join(POLICIES)}")
    if tune <= 0 or tune > 5:
        raise FieldError("--tune", f"{tune} is out of range; use a value in (0, 5], e.g. 1.3")
    results = experiment(root, names, pols, parse_seeds(seeds), tune)
    for trace, res in results.items():
        print_table(trace, res)
    if out_dir is not None:
        write_outputs(out_dir, results)
        click.echo(f"wrote {out_dir}/results.json and plots")


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]
