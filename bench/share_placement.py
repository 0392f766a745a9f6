"""GPU-share placement: DLC's fragmentation-aware choice against first-fit and best-fit.

Usage::

    .venv/bin/python bench/share_placement.py [--agents 200] [--requests N]
        [--seeds 1 2 3] [--json bench/results/share_placement.json]

A cluster of DGX-1-like agents (8 x 32 GiB GPUs, NVLink quads 0-3 and 4-7) advertising the
``gpu_mem``/``gpu_core`` RANGES of docs/sharing.md gets one seeded stream of requests per
seed (Poisson arrivals, exponential run times, about 90 % of the GPUs asked for): GPU shares
(``--gpu-memory 2G/4G/8G/16G``, ``--gpus 0.25/0.5``; 85 % of requests) and whole-GPU jobs (1, 2,
4, 8 GPUs; 15 %). Every policy sees the same stream; a request that fits nowhere at its arrival
is refused (no queue), so the streams stay identical.

* ``dlc``: the scheduler's own code. Shares go through
  :func:`dlc.scheduler.placement.share_placement.choose_share` (the FGD measure over every agent's
  ranges); whole GPUs go to the agent with the fewest whole GPUs that fits (placement's best
  fit) and DLC's ``tree`` allocator picks them on the DGX-1 topology.
* ``first-fit``: the first agent and the first GPU (lowest index) where the share fits; whole
  GPUs on the first agent with enough, lowest indices.
* ``best-fit``: the GPU with the least memory left after the share (ties: least compute);
  whole GPUs on the agent with the fewest whole GPUs that fits, lowest indices.

Measured after a warm-up (see :func:`stream`): the whole GPUs (nothing on them) and
the whole NVLink quads free at each arrival, whole-GPU and share requests refused, and the time
of each decision. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from dlc.scheduler.allocator import allocate  # noqa: E402
from dlc.scheduler.jobs.job import JobSpec  # noqa: E402
from dlc.scheduler.placement.share_placement import choose_share  # noqa: E402
from dlc.topology import gpu_shares  # noqa: E402
from dlc.topology.parse_topo import load_topology_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "bench" / "results" / "share_placement.json"
DGX1 = load_topology_text((ROOT / "examples" / "topologies" / "dgx1-v100.txt").read_text())
GPUS, GPU_MIB, MILLI = 8, 32768, 1000
QUADS = ((0, 1, 2, 3), (4, 5, 6, 7))
POLICIES = ("dlc", "first-fit", "best-fit")
#: (what the request asks, weight): a share's JobSpec keys, or a whole-GPU count
SHAPES = (
    ({"gpu_memory": "2G"}, 0.20), ({"gpu_memory": "4G"}, 0.30), ({"gpu_memory": "8G"}, 0.15),
    ({"gpu_memory": "16G"}, 0.05), ({"gpus": 0.25}, 0.10), ({"gpus": 0.5}, 0.05),
    (1, 0.08), (2, 0.04), (4, 0.02), (8, 0.01),
)  # fmt: skip
CPUS, MEM = 0.5, 2048  # what each request asks besides GPUs (agents have plenty)
LOAD = 0.9


@dataclass(frozen=True)
class Request:
    """One arrival: a share's spec or a whole-GPU count, and how long it runs."""

    spec: JobSpec | None
    gpus: int
    arrive: float
    duration: float

    @property
    def gpu_equivalent(self) -> float:
        if self.spec is None:
            return float(self.gpus)
        return max(
            self.spec.share_core_milli / MILLI, self.spec.share_memory_mib(GPU_MIB) / GPU_MIB
        )


def _mean_size(specs, shapes, weights) -> float:
    return sum(
        w * Request(specs[i], shapes[i] if specs[i] is None else 1, 0, 0).gpu_equivalent
        for i, w in enumerate(weights)
    )


