"""Benchmark DLC's ``tree`` GPU allocator against its baselines on request streams.

Usage::

    .venv/bin/python bench/allocator.py [--from-file F ...] [--seed N] [--repeats R]
        [--jobs N] [--machines SUBSTR ...] [--json OUT]

Machines: every complete topology fixture in ``../shared/fixtures/topology`` (with
its ``topo -p2p`` matrix when there is one), every ``--from-file``, and the
machines of ``bench/topogen.py``, all read by DLC's real ``topo -m`` parser.
Streams (seeded): ``random-mix`` (1/2/4/8-GPU jobs, random arrivals and
departures), and the adversarial ``singles-then-pairs`` and ``odd-sizes`` (3s and
5s). See bench/README.md for the metrics' exact definitions.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import topogen  # noqa: E402  (sits beside this script)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from dlc.errors import AllocationError  # noqa: E402
from dlc.scheduler.allocator import get_policy  # noqa: E402
from dlc.scheduler.allocator.base import AllocationRequest  # noqa: E402
from dlc.scheduler.allocator.best_effort import BestEffortPolicy  # noqa: E402
from dlc.scheduler.allocator.cliques import best_threshold, iter_cliques  # noqa: E402
from dlc.scheduler.allocator.prepared import tables_for  # noqa: E402
from dlc.scheduler.allocator.tables import MachineTables  # noqa: E402
from dlc.topology.model import Topology  # noqa: E402
from dlc.topology.parse_topo import load_topology_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DIR = ROOT.parent / "shared" / "fixtures" / "topology"
DEFAULT_JSON = ROOT / "bench" / "results" / "allocator.json"
POLICIES = ("tree", "best-effort", "tkestack", "first-fit", "optimal")
#: best-effort partitions scored per decision before it is cut short (the Go code
#: has no limit; uncapped, one 2-of-16 decision scores 2 027 025 partitions)
BEST_EFFORT_MAX_PARTITIONS = 3000
#: search nodes for the "could a re-packing have avoided it" check
REPACK_BUDGET = 20_000
SIZE_WEIGHTS = ((1, 0.5), (2, 0.25), (4, 0.15), (8, 0.10))


@dataclass(frozen=True)
class Job:
    """One request of a stream."""

    size: int
    arrive: float
    duration: float


def load_machines(from_files: list[str], only: list[str]) -> dict[str, Topology]:
    """Fixtures, ``--from-file`` machines and generated ones, by name."""
    texts: dict[str, tuple[str, str | None]] = {}
    for path in sorted(FIXTURE_DIR.glob("*.txt")):
        if path.name.endswith((".p2p.txt", "_TRUNCATED.txt")):
            continue
        p2p = path.with_name(path.stem + ".p2p.txt")
        texts[path.stem] = (path.read_text(), p2p.read_text() if p2p.exists() else None)
    for name in from_files:
        texts[Path(name).stem] = (Path(name).read_text(), None)
    for name, make in topogen.MACHINES.items():
        texts[name] = (make(), None)
    return {
        name: load_topology_text(topo, p2p)
        for name, (topo, p2p) in texts.items()
        if not only or any(o in name for o in only)
    }


def make_streams(gpus: int, seed: int, jobs: int) -> dict[str, list[Job]]:
    """The seeded request streams for a machine of ``gpus`` GPUs."""
    rng = random.Random(seed * 1000 + gpus)
    streams = {"random-mix": _random_stream(rng, gpus, jobs, SIZE_WEIGHTS)}
    if gpus >= 4:
        streams["singles-then-pairs"] = _singles_then_pairs(rng, gpus, max(4, jobs // gpus))
    if gpus >= 5:
        streams["odd-sizes"] = _random_stream(rng, gpus, jobs // 2, ((3, 0.6), (5, 0.4)))
    return streams


def _random_stream(rng: random.Random, gpus: int, count: int, weights) -> list[Job]:
    sizes = [min(s, gpus) for s, _ in weights]
    mean_size = sum(min(s, gpus) * w for s, w in weights)
    mean_duration = 0.9 * gpus / mean_size  # arrivals at rate 1: ~90% offered load
    t, out = 0.0, []
    for _ in range(count):
        t += rng.expovariate(1.0)
        size = rng.choices(sizes, [w for _, w in weights])[0]
        out.append(Job(size, t, rng.expovariate(1 / mean_duration)))
    return out


def _singles_then_pairs(rng: random.Random, gpus: int, episodes: int) -> list[Job]:
    """Per episode, from an empty machine: singles first, then two waves of pairs.

    Singles run 10 to 60 time units, so some leave before the second wave of pairs
    at +25 and leave holes for it; every job has left before the next episode.
    """
    out = []
    for e in range(episodes):
        t0 = 100.0 * e
        for i in range(rng.randint(max(1, gpus // 4), gpus // 2)):
            out.append(Job(1, t0 + 0.01 * i, rng.uniform(10, 60)))
        for j in range(gpus // 2):
            out.append(Job(2, t0 + 1 + 0.01 * j, 50 + rng.random()))
        for j in range(max(1, gpus // 4)):
            out.append(Job(2, t0 + 25 + 0.01 * j, 30 + rng.random()))
    return out


class Reference:
    """Per-machine facts every policy's decision is measured against (cached)."""

    def __init__(self, topo: Topology, tables: MachineTables):
        self.topo, self.tables = topo, tables
        self.full = (1 << len(tables.indices)) - 1
        self._optimal: dict[tuple[int, int], int] = {}
        self._empty: dict[int, int] = {}

    def optimal_milli(self, free: int, size: int) -> int:
        key = (free, size)
        if key not in self._optimal:
            chosen = get_policy("optimal").allocate(
                self.topo, frozenset(self.tables.gpus_of(free)), AllocationRequest(size)
            )
            self._optimal[key] = self.tables.set_milli_gbps(self.tables.mask_of(set(chosen)))
        return self._optimal[key]

    def empty_best(self, size: int) -> int:
        if size not in self._empty:
            self._empty[size] = best_threshold(self.tables, self.full, 0, size)
        return self._empty[size]


