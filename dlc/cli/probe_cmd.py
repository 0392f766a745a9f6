"""``dlc probe``: measure GPU-to-GPU bandwidth and compare it with the nominal link rates.

Runs the native probe (building it first when ``nvcc`` exists) or reads a saved
run (``--probe-json``), merges the figures into the machine's topology (this host,
or ``--from-file``) and prints, per GPU pair, the link, the nominal and the
measured one-way bandwidth and their ratio; ``--json`` prints the same as JSON
together with the raw probe result.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from dlc.errors import ProbeError
from dlc.probe.merge import Comparison, compare_with_nominal, load_probe_json
from dlc.probe.result import ProbeResult
from dlc.topology.model import Topology


@click.command(name="probe")
@click.option("--gpus", metavar="LIST", help="GPU indices to measure, e.g. 0,1,3 (default all).")
@click.option("--size", default="64M", show_default=True, help="Transfer size (K/M/G suffix).")
@click.option("--iters", type=click.IntRange(1, 100000), help="Copies per timed run.")
@click.option("--repeats", type=click.IntRange(1, 1000), help="Timed runs per figure (median).")
@click.option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    default=900.0,
    show_default=True,
    help="Seconds before giving up.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--probe-json",
    metavar="FILE",
    help="Read a saved probe run (`p2p_probe > FILE`) instead of running the probe.",
)
@click.option(
    "--from-file",
    metavar="TOPO",
    help="Saved `nvidia-smi topo -m` output of the probed machine, instead of this host's.",
)
def command(
    gpus: str | None,
    size: str,
    iters: int | None,
    repeats: int | None,
    timeout: float,
    as_json: bool,
    probe_json: str | None,
    from_file: str | None,
) -> None:
    """Measure P2P bandwidth and latency per GPU pair; compare with the nominal link rates."""
    if probe_json is not None:
        given = [
            name
            for name, value in (("--gpus", gpus), ("--iters", iters), ("--repeats", repeats))
            if value is not None
        ]
        if given:
            # A saved run cannot be re-measured: say so rather than ignore the flag.
            raise ProbeError(f"{given[0]} shapes a new run; drop it when reading --probe-json")
        result = load_probe_json(probe_json)
    else:
        from dlc.probe.runner import build_probe, parse_size, run_probe

        # Check the flags before a possibly long build.
        gpu_list = parse_gpu_list(gpus) if gpus else None
        size_bytes = parse_size(size)
        result = run_probe(
            build_probe(),
            gpus=gpu_list,
            size=size_bytes,
            timeout=timeout,
            iters=iters,
            repeats=repeats,
        )
    topology = load_topology(from_file)
    rows = compare_with_nominal(topology, result)
    if as_json:
        click.echo(json.dumps(to_json(topology, result, rows), indent=2))
    else:
        render_table(topology, result, rows, Console(highlight=False))


def parse_gpu_list(text: str) -> list[int]:
    """``"0,1,3"`` -> ``[0, 1, 3]``.

    Raises:
        ProbeError: not a comma-separated list of distinct indices >= 0.
    """
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() for item in items):
        raise ProbeError(f"--gpus: expected GPU indices such as 0,1,3, got {text!r}")
    gpus = [int(item) for item in items]
    if len(set(gpus)) != len(gpus):
        raise ProbeError(f"--gpus: a GPU is listed twice in {text!r}")
    return gpus


def load_topology(from_file: str | None) -> Topology:
    """The topology of the probed machine: ``--from-file`` text, else this host's."""
    from dlc.topology.discovery.discover import discover  # lazy: NVML/nvidia-smi adapters

    return discover(from_file=from_file)


def to_json(topology: Topology, result: ProbeResult, rows: list[Comparison]) -> dict[str, Any]:
    """The ``--json`` document: topology source, comparison rows and the raw probe run."""
    return {
        "topology_source": topology.source,
        "comparison": [
            {
                "a": r.a,
                "b": r.b,
                "label": r.label,
                "p2p": r.p2p,
                "nominal_gbps": round(r.nominal_gbps, 3),
                "measured_gbps": round(r.measured_gbps, 3),
                "ratio": round(r.ratio, 3),
                "bidi_gbps": r.bidi_gbps,
                "latency_us": r.latency_us,
            }
            for r in rows
        ],
        "probe": result.to_dict(),
    }


def render_table(
    topology: Topology, result: ProbeResult, rows: list[Comparison], console: Console
) -> None:
    """Print the measured-vs-nominal table for a person."""
    size = result.params.get("size_bytes")
    copies = f"; {size} byte copies" if isinstance(size, int) else ""
    table = Table(
        title="P2P bandwidth: measured vs nominal (one way, GB/s)",
        caption=f"topology: {topology.source}{copies}",
    )
    for name in ("pair", "link", "P2P", "nominal", "measured", "ratio"):
        table.add_column(name, justify="left" if name in ("pair", "link") else "right")
    table.add_column("bidi GB/s", justify="right")
    table.add_column("latency us", justify="right")
    for r in rows:
        table.add_row(
            r.pair,
            r.label,
            "yes" if r.p2p else "no",
            f"{r.nominal_gbps:.1f}",
            f"{r.measured_gbps:.1f}",
            f"{r.ratio:.2f}",
            "-" if r.bidi_gbps is None else f"{r.bidi_gbps:.1f}",
            "-" if r.latency_us is None else f"{r.latency_us:.1f}",
        )
    if rows:
        console.print(table)
    render_local(result, console)
    for note in result.notes:
        console.print(f"note: {note}")
    for warning in result.warnings:
        console.print(f"warning: {warning}")


def render_local(result: ProbeResult, console: Console) -> None:
    """Print each GPU's single-GPU figures (probe 1.1 and later; nothing for older runs)."""
    devices = [(d, d.local) for d in result.devices if d.local is not None]
    if not devices:
        return
    table = Table(title="Single GPU: copies within the GPU and to/from pinned host memory")
    for name in ("GPU", "model", "in-GPU GB/s", "host->GPU GB/s", "GPU->host GB/s"):
        table.add_column(name, justify="left" if name in ("GPU", "model") else "right")
    table.add_column("latency h->GPU / GPU->h us", justify="right")

    def fmt(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    for dev, f in devices:
        table.add_row(
            str(dev.index),
            dev.name,
            fmt(f.d2d_gbps),
            fmt(f.h2d_gbps),
            fmt(f.d2h_gbps),
            f"{fmt(f.h2d_latency_us, 2)} / {fmt(f.d2h_latency_us, 2)}",
        )
    console.print(table)
