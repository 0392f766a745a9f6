"""The scheduler core at openb scale: offer-round time, submit latency and memory (issue 26).

The openb inventory (1,213 GPU agents as simulated Mesos agents, as ``bench/sim_scale.py``
builds them), 10,000 queued openb pods and 20,000 finished jobs in a SQLite store::

    .venv/bin/python bench/core_scale.py --json bench/results/core_scale.json
    .venv/bin/python bench/core_scale.py --quick --no-fail      # a small version (seconds)

Measures, with the CPU time of the deciding thread (``time.thread_time``, so the other
processes on a shared machine do not count):

* ``first_round_ms``: the first offer round of a busy cluster (another framework's tasks hold
  every GPU but part of one per agent, and half the CPUs and memory): the whole queue gets
  its first waiting reasons;
* ``round_ms_p50`` / ``round_ms_p99``: steady rounds; between two rounds 2% of the running
  tasks (DLC's and the others') finish and as many new pods are submitted, and every agent
  with anything free offers;
* ``empty_round_ms``: a round with nothing queued (median of a few; the simulated master
  offers every agent again after each, where a Mesos master stops offering once the round
  has suppressed offers: ``first_empty_round_ms`` is the one it sends, which here also
  forgets the jobs that the kill of the whole queue just before it took out);

and wall-clock submit latency through :meth:`SchedulerCore.submit` (SQLite included):
``submit_p99_ms`` and ``submits_per_s`` for 500 users submitting at once, and
``even_submit_p99_ms`` for submits arriving at an even rate (full mode: the issue's 500/s for
60 s) while offer rounds run once a second on another thread. ``rss_mib``
is the process's peak resident memory (the simulated master and the trace included).

Prints a table and exits 1 when a target is missed (``--no-fail``: always 0). ``--before
F`` copies F's figures into the JSON as ``before`` (run this script on an older checkout
for them).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dlc.app.interpreter import DEFAULT_SWITCH_INTERVAL_S, tune_interpreter  # noqa: E402
from dlc.mesos.codec import MesosCodec  # noqa: E402
from dlc.mesos.resources import Resources  # noqa: E402
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore  # noqa: E402
from dlc.scheduler.jobs.job import Job, JobState  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.scheduler.placement.round_cap import DEFAULT_JOBS_PER_ROUND  # noqa: E402
from dlc.sim import io  # noqa: E402
from dlc.sim.cluster_sim.master import SimMaster, SimTask  # noqa: E402
from dlc.sim.cluster_sim.openb import DEFAULT_GPU_MIB, GPU_MIB, agent_of, spec_of  # noqa: E402
from dlc.sim.workload import arrival_sequence  # noqa: E402
from dlc.store.sqlite import JobStore  # noqa: E402
from dlc.topology import gpu_shares  # noqa: E402

#: (measure, limit, how it compares): the issue's targets
TARGETS = [
    ("round_ms_p50", 100.0, "<="),
    ("round_ms_p99", 250.0, "<="),
    ("first_round_ms", 1000.0, "<="),
    ("empty_round_ms", 10.0, "<="),
    ("rss_mib", 200.0, "<="),
    ("submit_p99_ms", 1000.0, "<="),
    ("even_submit_p99_ms", 200.0, "<="),
]


class Sizes:
    """How big a run is (``--quick``: a few seconds)."""

    def __init__(self, quick: bool):
        self.agents = 120 if quick else None  # None: every openb node
        self.queued = 600 if quick else 10_000
        self.finished = 1_000 if quick else 20_000
        self.steady_rounds = 5 if quick else 20
        self.empty_rounds = 3 if quick else 7
        self.burst = 50 if quick else 500
        # the target: 500 submits/s arriving evenly for 60 s, p99 <= 200 ms
        self.even_rate = 50.0 if quick else 500.0
        self.even_s = 1.0 if quick else 60.0


class HeldLock:
    """The job book's lock, timed: how long the offer-round thread holds it per round (the
    outermost hold, wall and CPU ms), the time a submit waits for it is the other side."""

    def __init__(self, lock):
        self._lock = lock
        self._depth = 0
        self._since = (0.0, 0.0)
        self.held: list[tuple[float, float]] = []
        self.rounds = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        t0 = time.perf_counter()
        got = self._lock.acquire(blocking, timeout)
        # a submit's thread: how long it waited for the lock, summed (``waited``)
        self.rounds.waited = getattr(self.rounds, "waited", 0.0) + time.perf_counter() - t0
        if got and getattr(self.rounds, "on", False):
            self._depth += 1
            if self._depth == 1:
                self._since = (time.perf_counter(), time.thread_time())
        return got

    def release(self) -> None:
        if getattr(self.rounds, "on", False):
            self._depth -= 1
            if self._depth == 0:
                wall, cpu = self._since
                self.held.append((1000 * (time.perf_counter() - wall),
                                  1000 * (time.thread_time() - cpu)))  # fmt: skip
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


class CollectorClock:
    """The cyclic collector's CPU time (``gc.callbacks``), split by where it ran: inside an
    offer round on the round's thread (``on_offers``, what the round figures include) or
    anywhere else in the process (the simulated master building 1,213 offers, which stands in
    for the adapter decoding them; launches, status updates, submits). A collection holds the
    GIL throughout, so its start and stop come in pairs on one thread."""

    def __init__(self) -> None:
        self.round_thread: int | None = None  # the thread inside ``on_offers``, if any
        self.inside = [0.0, 0, 0, 0]  # ms, then collections of each generation
        self.outside = [0.0, 0, 0, 0]
        self._start = (0.0, False)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = (time.thread_time(), threading.get_ident() == self.round_thread)
            return
        began, inside = self._start
        into = self.inside if inside else self.outside
        into[0] += 1000 * (time.thread_time() - began)
        into[1 + info["generation"]] += 1

    def take(self) -> tuple[list, list]:
        """``(inside, outside)`` since the last take: ``[ms, young, middle, full]`` each."""
        taken = (self.inside, self.outside)
        self.inside, self.outside = [0.0, 0, 0, 0], [0.0, 0, 0, 0]
        return taken


class Bench:
    """One run: the store, the core, the simulated master, and the pods still to submit."""

    def __init__(
        self, sizes: Sizes, seed: int, trace: str, trace_dir: str | None, db: Path,
        jobs_per_round: int | None = DEFAULT_JOBS_PER_ROUND,
    ):  # fmt: skip
        root = io.trace_root(trace_dir)
        nodes = io.load_nodes(root)
        if sizes.agents is not None:
            nodes = nodes[: sizes.agents]
        self.master = SimMaster([agent_of(n) for n in nodes])
        total_milli = sum(n.gpus for n in nodes) * 1000
        rng = np.random.default_rng(seed)
        pods = arrival_sequence(io.load_pods(root, trace), total_milli, 0.0, rng)  # shuffled
        self.specs = [spec_of(p) for p in pods]  # CPU-only pods as CPU-only jobs
        self.rng = random.Random(seed)
        self.total_milli = total_milli
        self.now = 1_000_000.0
        self.store = JobStore(db, clock=self.clock)
        self._seed_store(sizes)
        config = CoreConfig(
            placement=PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0),
            max_queued_per_user=None,
            max_jobs_per_round=jobs_per_round,
        )
        started = time.perf_counter()
        self.core = SchedulerCore(
            self.store,
            config,
            resolver=lambda spec: (spec.image, None),
            clock=self.clock,
            codec=MesosCodec(),
        )
        self.core.update_agents(self.master.slaves())
        self.load_s = time.perf_counter() - started
        self.book_lock = HeldLock(self.core.state.book.lock)  # timed, not changed
        self.core.state.book.lock = self.book_lock
        gc.freeze()  # as the scheduler service does once its core has loaded (dlc/app/service.py)
        self._occupy({n.name: n for n in nodes})
        self.users = [f"u{i:03d}" for i in range(500)]

    def clock(self) -> float:
        return self.now

    def _occupy(self, nodes: dict) -> None:
        """Make the cluster busy, as it is when 10,000 jobs queue: on every agent another
        framework's tasks hold half the CPUs and memory, every GPU but the last, and a random
        part of the last one. Churn ends some of these as it ends DLC's tasks."""
        for agent_id, node in nodes.items():
            if not node.gpus:
                continue
            mib = GPU_MIB.get(node.model, DEFAULT_GPU_MIB)
            last = node.gpus - 1
            part = self.rng.randrange(0, 1000)
            parts = [(i, 1000) for i in range(last)] + ([(last, part)] if part else [])
            for n, (gpu, milli) in enumerate(parts):
                base = gpu * gpu_shares.STRIDE
                text = (f"gpu_mem:[{base}-{base + mib * milli // 1000 - 1}];"
                        f"gpu_core:[{base}-{base + milli - 1}]")  # fmt: skip
                if milli == 1000:
                    text += f";gpus:1;gpu_ids:{{{gpu}}}"
                if n == 0:
                    text += f";cpus:{node.cpu_milli / 2000:g};mem:{node.memory_mib // 2}"
                need = Resources.parse(text)
                task_id = f"other-{agent_id}-{gpu}"
                self.master.free[agent_id] = self.master.free[agent_id] - need
                self.master.tasks[task_id] = SimTask(
                    task_id, agent_id, need, (gpu,) if milli == 1000 else (),
                    {gpu: mib * milli // 1000},
                )  # fmt: skip

    def spec(self):
        return self.rng.choice(self.specs)

    def _seed_store(self, sizes: Sizes) -> None:
        """20,000 finished jobs and 10,000 queued pods, written in one transaction."""
        with self.store._tx("seeding the benchmark"):  # noqa: SLF001 - one bulk write
            for n in range(sizes.finished):
                job = Job(f"f{n:06d}", f"u{n % 500:03d}", self.spec(), state=JobState.FINISHED,
                          submitted_at=self.now - 86_400 + n, message="finished")  # fmt: skip
                self.store.add_job(job)
            for n in range(sizes.queued):
                job = Job(f"q{n:06d}", f"u{n % 500:03d}", self.specs[n % len(self.specs)],
                          submitted_at=self.now - sizes.queued + n)  # fmt: skip
                self.store.add_job(job)

    # -- rounds ---------------------------------------------------------------

    #: a cProfile.Profile that records the offer rounds only (``--profile``)
    profiler = None
    #: a SHA-256 over the steady rounds' TaskInfos and declines (``--digest``), and the
    #: fresh ids of submitted jobs in submit order (random ids, named by order for it)
    digest = None
    fresh: dict[str, str] = {}
    #: per round: the job book's lock held by the round, (wall ms, CPU ms) summed
    lock_held: list[tuple[float, float]] = []
    #: the collector's time inside the offer rounds and elsewhere (set by :func:`run`)
    collector: CollectorClock | None = None

    def round(self) -> float:
        """One offer round of every agent with anything free; returns its CPU ms."""
        self.now += 1.0
        offers = self.master.offers()
        if self.profiler is not None:
            self.profiler.enable()
        t0 = time.thread_time()
        holds = len(self.book_lock.held)
        self.book_lock.rounds.on = True
        if self.collector is not None:
            self.collector.round_thread = threading.get_ident()
        try:
            actions = self.core.on_offers(offers)
        finally:
            self.book_lock.rounds.on = False
            if self.collector is not None:
                self.collector.round_thread = None
        cpu_ms = 1000 * (time.thread_time() - t0)
        mine = self.book_lock.held[holds:]  # the round's holds, summed
        self.lock_held.append((sum(w for w, _ in mine), sum(c for _, c in mine)))
        self.launches = sum(len(infos) for _, infos in actions.accepts)
        if self.digest is not None:
            text = json.dumps([actions.accepts, sorted(actions.declines)], sort_keys=True)
            text = re.sub(r"j[0-9a-f]{8}", lambda m: self.fresh.get(m[0], m[0]), text)
            self.digest.update(text.encode())
        if self.profiler is not None:
            self.profiler.disable()
        for offer_ids, infos in actions.accepts:
            for info, (task, _) in zip(infos, self.master.launch(offer_ids, infos), strict=True):
                state = "TASK_RUNNING" if task is not None else "TASK_ERROR"
                self._status(info["task_id"]["value"], info["agent_id"]["value"], state)
        return cpu_ms

    def _status(self, task_id: str, agent_id: str, state: str) -> None:
        self.core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": agent_id},
                             "state": state, "source": "SOURCE_EXECUTOR"})  # fmt: skip

    def churn(self, fraction: float) -> None:
        """End ``fraction`` of the running tasks and submit as many new pods."""
        tasks = sorted(self.master.tasks.values(), key=lambda t: t.task_id)
        ending = self.rng.sample(tasks, int(len(tasks) * fraction))
        for task in ending:
            self.master.release(task.task_id)
            if not task.task_id.startswith("other-"):
                self._status(task.task_id, task.agent_id, "TASK_FINISHED")
        for _ in ending:
            job = self.core.submit(self.rng.choice(self.users), self.spec(), admin=True)
            self.fresh[job.job_id] = f"s{len(self.fresh):06d}"

    # -- submits --------------------------------------------------------------

    def burst(self, n: int) -> tuple[list[float], float, int]:
        """``n`` users submit at once; latencies (ms), wall seconds, errors."""
        gate = threading.Barrier(n + 1)
        latencies: list[float] = []
        errors = []
        specs = [self.spec() for _ in range(n)]

        def one(i: int) -> None:
            gate.wait()
            t0 = time.perf_counter()
            try:
                self.core.submit(self.users[i % len(self.users)], specs[i])
            except Exception as exc:  # noqa: BLE001 - counted, reported
                errors.append(exc)
            latencies.append(1000 * (time.perf_counter() - t0))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        gate.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        return latencies, time.perf_counter() - t0, len(errors)

    def even(self, rate: float, seconds: float) -> tuple[list[float], int]:
        """Submits arriving at ``rate`` per second for ``seconds`` (open loop: latency counts
        from the planned arrival, so a backlog shows)."""
        count = int(rate * seconds)
        specs = [self.spec() for _ in range(count)]
        latencies: list[float] = []
        errors = []
        start = time.perf_counter() + 0.05

        lock = self.book_lock.rounds
        #: per submit: (due, began, ended, book-lock wait s); rounds: (began, ended)
        self.even_submits: list[tuple[float, float, float, float]] = []
        self.even_spans: list[tuple[float, float]] = []

        def one(i: int) -> None:
            due = start + i / rate
            began = time.perf_counter()
            lock.waited = 0.0
            try:
                self.core.submit(self.users[i % len(self.users)], specs[i])
            except Exception as exc:  # noqa: BLE001 - counted, reported
                errors.append(exc)
            ended = time.perf_counter()
            latencies.append(1000 * (ended - due))
            self.even_submits.append((due, began, ended, lock.waited))

        # offer rounds go on meanwhile, one a second (Mesos's allocation interval), on
        # another thread: a submit waits for a round that holds the core's lock
        stop = threading.Event()
        self.even_rounds: list[float] = []

        def rounds() -> None:
            while not stop.wait(1.0):
                began = time.perf_counter()
                self.even_rounds.append(self.round())
                self.even_spans.append((began, time.perf_counter()))

        ticker = threading.Thread(target=rounds, name="offer-rounds")
        ticker.start()
        try:
            with ThreadPoolExecutor(64) as pool:
                for i in range(count):
                    delay = start + i / rate - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    pool.submit(one, i)
        finally:
            stop.set()
            ticker.join()
        return latencies, len(errors)