def simulate(policy, ref: Reference, jobs: list[Job]) -> dict:
    """Run one stream through one policy; return its raw metrics."""
    tables = ref.tables
    free = ref.full
    running: list[tuple[float, int, int, int]] = []  # (end, tiebreak, mask, rank)
    m = {"decisions": 0, "multi": 0, "best_link": 0, "score_pct": [], "fragmented": 0}
    m |= {"avoidable": 0, "avoid_unknown": 0, "cross_socket": 0, "failed": 0, "refused_full": 0}
    times: list[float] = []
    for n, job in enumerate(jobs):
        while running and running[0][0] <= job.arrive:
            free |= heapq.heappop(running)[2]
        if job.size > free.bit_count():
            m["refused_full"] += 1
            continue
        chosen, elapsed = _decide(policy, ref, free, job.size)
        times.append(elapsed)
        m["decisions"] += 1
        if job.size >= 2:
            _score_multi(m, ref, free, job.size, chosen, running)
        if chosen is None:
            m["failed"] += 1
            continue
        free &= ~chosen
        heapq.heappush(running, (job.arrive + job.duration, n, chosen, tables.set_rank(chosen)))
    m["times"] = times
    m["p50_ms"], m["p99_ms"] = percentile_ms(times, 0.5), percentile_ms(times, 0.99)
    return m


def percentile_ms(times: list[float], q: float) -> float | None:
    """The ``q`` quantile of decision times (seconds), in milliseconds."""
    if not times:
        return None
    ordered = sorted(times)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _decide(policy, ref: Reference, free: int, size: int) -> tuple[int | None, float]:
    """The policy's choice (``None`` when it refused) and its decision time.

    The time is the CPU time of this thread during one call (``time.thread_time``):
    other processes share this machine's cores, and CPU time does not count their
    preemptions. Caches stay as a running scheduler would have them.
    """
    gpus, request = frozenset(ref.tables.gpus_of(free)), AllocationRequest(size)
    start = time.thread_time()
    try:
        chosen = ref.tables.mask_of(set(policy.allocate(ref.topo, gpus, request)))
    except AllocationError:
        chosen = None
    return chosen, time.thread_time() - start


