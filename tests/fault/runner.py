"""One fault run: a seeded stream of short GPU jobs, seeded kill points, then the counts.

The stream: every job runs ``sleep S; exit C`` in the test image with 1 or 2 (simulated) GPUs.
``ok`` jobs exit 0 (with one or two retries: a fault may end an attempt, and the job must
still finish); ``long`` ones too, after 3-6 s, with two retries (they are the ones running,
and retried, when a fault strikes); ``fail`` jobs exit 3 with one retry (they must end FAILED
after at most two attempts); ``kill`` jobs sleep long and are killed through the API (they
must end KILLED). On ``dlc local`` (whose agent offers GPU shares) one ``ok`` job in three is
a 4 GiB share instead of whole GPUs, so shares run beside whole GPUs and each other. Before
every crash of the API's process (``scheduler``/``local``) the harness sends one such kill, so
a kill accepted just before a crash is tested on every one. A run that kills executors also
starts a ``kill`` job first that sleeps through every kill point and is killed through the
API after the last one (:func:`keeper_job`): a kill point late in the stream, after the short
jobs ended, still finds a live executor (without it a run could fail for want of a victim).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.fault.checks import TERMINAL, KillPoint, PlannedJob, Report, judge
from tests.fault.clusters import CLUSTERS, SHARE_GPU_MEM_MIB, Cluster
from tests.fault.docker_watch import RUN_ENV, DockerWatch

IMAGE = "dlc-test/busybox:1"
JOB_INTERVAL_S = 1.2  # between submissions
KILL_SPACING_S = 5.0  # planned time per kill point
SETTLE_S = 90.0  # how long the jobs get to end after the last fault, or after the last progress
SETTLE_MAX_S = 300.0  # ... but never longer (a loaded machine is slow, a stuck queue stays stuck)
API_CRASH_TARGETS = {"scheduler", "local"}


@dataclass
class RunResult:
    """A run's setup, its kill points and its counts."""

    backend: str
    target: str
    seed: int
    kills: list[KillPoint]
    report: Report
    duration_s: float
    run_dir: str
    t0: float
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        body = asdict(self)
        body["report"] = {
            **asdict(self.report),
            **self.report.zero_counts(),
            "states_right": self.report.states_right,
        }
        return body


#: the memory of one share job (MiB); a simulated GPU of ``dlc local`` holds four
SHARE_MIB = SHARE_GPU_MEM_MIB // 4


KEEPER_SLEEP_S = 3600.0  # the keeper outlives any run; the harness kills it


def keeper_job(seed: int) -> PlannedJob:
    """The job that keeps an executor alive through a run's kill points (a ``kill`` job the
    harness kills after the last one; its losses use no retry, as any job's)."""
    return PlannedJob(f"f{seed}-keeper", "kill", 1, 1, KEEPER_SLEEP_S, kill_after_faults=True)


def plan_jobs(rng: random.Random, n: int, seed: int, shares: bool = False) -> list[PlannedJob]:
    """The seeded job stream (``shares``: some ``ok`` jobs take a GPU share, ``gpus`` 0)."""
    jobs = []
    oks = 0
    for i in range(n):
        kind = rng.choices(["ok", "long", "fail", "kill"], weights=[6, 3, 2, 2])[0]
        sleep = {"kill": 30.0, "long": round(rng.uniform(3, 6), 1)}.get(kind)
        sleep = sleep or round(rng.uniform(0.3, 1.5), 1)
        retries = {"ok": rng.choice([1, 2]), "long": 2, "fail": 1, "kill": 1}[kind]
        gpus = rng.choice([1, 1, 2])
        oks += kind == "ok"
        if shares and kind == "ok" and oks % 3 == 1:  # the 1st, 4th, 7th ... ok job: a share
            gpus = 0
        jobs.append(PlannedJob(f"f{seed}-{i}", kind, gpus, retries, sleep))
    return jobs


def job_body(job: PlannedJob, run_id: str) -> dict:
    code = 3 if job.kind == "fail" else 0
    place = {"gpus": job.gpus} if job.gpus else {"gpu_memory": f"{SHARE_MIB}M"}
    return {
        "image": IMAGE,
        **place,
        "cpus": 0.1,
        "mem_mib": 64,
        "retries": job.retries,
        "name": job.name,
        "env": {RUN_ENV: run_id},
        "command": ["sh", "-c", f"sleep {job.sleep_s}; exit {code}"],
    }


