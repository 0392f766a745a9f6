"""Policies compared on work delivered, with sharing's measured cost and faults' blast radius.

Usage::

    .venv/bin/python bench/sim_sharing_cost.py [--seeds 42-51] [--scenarios all]
        [--json bench/results/sim_sharing_cost.json]
    .venv/bin/python bench/sim_sharing_cost.py --table bench/results/sim_sharing_cost.json

Each scenario runs ``mps-mixed`` (every agent MPS, tenants mix: DLC before issue 27),
``tenancy:0.5`` and ``tenancy:1`` (DLC's rule: MPS GPUs hold one tenant; half / all of the
agents on MPS, the rest on the shim) and ``time-slicing`` (every agent on the shim), on the
same sampled openb nodes, jobs and fault clocks per seed (docs/simulator.md, "The cost of
sharing"). The JSON is rewritten after each scenario; ``--table`` prints the Markdown tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dlc.cli.simulate_cmd import parse_seeds
from dlc.sim import io
from dlc.sim.sharing.costs import default_model, parse_kernel_mix
from dlc.sim.sharing.engine import FaultSpec
from dlc.sim.sharing.policy import parse_policy
from dlc.sim.sharing.report import markdown
from dlc.sim.sharing.runs import load_inputs, run_all, summarise
from dlc.sim.sharing.workload import WorkloadSpec

POLICIES = ("mps-mixed", "tenancy:0.5", "tenancy:1", "time-slicing")
#: name -> (fault rate per share-hour, kernel mix, tenants, tenant skew); the first is the
#: default of `dlc simulate sharing-cost`
SCENARIOS = {
    "default": (0.02, "large=1,medium=1,small=1", 20, 1.0),
    "faults-0.2": (0.2, "large=1,medium=1,small=1", 20, 1.0),
    "faults-1": (1.0, "large=1,medium=1,small=1", 20, 1.0),
    "large-kernels": (0.02, "large=1", 20, 1.0),
    "many-tenants": (0.2, "large=1,medium=1,small=1", 200, 0.0),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="default")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--scenarios", default="all", help=f"all or some of {', '.join(SCENARIOS)}")
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--json", type=Path, default=Path("bench/results/sim_sharing_cost.json"))
    ap.add_argument("--table", type=Path, help="print the tables of this JSON and stop")
    args = ap.parse_args(argv)
    if args.table:
        print_tables(io.read_json(args.table))
        return 0
    names = list(SCENARIOS) if args.scenarios == "all" else args.scenarios.split(",")
    seeds = parse_seeds(args.seeds)
    nodes, lives = load_inputs(None, args.trace)
    out = {
        "trace": args.trace,
        "seeds": seeds,
        "hours": args.hours,
        "nodes": args.nodes,
        "costs": default_model().sources(),
        "scenarios": {},
    }
    pols = [parse_policy(p) for p in POLICIES]
    for name in names:
        rate, mix, tenants, skew = SCENARIOS[name]
        work = WorkloadSpec(
            hours=args.hours,
            nodes=args.nodes,
            tenants=tenants,
            tenant_skew=skew,
            kernel_mix=parse_kernel_mix(mix),
        )
        faults = FaultSpec(fault_rate_per_hour=rate)
        started = time.perf_counter()
        rows = run_all(nodes, lives, pols, seeds, work, faults)
        out["scenarios"][name] = {
            "fault_rate_per_hour": rate,
            "kernel_mix": dict(work.kernel_mix),
            "checkpoint_minutes": faults.checkpoint_minutes,
            "tenants": work.tenants,
            "tenant_skew": work.tenant_skew,
            "load": work.load,
            "wall_seconds": time.perf_counter() - started,
            "runs": rows,
            "summary": summarise(rows),
        }
        io.write_json(args.json, out)
        print(f"{name}: {len(rows)} runs in {time.perf_counter() - started:.0f} s", flush=True)
    print_tables(out)
    return 0


def print_tables(data: dict) -> None:
    """One Markdown table per scenario."""
    for name, sc in data["scenarios"].items():
        mix = ", ".join(f"{k} {v:.2f}" for k, v in sc["kernel_mix"].items() if v)
        print(
            f"\n{name}: faults {sc['fault_rate_per_hour']:g} per share-hour, kernels {mix}, "
            f"{sc['tenants']} tenants (Zipf exponent {sc['tenant_skew']:g}), "
            f"{len(data['seeds'])} seeds, {data['nodes']} nodes, {data['hours']:g} h\n"
        )
        print(markdown(sc["summary"]))


if __name__ == "__main__":
    sys.exit(main())