def _score_multi(m: dict, ref: Reference, free: int, size: int, chosen, running) -> None:
    tables = ref.tables
    m["multi"] += 1
    empty_best = ref.empty_best(size)
    if chosen is not None:
        rank = tables.set_rank(chosen)
        m["best_link"] += rank >= best_threshold(tables, free, 0, size)
        m["score_pct"].append(100 * tables.set_milli_gbps(chosen) / ref.optimal_milli(free, size))
        m["cross_socket"] += sum(1 for mask in tables.numa_masks if mask & chosen) > 1
    else:
        m["score_pct"].append(0.0)
    if chosen is None or tables.set_rank(chosen) < empty_best:
        m["fragmented"] += 1
        jobs = [(r[2].bit_count(), r[3]) for r in running]
        verdict = repack_possible(tables, jobs, size, empty_best)
        m["avoidable"] += verdict is True
        m["avoid_unknown"] += verdict is None


def repack_possible(tables: MachineTables, running, size: int, want: int) -> bool | None:
    """Could the running jobs be re-placed so the new one gets class ``want``?

    Every running multi-GPU job must keep a set at least as fast as its current one;
    single-GPU jobs need any GPU. ``None`` when the search budget runs out.
    """
    multi = sorted(((s, r) for s, r in running if s >= 2), reverse=True)
    singles = sum(1 for s, _ in running if s == 1)
    demands = [(size, want), *multi]
    budget = [REPACK_BUDGET]

    def place(i: int, avail: int) -> bool:
        if i == len(demands):
            return avail.bit_count() >= singles
        need, rank = demands[i]
        adjacency = tables.adjacency[rank]
        for clique in iter_cliques(adjacency, avail, need):
            budget[0] -= 1
            if budget[0] < 0:
                raise TimeoutError
            if place(i + 1, avail & ~clique):
                return True
        return False

    try:
        return place(0, (1 << len(tables.indices)) - 1)
    except TimeoutError:
        return None


def summarize(raw: dict) -> dict:
    """JSON-ready figures of one (machine, stream, policy) run."""
    multi = raw["multi"]
    return {
        "decisions": raw["decisions"],
        "multi_gpu_decisions": multi,
        "best_link_share": raw["best_link"] / multi if multi else None,
        "score_vs_optimal_pct": statistics.fmean(raw["score_pct"]) if raw["score_pct"] else None,
        "fragmented": raw["fragmented"],
        "fragmented_avoidable": raw["avoidable"],
        "fragmented_unknown": raw["avoid_unknown"],
        "cross_socket_share": raw["cross_socket"] / multi if multi else None,
        "failed": raw["failed"],
        "refused_full": raw["refused_full"],
        "p50_ms": raw["p50_ms"],
        "p99_ms": raw["p99_ms"],
    }


def run(
    machines: dict[str, Topology], seeds: range, jobs: int, console: Console
) -> tuple[list[dict], list[dict]]:
    """Every policy on every machine, stream and seed.

    Returns:
        One row per (machine, seed, stream, policy), and per (machine, policy) the
        decision-time percentiles over all its streams and seeds.
    """
    rows: list[dict] = []
    timing: list[dict] = []
    for name, topo in machines.items():
        build = time.perf_counter()
        tables = tables_for(topo)
        build_ms = 1000 * (time.perf_counter() - build)
        ref = Reference(topo, tables)
        pooled: dict[str, list[float]] = {p: [] for p in POLICIES}
        for seed in seeds:
            for stream, stream_jobs in make_streams(len(topo.gpus), seed, jobs).items():
                for policy_name in POLICIES:
                    policy = _policy(policy_name)
                    raw = simulate(policy, ref, stream_jobs)
                    pooled[policy_name].extend(raw["times"])
                    row = summarize(raw)
                    row |= {"machine": name, "gpus": len(topo.gpus), "stream": stream}
                    row |= {"seed": seed, "policy": policy_name, "tables_build_ms": build_ms}
                    row["capped"] = getattr(policy, "capped", 0)
                    rows.append(row)
        for policy_name, times in pooled.items():
            timing.append(
                {"machine": name, "gpus": len(topo.gpus), "policy": policy_name}
                | {"decisions": len(times), "p50_ms": percentile_ms(times, 0.5)}
                | {"p99_ms": percentile_ms(times, 0.99), "max_ms": percentile_ms(times, 1.0)}
            )
        console.log(f"{name}: {len(topo.gpus)} GPUs done")
    return rows, timing