class FaultRun:
    """Drive one cluster through ``kills`` faults of ``target``.

    ``target`` may name several targets joined by ``+`` (``scheduler+agent``): the kill points
    then take them in turn, on one cluster (the CI slice does that to save start-ups).
    """

    def __init__(self, backend: str, target: str, seed: int, kills: int, base_dir: Path):
        self.rng = random.Random(f"{seed}-{backend}-{target}")
        self.seed, self.target, self.backend = seed, target, backend
        self.targets = target.split("+")
        self.run_id = uuid.uuid4().hex[:12]
        self.run_dir = base_dir / f"{backend}-{target}-{seed}-{self.run_id}"
        self.run_dir.mkdir(parents=True)
        self.cluster: Cluster = CLUSTERS[backend](self.run_dir, self.run_id)
        self.jobs = plan_jobs(self.rng, max(4, 3 * kills + 2), seed, self.cluster.shares)
        self.kill_plan = self._plan_kills(kills)
        if "executor" in self.targets:  # first, so it runs before the first kill point
            self.jobs.insert(0, keeper_job(seed))
        self.kills: list[KillPoint] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.t0 = 0.0

    def _plan_kills(self, kills: int) -> list[tuple[float, float, str]]:
        """(offset s, outage s, target) per kill point, over the submission stream."""
        span = max(len(self.jobs) * JOB_INTERVAL_S, kills * KILL_SPACING_S)
        offsets = sorted(self.rng.uniform(2.0, span) for _ in range(kills))
        return [
            (at, round(self.rng.uniform(0.5, 3.0), 1), self.targets[i % len(self.targets)])
            for i, at in enumerate(offsets)
        ]

    # -- the job stream (a thread) ---------------------------------------------

    def _retry(self, call, what: str, deadline: float):
        """``call()``, again every 0.3 s while it fails (the API is down during an outage)."""
        last: Exception | str = "stopped"
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 - any failure: try again until the deadline
                last = exc
                time.sleep(0.3)
        self.errors.append(f"{what}: gave up ({last})")
        return None

    def _stream(self) -> None:
        pending_kills: list[tuple[float, PlannedJob]] = []
        for i, job in enumerate(self.jobs):
            self._sleep_until(i * JOB_INTERVAL_S, pending_kills)
            answer = self._retry(
                lambda j=job: self.cluster.client.submit(job_body(j, self.run_id)),
                f"submit {job.name}",
                time.monotonic() + 60,
            )
            if answer:
                job.job_id, job.submitted_at = answer["id"], time.time()
                if job.kind == "kill" and not job.kill_after_faults:
                    pending_kills.append((time.time() - self.t0 + self.rng.uniform(2, 4), job))
        while pending_kills and not self._stop.is_set():
            self._sleep_until(pending_kills[0][0], pending_kills)

    def _sleep_until(self, offset: float, pending_kills: list) -> None:
        while time.time() - self.t0 < offset and not self._stop.is_set():
            due = [p for p in pending_kills if p[0] <= time.time() - self.t0]
            for p in due:
                pending_kills.remove(p)
                self.kill_job(p[1])
            time.sleep(0.05)
        for p in [p for p in pending_kills if p[0] <= time.time() - self.t0]:
            pending_kills.remove(p)
            self.kill_job(p[1])

    def kill_job(self, job: PlannedJob) -> None:
        """Kill ``job`` through the API once (retrying while the API is down)."""
        with self._lock:
            if job.kill_answer is not None or job.job_id is None:
                return
            job.kill_answer = "sending"
        answer = self._retry(
            lambda: self.cluster.client.kill(job.job_id),
            f"kill {job.job_id}",
            time.monotonic() + 60,
        )
        job.kill_answer = answer["state"] if answer else None

    # -- the run ----------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.monotonic()
        watch = self.watch = DockerWatch(self.run_id, self.job_ids).start()
        report = Report()
        try:
            self.cluster.start()
            self.t0 = time.time()
            stream = threading.Thread(target=self._stream, name="fault-stream", daemon=True)
            stream.start()
            for offset, outage, target in self.kill_plan:
                while time.time() - self.t0 < offset:
                    time.sleep(0.05)
                self._fault(outage, target)
            for job in self.jobs:
                if job.kill_after_faults:
                    self.kill_job(job)
            stream.join(timeout=SETTLE_S)
            report = self._settle_and_judge(watch)
        except Exception as exc:  # noqa: BLE001 - reported as a run error, counts stay
            self.errors.append(f"run aborted: {type(exc).__name__}: {exc}")
        finally:
            self._stop.set()
            self._cleanup(watch)
        return RunResult(
            self.backend,
            self.target,
            self.seed,
            self.kills,
            report,
            round(time.monotonic() - started, 1),
            str(self.run_dir),
            self.t0,
            self.errors,
        )

    def job_ids(self) -> set[str]:
        """Ids the API gave the run's jobs so far."""
        return {j.job_id for j in self.jobs if j.job_id}

    def ours(self, task_id: str) -> bool:
        """Whether ``task_id`` (``job.attempt.rank``) is a task of this run's jobs: any may
        lose its executor (a loss uses no retry: the job must still end as its command does,
        whatever retries it has)."""
        job_id = task_id.partition(".")[0]
        return any(j.job_id == job_id for j in self.jobs)

    def _fault(self, outage: float, target: str) -> None:
        at = time.time()
        if target in API_CRASH_TARGETS:
            # a kill accepted just before the crash must still happen afterwards
            victim = next(
                (
                    j
                    for j in self.jobs
                    if j.kind == "kill"
                    and j.job_id
                    and j.kill_answer is None
                    and not j.kill_after_faults
                ),
                None,
            )
            if victim is not None:
                self.kill_job(victim)
        detail, victim_job = self.cluster.inject(
            target, outage, self.rng, self.watch.busy_executors, self.ours
        )
        if target == "executor" and victim_job is None:
            # the kill point did nothing: it must not pass as a fault survived
            self.errors.append(f"kill point at t={at - self.t0:.1f}s: {detail}")
        self.kills.append(KillPoint(target, at, outage, detail, victim_job))

    def _settle_and_judge(self, watch: DockerWatch) -> Report:
        # "lost" must mean stuck, not slow: on a loaded machine a launch takes 10-25 s, so
        # the wait restarts whenever a job changes state (bounded by SETTLE_MAX_S)
        started = time.monotonic()
        deadline = started + SETTLE_S
        ids = {j.job_id for j in self.jobs if j.job_id}
        finals: dict[str, dict] = {}
        seen: dict[str, str] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # the API may still be coming up: poll again
                finals = {j["id"]: j for j in self.cluster.client.jobs() if j["id"] in ids}
            if len(finals) == len(ids) and all(
                j["state"] in ("finished", "failed", "killed", "lost") for j in finals.values()
            ):
                break
            states = {i: j["state"] for i, j in finals.items()}
            if states != seen:
                seen = states
                deadline = min(time.monotonic() + SETTLE_S, started + SETTLE_MAX_S)
            time.sleep(0.5)
        for job in self.jobs:
            job.final = finals.get(job.job_id) if job.job_id else None
            if job.final and job.final["state"] in TERMINAL:
                job.final["ended_at"] = self._ended_at(job.job_id)
        # containers and executors get a little time to go after their job ended
        end_wait = time.monotonic() + 10
        while time.monotonic() < end_wait and (
            watch.leftovers() or self.cluster.leftover_processes()
        ):
            time.sleep(0.5)
        until = time.time()
        containers = watch.containers(until)
        report = judge(self.jobs, containers, self.kills, until, self.t0, SHARE_GPU_MEM_MIB)
        self.errors += watch.stream_errors
        leftovers = watch.leftovers()
        report.orphan_containers = len(leftovers)
        report.details += [f"orphan container {c['Names'][0]} ({c['State']})" for c in leftovers]
        left = self.cluster.leftover_processes()
        report.executor_procs = sum(1 for p in left if p.kind == "executor")
        report.reaper_procs = sum(1 for p in left if p.kind == "reaper")
        report.details += [
            f"left: {p.kind} pid {p.pid} ({' '.join(p.argv)[:120]})"
            + ("" if p.env else " - found by its directory only: the run's marker missed it")
            for p in left
        ]
        return report

    def _ended_at(self, job_id: str) -> float | None:
        """When the job's history says it reached its terminal state."""
        try:
            history = self.cluster.client.show(job_id).get("history") or []
        except Exception:  # noqa: BLE001 - unknown: the check is skipped for this job
            return None
        ends = [h["at"] for h in history if h.get("state") in TERMINAL]
        return ends[-1] if ends else None

    def _cleanup(self, watch: DockerWatch) -> None:
        try:
            self.cluster.stop()
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"stopping the cluster: {exc}")
        try:
            watch.remove(watch.leftovers())
        finally:
            watch.stop()