def even_breakdown(bench: Bench) -> dict:
    """Where the even-rate submits slower than their p99 spent their time: waiting for a
    pool thread to start them (``dispatch``: the GIL and the thread pool), inside
    ``submit`` waiting for the job book's lock, and the rest of ``submit`` (the store write
    and its turn for it); and how many of them overlapped an offer round."""
    subs = bench.even_submits
    if not subs:
        return {}
    cut = _p([1000 * (e - d) for d, _, e, _ in subs], 99)
    slow = [x for x in subs if 1000 * (x[2] - x[0]) >= cut]
    spans = bench.even_spans
    in_round = sum(any(b < e2 and b2 < e for b2, e2 in spans) for _, b, e, _ in slow)
    return {
        "even_slow": len(slow),
        "even_slow_dispatch_ms": statistics.mean(1000 * (b - d) for d, b, _, _ in slow),
        "even_slow_lock_wait_ms": statistics.mean(1000 * w for *_, w in slow),
        "even_slow_submit_ms": statistics.mean(1000 * (e - b - w) for _, b, e, w in slow),
        "even_slow_in_round": in_round / len(slow),
        "even_all_dispatch_p99_ms": _p([1000 * (b - d) for d, b, _, _ in subs], 99),
        "even_all_submit_p99_ms": _p([1000 * (e - b) for _, b, e, _ in subs], 99),
    }


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _machine() -> str:
    """The CPU the figures came from: thread CPU time moves by 2-3 times between the CPU kinds
    this 2-core machine has been given, so a figure is only comparable on the same one."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the platform's word for the processor below
        text = ""
    for line in text.splitlines():  # the first CPU's lines
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    fields.setdefault("model name", platform.processor() or "?")
    cpu = f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')} model "
    cpu += f"{fields.get('model', '?')})"
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace, profiler=None) -> dict:
    sizes = Sizes(args.quick)
    with tempfile.TemporaryDirectory(prefix="core-scale-") as tmp:
        started = time.perf_counter()
        cap = None if args.jobs_per_round == 0 else args.jobs_per_round
        bench = Bench(sizes, args.seed, args.trace, args.trace_dir, Path(tmp) / "dlc.db", cap)
        bench.profiler = profiler
        setup_s = time.perf_counter() - started
        _say(f"set up in {setup_s:.1f} s; first round")
        bench.collector = clock = CollectorClock()
        gc.callbacks.append(clock)
        try:
            return _rounds(args, sizes, bench, setup_s)
        finally:
            gc.callbacks.remove(clock)
            bench.store.close()


def _gc(taken: list, rounds: int) -> tuple[float, float]:
    """``(ms, collections)`` per round of one side of :meth:`CollectorClock.take`."""
    return taken[0] / max(rounds, 1), sum(taken[1:]) / max(rounds, 1)


def _rounds(args: argparse.Namespace, sizes: Sizes, bench: Bench, setup_s: float) -> dict:
    """The measured part of :func:`run`: rounds, submits and empty rounds."""
    first = bench.round()
    first_launches = bench.launches
    first_gc = _gc(bench.collector.take()[0], 1)
    _say(f"first round {first:.0f} ms CPU; {sizes.steady_rounds} steady rounds")
    steady, steady_launches = [], 0
    bench.lock_held = []
    bench.digest = hashlib.sha256() if args.digest else None
    for _ in range(sizes.steady_rounds):
        bench.churn(0.02)
        steady.append(bench.round())
        steady_launches += bench.launches
    gc_in, gc_out = bench.collector.take()  # the steady rounds, and the cycles around them
    steady_gc, steady_gc_out = _gc(gc_in, sizes.steady_rounds), _gc(gc_out, sizes.steady_rounds)
    if bench.digest is not None:
        Path(args.digest).write_text(bench.digest.hexdigest() + "\n")
        bench.digest = None
    queued_after = len(bench.core.queued_jobs())
    held = bench.lock_held  # per steady round, its holds summed
    lock_wall = [w for w, _ in held]
    lock_cpu = [c for _, c in held]
    _say(f"steady p50 {_p(steady, 50):.0f} ms CPU; {sizes.burst} submits at once")
    burst_ms, burst_s, burst_errors = bench.burst(sizes.burst)
    _say(f"{sizes.even_rate:g}/s submits for {sizes.even_s:g} s")
    bench.collector.take()
    even_ms, even_errors = bench.even(sizes.even_rate, sizes.even_s)
    even_gc = _gc(bench.collector.take()[0], len(bench.even_rounds))
    rss = _rss_mib()
    _say("empty rounds")
    with bench.store._tx("killing the queue"):  # noqa: SLF001 - one bulk write
        queued = frozenset({JobState.QUEUED})
        bench.core.kill_all("admin", admin=True, owner=None, states=queued)
    bench.collector.take()
    empty = [bench.round() for _ in range(sizes.empty_rounds)]
    empty_gc = _gc(bench.collector.take()[0], sizes.empty_rounds)
    return {
        "quick": args.quick, "seed": args.seed, "trace": args.trace,
        "agents": len(bench.master.specs), "gpus": bench.total_milli // 1000,
        "queued": sizes.queued, "finished": sizes.finished, "setup_s": setup_s,
        "core_load_s": bench.load_s, "running_tasks": len(bench.master.tasks),
        "queued_after_steady": queued_after,
        "jobs_per_round": args.jobs_per_round,
        "first_round_launches": first_launches, "steady_launches": steady_launches,
        "first_round_ms": first,
        "round_ms_p50": _p(steady, 50), "round_ms_p99": _p(steady, 99),
        "round_ms_max": max(steady) if steady else 0.0,
        "book_lock_ms_p50": _p(lock_wall, 50), "book_lock_ms_max": max(lock_wall, default=0.0),
        "book_lock_cpu_ms_p50": _p(lock_cpu, 50),
        "empty_round_ms": statistics.median(empty),
        # the first of them: the one a master that honours the round's SUPPRESS sends (the
        # simulated master offers every agent every round; docs/scheduler.md)
        "first_empty_round_ms": empty[0],
        "submit_burst": sizes.burst, "submit_p50_ms": _p(burst_ms, 50),
        "submit_p99_ms": _p(burst_ms, 99), "submits_per_s": sizes.burst / burst_s,
        "submit_errors": burst_errors + even_errors,
        "even_rate_per_s": sizes.even_rate, "even_s": sizes.even_s,
        "even_submit_p99_ms": _p(even_ms, 99),
        "even_rounds": len(bench.even_rounds), "even_round_ms_p50": _p(bench.even_rounds, 50),
        "rss_mib": rss,
        # the cyclic collector on the round's thread inside on_offers (part of the round
        # figures above), per round; and per steady cycle elsewhere in the process
        "first_round_gc_ms": first_gc[0], "round_gc_ms": steady_gc[0],
        "round_gc_runs": steady_gc[1], "even_round_gc_ms": even_gc[0],
        "empty_round_gc_ms": empty_gc[0], "cycle_gc_outside_ms": steady_gc_out[0],
        "cycle_gc_outside_runs": steady_gc_out[1],
        "switch_interval_s": sys.getswitchinterval(),
        **even_breakdown(bench),
    }  # fmt: skip


def missed(result: dict) -> list[str]:
    """The targets ``result`` misses, as lines."""
    out = []
    for key, limit, _ in TARGETS:
        if result[key] > limit:
            out.append(f"{key} {result[key]:.1f} > {limit:g}")
    if result["submit_errors"]:
        out.append(f"submit_errors {result['submit_errors']} > 0")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when targets miss")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--trace", default="default")
    parser.add_argument("--trace-dir", default=None)
    parser.add_argument("--before", default=None, help="a JSON of this script from older code")
    parser.add_argument("--jobs-per-round", type=int, default=DEFAULT_JOBS_PER_ROUND,
                        help="the core's max_jobs_per_round (0: no cap)")  # fmt: skip
    parser.add_argument("--profile", default=None, help="write a cProfile of the rounds here")
    parser.add_argument(
        "--switch-interval", type=float, default=None,
        help="the GIL switch interval, s (default: the scheduler's, "
        "dlc/app/interpreter.py; Python's own is 0.005)",
    )  # fmt: skip
    parser.add_argument(
        "--digest", default=None, metavar="PATH", help="write a SHA-256 of the steady rounds here"
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # one "no dlc_topo" line per agent is not news here
    # as `dlc scheduler` runs (--gil-switch-interval), unless told otherwise
    tune_interpreter(args.switch_interval or DEFAULT_SWITCH_INTERVAL_S)
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        result = run(args, profiler)
        profiler.dump_stats(args.profile)
    else:
        result = run(args)
    result["machine"] = _machine()
    result["targets"] = {k: f"{how} {limit:g}" for k, limit, how in TARGETS}
    result["missed"] = missed(result)
    if args.before:
        before = json.loads(Path(args.before).read_text())
        result["before"] = before.get("after", before)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="scheduler core at openb scale" + (" (quick)" if args.quick else ""))
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target")
    if "before" in result:
        table.add_column("before", justify="right")
    limits = {k: f"{how} {limit:g}" for k, limit, how in TARGETS}
    for key, value in result.items():
        if key in ("targets", "missed", "before"):
            continue
        row = [key, f"{value:.1f}" if isinstance(value, float) else str(value),
               limits.get(key, "")]  # fmt: skip
        if "before" in result:
            old = result["before"].get(key, "")
            row.append(f"{old:.1f}" if isinstance(old, float) else str(old))
        table.add_row(*row)
    Console().print(table)
    for line in result["missed"]:
        print(f"missed: {line}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    if result["missed"] and not args.no_fail:
        sys.exit(1)


if __name__ == "__main__":
    main()