def _aggregate(rows: list[dict], keep) -> dict[tuple[str, str], dict]:
    """Sum the rows that pass ``keep`` per (machine, policy)."""
    out: dict[tuple[str, str], dict] = {}
    for row in rows:
        if not keep(row):
            continue
        agg = out.setdefault(
            (row["machine"], row["policy"]),
            {"gpus": row["gpus"], "multi": 0, "best": 0.0, "score": 0.0, "frag": 0, "avoid": 0}
            | {"unknown": 0, "cross": 0.0, "failed": 0, "capped": 0},
        )
        multi = row["multi_gpu_decisions"]
        agg["multi"] += multi
        if multi:
            agg["best"] += row["best_link_share"] * multi
            agg["score"] += row["score_vs_optimal_pct"] * multi
            agg["cross"] += row["cross_socket_share"] * multi
        agg["frag"] += row["fragmented"]
        agg["avoid"] += row["fragmented_avoidable"]
        agg["unknown"] += row["fragmented_unknown"]
        agg["failed"] += row["failed"]
        agg["capped"] += row["capped"]
    return out


def check_targets(rows: list[dict], timing: list[dict]) -> list[dict]:
    """The issue's targets for ``tree``, each with its figure and whether it is met."""
    every = _aggregate(rows, lambda r: True)
    adversarial = _aggregate(rows, lambda r: r["stream"] != "random-mix")
    machines = sorted({m for m, _ in every})
    out = []
    shares = {
        m: every[m, "tree"]["best"] / every[m, "tree"]["multi"]
        for m in machines
        if every[m, "tree"]["multi"]
    }
    worst = min(shares, key=shares.get)
    out.append(
        _target(
            "slowest link best achievable >= 99.5% on every machine",
            shares[worst] >= 0.995,
            f"worst {worst}: {100 * shares[worst]:.2f}%",
        )
    )
    multi = sum(every[m, "tree"]["multi"] for m in machines)
    score = sum(every[m, "tree"]["score"] for m in machines) / multi
    out.append(_target("summed score >= 98% of optimal on average", score >= 98, f"{score:.2f}%"))
    worse = [m for m in machines if every[m, "tree"]["frag"] > every[m, "best-effort"]["frag"]]
    out.append(
        _target(
            "fragmentation never worse than best-effort on any machine",
            not worse,
            f"worse on: {worse or 'none'}",
        )
    )
    tree_adv = sum(a["frag"] for (m, p), a in adversarial.items() if p == "tree")
    be_adv = sum(a["frag"] for (m, p), a in adversarial.items() if p == "best-effort")
    cut = 1 - tree_adv / be_adv if be_adv else 0.0
    out.append(
        _target(
            "fragmentation >= 30% lower than best-effort over adversarial streams",
            cut >= 0.30,
            f"tree {tree_adv} vs best-effort {be_adv} ({100 * cut:.0f}% lower)",
        )
    )
    tree_times = [t for t in timing if t["policy"] == "tree" and t["decisions"]]
    slow = [
        f"{t['machine']} {t['p99_ms']:.2f} ms"
        for t in tree_times
        if t["p99_ms"] > (1.0 if t["gpus"] <= 8 else 5.0)
    ]
    worst8 = max((t["p99_ms"] for t in tree_times if t["gpus"] <= 8), default=0.0)
    worst16 = max((t["p99_ms"] for t in tree_times if t["gpus"] > 8), default=0.0)
    out.append(
        _target(
            "decision p99 <= 1 ms (8 GPUs) / 5 ms (16 GPUs)",
            not slow,
            f"worst p99 {worst8:.3f} ms (<= 8 GPUs), {worst16:.3f} ms (16); over: {slow or 'none'}",
        )
    )
    return out


def _target(text: str, met: bool, detail: str) -> dict:
    return {"target": text, "met": bool(met), "detail": detail}