def stream(seed: int, agents: int, count: int | None) -> tuple[list[Request], int]:
    """A seeded stream at about :data:`LOAD` of the cluster's GPUs, and its warm-up length.

    It starts in the steady state of this load: as many requests as run at once on average
    arrive together at time 0 (run times are exponential, so what is left of each is too),
    then Poisson arrivals follow. The warm-up is that batch and the next half run time.
    ``count``: all requests (default: three times the batch).
    """
    rng = random.Random(seed)
    shapes, weights = zip(*SHAPES, strict=True)
    specs = [
        JobSpec.from_dict({"image": "busybox", "cpus": CPUS, "mem_mib": MEM, **s})
        if isinstance(s, dict) else None
        for s in shapes
    ]  # fmt: skip
    duration = 100.0
    concurrent = int(LOAD * agents * GPUS / _mean_size(specs, shapes, weights))
    count = count or 3 * concurrent
    rate = concurrent / duration  # Little: rate * run time = requests running at once
    now, out = 0.0, []
    for n, i in enumerate(rng.choices(range(len(shapes)), weights=weights, k=count)):
        now += 1e-9 if n < concurrent else rng.expovariate(rate)
        gpus = shapes[i] if specs[i] is None else 1
        out.append(Request(specs[i], gpus, now, rng.expovariate(1 / duration)))
    warm = min(count, concurrent + concurrent // 2)
    return out, warm


class Agent:
    """What ``choose_share`` reads of an offer slot, kept up to date as tasks come and go."""

    def __init__(self, index: int) -> None:
        self.agent_id = f"agent-{index:04d}"
        self.attributes: dict[str, str] = {}
        self.cpus, self.mem, self.disk = 64.0, 512 * 1024.0, 1 << 20
        self.gpu_mem = gpu_shares.mem_ranges(dict.fromkeys(range(GPUS), GPU_MIB))
        self.gpu_core = gpu_shares.core_ranges(range(GPUS))
        self.refresh()

    def refresh(self) -> None:
        self.free_mem = gpu_shares.amounts(self.gpu_mem)
        self.free_core = gpu_shares.amounts(self.gpu_core)
        self.whole = frozenset(
            i for i in range(GPUS)
            if self.free_mem.get(i) == GPU_MIB and self.free_core.get(i) == MILLI
        )  # fmt: skip

    def take(self, ranges: gpu_shares.GpuRanges, sign: int) -> None:
        if sign > 0:
            self.gpu_mem = gpu_shares.subtract(self.gpu_mem, ranges.mem)
            self.gpu_core = gpu_shares.subtract(self.gpu_core, ranges.core)
        else:
            self.gpu_mem = gpu_shares.normalise(self.gpu_mem + ranges.mem)
            self.gpu_core = gpu_shares.normalise(self.gpu_core + ranges.core)
        self.cpus -= sign * CPUS
        self.mem -= sign * MEM
        self.refresh()


def _fits(agent: Agent, index: int, mib: int, milli: int) -> bool:
    return (
        index in agent.free_core
        and agent.free_core[index] >= milli
        and (agent.free_mem.get(index, 0) >= mib)
    )


def place_share(policy: str, spec: JobSpec, agents: list[Agent]):
    """(agent, ranges taken) for a share, or None."""
    if policy == "dlc":
        choice = choose_share(spec, agents, CPUS, MEM, lambda _: None, lambda _: "V100")
        return None if isinstance(choice, str) else (choice.slot, choice.take)
    mib, milli = spec.share_memory_mib(GPU_MIB), spec.share_core_milli
    best, best_key = None, None
    for agent in agents:
        if agent.cpus < CPUS or agent.mem < MEM:
            continue
        for index in sorted(agent.free_core):
            if not _fits(agent, index, mib, milli):
                continue
            if policy == "first-fit":
                best = (agent, index)
                break
            key = (agent.free_mem[index] - mib, agent.free_core[index] - milli)
            if best_key is None or key < best_key:
                best, best_key = (agent, index), key
        if best is not None and policy == "first-fit":
            break
    if best is None:
        return None
    agent, index = best
    return agent, gpu_shares.share_take(index, mib, milli, agent.gpu_mem, agent.gpu_core)


def place_whole(policy: str, count: int, agents: list[Agent]):
    """(agent, ranges taken) for ``count`` whole GPUs, or None."""
    fitting = [a for a in agents if len(a.whole) >= count and a.cpus >= CPUS and a.mem >= MEM]
    if not fitting:
        return None
    if policy == "first-fit":
        agent, ids = fitting[0], sorted(fitting[0].whole)[:count]
    else:
        agent = min(fitting, key=lambda a: (len(a.whole), a.agent_id))
        if policy == "dlc":
            ids = allocate(DGX1, agent.whole, count, policy="tree")
        else:
            ids = sorted(agent.whole)[:count]
    return agent, gpu_shares.whole_gpu_take(ids, agent.gpu_mem, agent.gpu_core)


def run(policy: str, requests: list[Request], agents_count: int, warm: int) -> dict:
    """Play ``requests`` through ``policy``; the metrics of one run."""
    agents = [Agent(i) for i in range(agents_count)]
    ends: list[tuple[float, int, Agent, gpu_shares.GpuRanges]] = []
    share_s, whole_s, share_cpu, whole_cpu, whole_free, quads_free = [], [], [], [], [], []
    refused = {"share": 0, "whole": 0}
    asked = {"share": 0, "whole": 0}

    for n, req in enumerate(requests):
        while ends and ends[0][0] <= req.arrive:
            _, _, agent, ranges = heapq.heappop(ends)
            agent.take(ranges, -1)
        kind = "whole" if req.spec is None else "share"
        start, cpu = time.perf_counter(), time.process_time()
        if req.spec is None:
            placed = place_whole(policy, req.gpus, agents)
        else:
            placed = place_share(policy, req.spec, agents)
        (whole_cpu if req.spec is None else share_cpu).append(time.process_time() - cpu)
        (whole_s if req.spec is None else share_s).append(time.perf_counter() - start)
        if n < warm:
            if placed:
                placed[0].take(placed[1], +1)
                heapq.heappush(ends, (req.arrive + req.duration, n, *placed))
            continue
        asked[kind] += 1
        whole_free.append(sum(len(a.whole) for a in agents))
        quads_free.append(sum(all(g in a.whole for g in q) for a in agents for q in QUADS))
        if placed is None:
            refused[kind] += 1
            continue
        placed[0].take(placed[1], +1)
        heapq.heappush(ends, (req.arrive + req.duration, n, *placed))
    return {
        "share_decision_ms": _times(share_s),
        "whole_decision_ms": _times(whole_s),
        "share_decision_cpu_ms": _times(share_cpu),
        "whole_decision_cpu_ms": _times(whole_cpu),
        "whole_gpus_free_mean": statistics.fmean(whole_free),
        "nvlink_quads_free_mean": statistics.fmean(quads_free),
        "whole_refused_pct": 100.0 * refused["whole"] / max(1, asked["whole"]),
        "share_refused_pct": 100.0 * refused["share"] / max(1, asked["share"]),
        "asked": asked,
        "refused": refused,
    }


def _times(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds) or [0.0]
    return {"median": statistics.median(ms), "p95": ms[int(0.95 * (len(ms) - 1))]}


def summary(runs: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """Per policy: each metric's mean over seeds."""
    out = {}
    for policy, results in runs.items():
        out[policy] = {
            **{
                f"{kind}_{stat}": statistics.fmean(
                    r[f"{kind}_decision_{clock}"][stat.split("_")[-1]] for r in results
                )
                for kind in ("share", "whole")
                for clock, stat in (
                    ("cpu_ms", "cpu_ms_median"),
                    ("cpu_ms", "cpu_ms_p95"),
                    ("ms", "wall_ms_median"),
                )
            },
            **{
                key: statistics.fmean(r[key] for r in results)
                for key in (
                    "whole_gpus_free_mean",
                    "nvlink_quads_free_mean",
                    "whole_refused_pct",
                    "share_refused_pct",
                )
            },  # fmt: skip
        }
    return out


def print_table(summary_: dict, agents: int, requests: int, seeds: list[int]) -> None:
    table = Table(
        title=f"Share placement: {agents} agents x {GPUS} GPUs of 32 GiB, {requests} requests "
        f"a seed, seeds {', '.join(map(str, seeds))} (means over seeds, after the warm-up)"
    )
    for name in ("policy", "share decision CPU ms (median / p95)", "whole decision CPU ms",
                 "whole GPUs free", "NVLink quads free", "whole jobs refused",
                 "shares refused"):  # fmt: skip
        table.add_column(name, justify="left" if name == "policy" else "right")
    for policy, s in summary_.items():
        table.add_row(
            policy,
            f"{s['share_cpu_ms_median']:.2f} / {s['share_cpu_ms_p95']:.2f}",
            f"{s['whole_cpu_ms_median']:.2f}",
            f"{s['whole_gpus_free_mean']:.1f} of {agents * GPUS}",
            f"{s['nvlink_quads_free_mean']:.1f} of {agents * len(QUADS)}",
            f"{s['whole_refused_pct']:.1f} %",
            f"{s['share_refused_pct']:.1f} %",
        )
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument(
        "--requests", type=int, help="per seed [default: 3 x those running at once]"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    args = parser.parse_args(argv)
    runs: dict[str, list[dict]] = {p: [] for p in args.policies}
    for seed in args.seeds:
        requests, warm = stream(seed, args.agents, args.requests)
        for policy in args.policies:
            result = run(policy, requests, args.agents, warm)
            runs[policy].append(
                {"seed": seed, "requests": len(requests), "warm_up": warm, **result}
            )
    summary_ = summary(runs)
    print_table(summary_, args.agents, len(requests), args.seeds)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"agents": args.agents, "gpus_per_agent": GPUS, "gpu_mib": GPU_MIB,
            "requests": len(requests), "seeds": args.seeds, "load": LOAD,
            "python": platform.python_version(),
            "machine": platform.machine()}  # fmt: skip
    out.write_text(json.dumps({"meta": meta, "summary": summary_, "runs": runs}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
