"""Pure accounting of one fault run: from what the harness saw to the counts it prints.

Inputs are plain records (containers from ``docker events``, jobs as the API shows them at
the end, the kill points); nothing here talks to Docker, Mesos or the API, so the rules are
unit-tested on their own (tests/fault/test_checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

#: targets whose crash may legitimately end the tasks that were in flight
TASK_ENDING_TARGETS = {"executor", "agent", "local"}
TERMINAL = {"finished", "failed", "killed", "lost"}
#: tolerance (s) around a kill point when deciding which jobs it hit
HIT_SLACK_S = 1.0


@dataclass
class Container:
    """One container of the run, from ``docker events`` (times in UNIX seconds)."""

    container_id: str
    job_id: str
    task_id: str
    gpus: tuple[int, ...] | None = None  # None: the container was gone before it was inspected
    start: float | None = None
    die: float | None = None

    @property
    def attempt(self) -> int:
        parts = self.task_id.rsplit(".", 2)
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else -1

    def span(self, end: float) -> tuple[float, float] | None:
        """``[start, die)``, a container still running counted until ``end``."""
        if self.start is None:
            return None
        return self.start, self.die if self.die is not None else end


@dataclass
class PlannedJob:
    """A job of the stream as the harness planned and submitted it."""

    name: str
    kind: str  # ok/long: exit 0; fail: exits 3; kill: sleeps long, is killed through the API
    gpus: int
    retries: int
    sleep_s: float
    job_id: str | None = None  # None: the API never accepted it
    submitted_at: float | None = None
    kill_answer: str | None = None  # job state in the answer to the harness's kill
    final: dict | None = None  # the job as the API shows it at the end (None: unknown)


@dataclass
class KillPoint:
    """One injected fault."""

    target: str
    at: float
    outage_s: float
    detail: str = ""
    victim_job: str | None = None  # the job whose executor was killed (target executor)


@dataclass
class Report:
    """The counts (all must be 0 / True) and the evidence behind each."""

    jobs: int = 0
    jobs_lost: int = 0
    launched_twice: int = 0
    gpu_conflicts: int = 0
    orphan_containers: int = 0
    executor_procs: int = 0  # ``dlc executor`` processes still alive after the run settled
    reaper_procs: int = 0  # their reaper daemons still alive
    containers: int = 0  # containers the run started
    final_states: dict[str, int] = field(default_factory=dict)  # state -> jobs
    #: jobs a task-ending fault ended (failed/lost though their command succeeds): allowed by
    #: the counts, but Mesos agent recovery should make it rare (issue 10: agent restarts)
    ended_by_fault: int = 0
    #: jobs the scheduler declared ended while one of their containers still ran (> 1 s): the
    #: GPUs were free to reuse too early (information: gpu_conflicts counts actual reuse)
    ended_while_running: int = 0
    wrong_state: int = 0
    over_retries: int = 0
    not_submitted: int = 0
    gpus_unknown: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def states_right(self) -> bool:
        return self.jobs_lost == 0 and self.wrong_state == 0 and self.over_retries == 0

    def zero_counts(self) -> dict[str, int]:
        """The counts the guarantee says must be zero."""
        return {
            "jobs_lost": self.jobs_lost,
            "launched_twice": self.launched_twice,
            "gpu_conflicts": self.gpu_conflicts,
            "orphan_containers": self.orphan_containers,
            "executors_left": self.executor_procs + self.reaper_procs,
            "wrong_state": self.wrong_state + self.over_retries,
        }


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Seconds two half-open spans share."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def double_launches(containers: list[Container], end: float, t0: float) -> list[str]:
    """One line per pair of containers of the same job that ran at the same time."""
    by_job: dict[str, list[Container]] = {}
    for c in containers:
        by_job.setdefault(c.job_id, []).append(c)
    out = []
    for job_id, group in sorted(by_job.items()):
        for a, b in combinations(sorted(group, key=lambda c: c.start or 0), 2):
            sa, sb = a.span(end), b.span(end)
            if sa and sb and overlap(sa, sb) > 0:
                out.append(
                    f"job {job_id}: {b.task_id} started at t={sb[0] - t0:.1f}s while "
                    f"{a.task_id} ran (overlap {overlap(sa, sb):.1f}s)"
                )
    return out


def gpu_conflicts(containers: list[Container], end: float, t0: float) -> list[str]:
    """One line per pair of containers that held a common GPU at the same time."""
    out = []
    ordered = sorted((c for c in containers if c.gpus), key=lambda c: c.start or 0)
    for a, b in combinations(ordered, 2):
        shared = sorted(set(a.gpus) & set(b.gpus))
        sa, sb = a.span(end), b.span(end)
        if shared and sa and sb and overlap(sa, sb) > 0:
            out.append(
                f"GPUs {','.join(map(str, shared))}: {b.task_id} started at t={sb[0] - t0:.1f}s "
                f"while {a.task_id} still ran ({overlap(sa, sb):.1f}s together)"
            )
    return out


def hit_jobs(
    jobs: list[PlannedJob], containers: list[Container], kills: list[KillPoint]
) -> set[str]:
    """Jobs a task-ending fault may legitimately have failed: in flight at the kill point."""
    ends: dict[str, float] = {}
    for c in containers:
        if c.die is not None:
            ends[c.job_id] = max(ends.get(c.job_id, 0.0), c.die)
    hit = set()
    for k in kills:
        if k.target not in TASK_ENDING_TARGETS:
            continue
        if k.target == "executor":
            hit.update([k.victim_job] if k.victim_job else [])
            continue
        for j in jobs:
            if j.job_id is None or j.submitted_at is None:
                continue
            started = j.submitted_at <= k.at + k.outage_s + HIT_SLACK_S
            still = ends.get(j.job_id) is None or ends[j.job_id] >= k.at - HIT_SLACK_S
            if started and still:
                hit.add(j.job_id)
    return hit


def expected_states(job: PlannedJob, hit: bool) -> set[str]:
    """Final states that are right for ``job``."""
    killed = job.kind == "kill" and job.kill_answer is not None
    if killed and job.kill_answer not in TERMINAL:
        return {"killed"}
    base = {"fail": {"failed"}}.get(job.kind, {"finished"})
    if killed:  # the job had ended before the kill arrived: it keeps that end
        base = base | {job.kill_answer}
    return base | ({"failed", "lost"} if hit else set())


def judge(
    jobs: list[PlannedJob],
    containers: list[Container],
    kills: list[KillPoint],
    end: float,
    t0: float,
) -> Report:
    """All counts except orphans and leftover processes (the caller adds those)."""
    report = Report(jobs=len(jobs), containers=sum(1 for c in containers if c.start))
    hit = hit_jobs(jobs, containers, kills)
    twice = double_launches(containers, end, t0)
    report.launched_twice = len({line.split(":")[0] for line in twice})
    conflicts = gpu_conflicts(containers, end, t0)
    report.gpu_conflicts = len(conflicts)
    report.gpus_unknown = sum(1 for c in containers if c.gpus is None and c.start is not None)
    report.details += twice + conflicts
    attempts: dict[str, set[int]] = {}
    for c in containers:
        if c.start is not None:
            attempts.setdefault(c.job_id, set()).add(c.attempt)
    for j in jobs:
        _check_ended_while_running(j, containers, end, t0, report)
        if j.job_id is None:
            report.not_submitted += 1
            report.details.append(f"{j.name}: never accepted by the API")
            continue
        state = (j.final or {}).get("state")
        report.final_states[str(state)] = report.final_states.get(str(state), 0) + 1
        if j.kind != "fail" and state in ("failed", "lost") and j.job_id in hit:
            report.ended_by_fault += 1
            report.details.append(f"job {j.job_id} ({j.name}): ended {state} by a fault")
        if state not in TERMINAL:
            report.jobs_lost += 1
            report.details.append(
                f"job {j.job_id} ({j.name}, {j.kind}): lost, ends {state or 'unknown'}"
            )
            continue
        ok = expected_states(j, j.job_id in hit)
        if state not in ok:
            report.wrong_state += 1
            message = (j.final or {}).get("message", "")
            report.details.append(
                f"job {j.job_id} ({j.name}, {j.kind}, retries {j.retries}): {state}, "
                f"expected {'/'.join(sorted(ok))} ({message[:120]})"
            )
        ran = len(attempts.get(j.job_id, ()))
        if ran > j.retries + 1:
            report.over_retries += 1
            report.details.append(
                f"job {j.job_id} ({j.name}): {ran} attempts ran, retries allow {j.retries + 1}"
            )
    return report


def _check_ended_while_running(
    job: PlannedJob, containers: list[Container], end: float, t0: float, report: Report
) -> None:
    """Count ``job`` when the API says it ended (``ended_at``) before a container of it did."""
    ended = (job.final or {}).get("ended_at")
    if ended is None or job.final.get("state") not in TERMINAL:
        return
    late = [c for c in containers if c.job_id == job.job_id and c.span(end)]
    late = [c for c in late if c.span(end)[1] > ended + 1.0]
    if late:
        report.ended_while_running += 1
        c = max(late, key=lambda c: c.span(end)[1])
        report.details.append(
            f"job {job.job_id} ({job.name}): {job.final['state']} at t={ended - t0:.1f}s while "
            f"{c.task_id} ran until t={c.span(end)[1] - t0:.1f}s"
        )