def print_tables(
    console: Console, rows: list[dict], timing: list[dict], targets: list[dict]
) -> None:
    """Per machine and policy (all streams), adversarial fragmentation, targets."""
    times = {(t["machine"], t["policy"]): t for t in timing}
    table = Table(title="GPU allocation: all streams per machine and policy")
    for col in (
        "machine",
        "policy",
        "multi",
        "best link %",
        "score % opt",
        "frag (avoid.)",
        "x-socket %",
        "failed",
        "p50 ms",
        "p99 ms",
    ):
        table.add_column(col, justify="left" if col in ("machine", "policy") else "right")
    for (machine, policy), a in _aggregate(rows, lambda r: True).items():
        multi = a["multi"]

        def pct(value: float, multi: int = multi) -> str:
            return f"{100 * value / multi:.1f}" if multi else "-"

        table.add_row(
            machine if policy == POLICIES[0] else "",
            policy,
            str(multi),
            pct(a["best"]),
            f"{a['score'] / multi:.1f}" if multi else "-",
            f"{a['frag']} ({a['avoid']}{'+' + str(a['unknown']) + '?' if a['unknown'] else ''})",
            pct(a["cross"]),
            str(a["failed"]) + (f" cap{a['capped']}" if a["capped"] else ""),
            _ms(times[machine, policy]["p50_ms"]),
            _ms(times[machine, policy]["p99_ms"]),
            end_section=policy == POLICIES[-1],
        )
    console.print(table)
    adv = Table(title="Adversarial streams (singles-then-pairs, odd-sizes), all machines")
    for col in ("policy", "multi", "fragmented", "avoidable", "failed"):
        adv.add_column(col, justify="right")
    for policy in POLICIES:
        aggs = [
            a
            for (m, p), a in _aggregate(rows, lambda r: r["stream"] != "random-mix").items()
            if p == policy
        ]
        adv.add_row(
            policy, *(str(sum(a[k] for a in aggs)) for k in ("multi", "frag", "avoid", "failed"))
        )
    console.print(adv)
    tgt = Table(title="Targets for tree")
    for col in ("target", "met", "figure"):
        tgt.add_column(col)
    for t in targets:
        tgt.add_row(t["target"], "yes" if t["met"] else "NO", t["detail"])
    console.print(tgt)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _policy(name: str):
    if name == "best-effort":
        return BestEffortPolicy(max_partitions=BEST_EFFORT_MAX_PARTITIONS)
    return get_policy(name)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-file", action="append", default=[], metavar="F")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--repeats", type=int, default=5, help="seeds seed..seed+repeats-1")
    parser.add_argument("--jobs", type=int, default=240, help="jobs per random stream")
    parser.add_argument("--machines", nargs="*", default=[], help="only names containing these")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument(
        "--no-fail", action="store_true",
        help="exit 0 even when a target is missed (exploring; CI and `make bench` fail then)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    console = Console(width=200)
    machines = load_machines(args.from_file, args.machines)
    started = time.perf_counter()
    rows, timing = run(machines, range(args.seed, args.seed + args.repeats), args.jobs, console)
    targets = check_targets(rows, timing)
    print_tables(console, rows, timing, targets)
    meta = {
        "seeds": [args.seed, args.seed + args.repeats - 1],
        "jobs": args.jobs,
        "policies": list(POLICIES),
        "best_effort_max_partitions": BEST_EFFORT_MAX_PARTITIONS,
        "repack_budget": REPACK_BUDGET,
        "machines": sorted(machines),
        "python": platform.python_version(),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"meta": meta, "results": rows, "decision_times": timing, "targets": targets},
            indent=1,
        )
    )
    console.print(f"wrote {args.json}")
    return missed_exit(targets, args.no_fail)


def missed_exit(targets: list[dict], no_fail: bool) -> int:
    """1 when a target is missed (each named on stderr), unless ``no_fail``; else 0."""
    missed = [t for t in targets if not t["met"]]
    for t in missed:
        print(f"target missed: {t['target']} ({t['detail']})", file=sys.stderr)
    return 1 if missed and not no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
