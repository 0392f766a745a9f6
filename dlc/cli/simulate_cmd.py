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
    default=None,
    help="random,dotprod,clustering,packing,bestfit,fgd,dlc (comma-separated) or 'all'"
    " [default: fgd,dlc; --mode core: dlc].",
)
@click.option(
    "--mode",
    default="replay",
    show_default=True,
    help="replay: placement on arrays; core: through DLC's scheduler core on simulated"
    " Mesos agents (offers, rounds, TaskInfos; minutes per seed on all agents).",
)
@click.option("--agents", type=int, default=None, help="only the first N openb nodes (short runs).")
@click.option(
    "--batch",
    "batch_pct",
    type=float,
    default=None,
    help="--mode core: percent of the cluster's GPUs arriving between offer rounds [default: 1].",
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
def openb(traces, policies, mode, agents, batch_pct, seeds, tune, out_dir, trace_dir) -> None:
    """The FGD paper's openb replay: allocation ratio vs arrived GPU demand."""
    from dlc.sim import io
    from dlc.sim.report import experiment, print_table, write_outputs

    pols = _openb_policies(policies, mode)
    batch = _openb_batch(batch_pct, mode)
    if tune <= 0 or tune > 5:
        raise FieldError("--tune", f"{tune} is out of range; use a value in (0, 5], e.g. 1.3")
    root = io.trace_root(trace_dir)
    if agents is not None and not 1 <= agents <= len(io.load_nodes(root)):
        raise FieldError("--agents", f"{agents} is out of range; use 1 to the openb node count")
    names = io.available_traces(root) if traces == "all" else _split(traces)
    results = experiment(root, names, pols, parse_seeds(seeds), tune, mode, agents, batch)
    for trace, res in results.items():
        print_table(trace, res)
    if out_dir is not None:
        write_outputs(out_dir, results)
        click.echo(f"wrote {out_dir}/results.json and plots")


def _openb_policies(policies: str | None, mode: str) -> list[str]:
    """The policies to run: checked, and DLC's only under ``--mode core``."""
    from dlc.sim.policies import POLICIES, check_core_policy, check_policy

    if mode not in ("replay", "core"):
        raise FieldError("--mode", f"unknown mode {mode!r}; use replay or core")
    text = policies or ("dlc" if mode == "core" else "fgd,dlc")
    pols = list(POLICIES) if text == "all" else _split(text)
    if not pols:
        raise FieldError("--policy", "empty; give e.g. fgd,dlc")
    for p in pols:
        check_policy(p)
        if mode == "core":
            check_core_policy(p)
    return pols


def _openb_batch(batch_pct: float | None, mode: str) -> float:
    """Percent of the GPUs per offer round (``--mode core`` only)."""
    if batch_pct is None:
        return 1.0
    if mode != "core":
        raise FieldError("--batch", "only --mode core has offer rounds; drop --batch")
    if not 0 < batch_pct <= 100:
        raise FieldError("--batch", f"{batch_pct} is out of range; use a value in (0, 100], e.g. 1")
    return batch_pct


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@command.command(name="scenario")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--policy",
    "policies",
    default="P0,P1,P2,P3,P4",
    show_default=True,
    help="policies of the file, comma-separated, or 'all'.",
)
@click.option("--seeds", default="1-10", show_default=True, help="e.g. 1-10 or 1,2.")
@click.option(
    "--sweep",
    default=None,
    metavar="SECTION.FIELD=V1,V2",
    help="simulate again for each value of one field, e.g. sessions.median_hours=1,2,4.",
)
@click.option(
    "--activity",
    default=None,
    metavar="D1,D2",
    help="session SM duty cycles to measure each run with, e.g. 0.05,0.15,0.3.",
)
@click.option(
    "--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="worker processes."
)
@click.option("--days", type=click.FloatRange(0.01, 366), help="override the file's days.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for results.json and plots (PNG and SVG).",
)
def scenario(file, policies, seeds, sweep, activity, jobs, days, out_dir) -> None:
    """A workload file (YAML) through DLC's scheduler core on simulated Mesos agents."""
    from rich.progress import Progress

    from dlc.sim.cluster_sim import report
    from dlc.sim.cluster_sim.runs import run_all, summarise
    from dlc.sim.cluster_sim.scenario import load_scenario

    spec = load_scenario(file)
    pols = list(spec.policies) if policies == "all" else _split(policies)
    swept = _parse_sweep(sweep) if sweep else None
    duties = [_number("--activity", d) for d in _split(activity)] if activity else []
    seed_list = parse_seeds(seeds)
    with Progress(transient=True) as bar:
        task = bar.add_task(f"{spec.name}: runs", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        rows = run_all(spec, pols, seed_list, swept, duties, jobs, tick, days)
    summary = summarise(rows)
    report.print_table(summary, spec.name)
    if out_dir is not None:
        payload = {"scenario": spec.name, "file": str(file), "sections": spec.sections,
                   "policies": {p: spec.policies[p] for p in pols}, "seeds": seed_list,
                   "days": days or spec.days, "runs": rows, "summary": summary}  # fmt: skip
        report.write_json(out_dir / "results.json", payload)
        report.plot(summary, out_dir, spec.name)
        click.echo(f"wrote {out_dir}/results.json and plots")


def _parse_sweep(text: str) -> tuple[str, list[float]]:
    field, eq, values = text.partition("=")
    if not eq or "." not in field or not values:
        raise FieldError(
            "--sweep", f"{text!r} is not SECTION.FIELD=V1,V2; e.g. sessions.median_hours=1,2"
        )
    return field.strip(), [_number("--sweep", v) for v in _split(values)]


def _number(option: str, text: str) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise FieldError(option, f"{text!r} is not a number; give e.g. 0.05,0.15") from None
    return int(value) if value.is_integer() and "." not in text else value


@command.command(name="sharing-cost")
@click.option(
    "--policy",
    "policies",
    default="mps-mixed,tenancy,time-slicing",
    show_default=True,
    help="mps-mixed, tenancy[:MPS_FRACTION], time-slicing (comma-separated).",
)
@click.option(
    "--backend-mix",
    "mps_fraction",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="part of the agents running MPS under 'tenancy' (the rest run the shim).",
)
@click.option("--trace", default="default", show_default=True, help="openb pod list name.")
@click.option("--seeds", default="42-51", show_default=True, help="e.g. 42-51 or 42,43.")
@click.option("--hours", default=48.0, show_default=True, type=click.FloatRange(0.1, 24 * 60))
@click.option("--nodes", default=32, show_default=True, type=click.IntRange(1, 2000))
@click.option(
    "--load",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.05, 5),
    help="offered GPU demand over the cluster's GPUs.",
)
@click.option("--tenants", default=20, show_default=True, type=click.IntRange(1, 10000))
@click.option(
    "--fault-rate",
    default=0.02,
    show_default=True,
    type=click.FloatRange(0, 100),
    help="fatal faults per running share-hour (an assumption, not measured).",
)
@click.option("--checkpoint-minutes", default=30.0, show_default=True, type=click.FloatRange(1))
@click.option(
    "--kernel-mix",
    default="large=1,medium=1,small=1",
    show_default=True,
    help="weights of the measured matmul sizes (8192^3, 4096^3, 1024^3).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="folder holding alibaba-gpu-v2023/ (default: $DLC_TRACES or ../shared/traces).",
)
def sharing_cost(
    policies,
    mps_fraction,
    trace,
    seeds,
    hours,
    nodes,
    load,
    tenants,
    fault_rate,
    checkpoint_minutes,
    kernel_mix,
    json_path,
    trace_dir,
) -> None:
    """Work delivered per sharing backend: measured throughput, faults and their blast radius."""
    from dlc.sim import io
    from dlc.sim.sharing import report
    from dlc.sim.sharing.costs import default_model, parse_kernel_mix
    from dlc.sim.sharing.engine import FaultSpec
    from dlc.sim.sharing.policy import parse_policy
    from dlc.sim.sharing.runs import load_inputs, run_all, summarise
    from dlc.sim.sharing.workload import WorkloadSpec

    pols = [parse_policy(p, mps_fraction) for p in _split(policies)]
    work = WorkloadSpec(
        hours=hours,
        load=load,
        nodes=nodes,
        tenants=tenants,
        kernel_mix=parse_kernel_mix(kernel_mix),
    )
    faults = FaultSpec(fault_rate_per_hour=fault_rate, checkpoint_minutes=checkpoint_minutes)
    node_list, lives = load_inputs(trace_dir, trace)
    rows = run_all(node_list, lives, pols, parse_seeds(seeds), work, faults)
    summary = summarise(rows)
    report.print_table(summary, f"{trace}: {nodes} nodes, {hours:g} h, faults {fault_rate:g}/h")
    if json_path is not None:
        workload = work.__dict__ | {"kernel_mix": dict(work.kernel_mix)}
        payload = {
            "trace": trace,
            "workload": workload,
            "faults": faults.__dict__,
            "costs": default_model().sources(),
            "runs": rows,
            "summary": summary,
        }
        io.write_json(json_path, payload)
        click.echo(f"wrote {json_path}")
