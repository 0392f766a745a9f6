"""Pure accounting of one fault run: from what the harness saw to the counts it prints.

Inputs are plain records (containers from the ``docker events`` stream captured for the whole
run, with the GPUs and shares their labels carry; jobs as the API shows them at the end; the
kill points); nothing here talks to Docker, Mesos or the API, so the rules are unit-tested on
their own, and every count is shown to catch a planted violation (tests/fault/test_checks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations

#: targets whose crash may end the tasks that were in flight (the job must then be retried
#: and finish: a job such a fault ended for good counts as lost)
TASK_ENDING_TARGETS = {"executor", "agent", "local"}
TERMINAL = {"finished", "failed", "killed", "lost"}
#: tolerance (s) around a kill point when deciding which jobs it hit (for the evidence only)
HIT_SLACK_S = 1.0

#: the scheduler's bound on relaunches that use no retry (dlc.scheduler.tasks.infra_loss)
FREE_RELAUNCHES = 10
#: memory of each simulated GPU (MiB) unless the run says otherwise: shares on one GPU must fit
GPU_MEM_MIB = 16384


@dataclass
class Container:
    """One container of the run, from ``docker events`` (times in UNIX seconds)."""

    container_id: str
    job_id: str
    task_id: str
    gpus: tuple[int, ...] | None = None  # whole GPUs (``dlc.gpus`` label); None: not labelled
    start: float | None = None
    die: float | None = None
    share: tuple[int, int] | None = None  # (GPU, MiB) of a share (``dlc.gpu_share`` label)
    agent: str = ""  # the simulated agent (``dlc.sim_agent``): GPUs are per agent
    exit_code: int | None = None  # from the ``die`` event
    starts: int = 0  # ``start`` events: more than one is a second launch of the same attempt

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
    kill_after_faults: bool = False  # a kill job killed after the last kill point, not 2-4 s in


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
    #: jobs a task-ending fault ended for good (failed/lost though their command succeeds):
    #: the evidence names the fault; each is also counted in ``jobs_lost`` (never excused)
    ended_by_fault: int = 0
    #: jobs the scheduler declared ended while one of their containers still ran (> 1 s): the
    #: GPUs were free to reuse too early (information: gpu_conflicts counts actual reuse)
    ended_while_running: int = 0
    wrong_state: int = 0
    over_retries: int = 0
    not_submitted: int = 0
    gpus_unknown: int = 0  # started containers whose GPUs are unlabelled or misrecorded
    no_container: int = 0  # finished jobs with no container that started and exited 0
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
            "gpus_unknown": self.gpus_unknown,
            "no_container": self.no_container,
            "orphan_containers": self.orphan_containers,
            "executors_left": self.executor_procs + self.reaper_procs,
            "wrong_state": self.wrong_state + self.over_retries,
        }


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Seconds two half-open spans share."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def double_launches(containers: list[Container], end: float, t0: float) -> list[str]:
    """One line per pair of containers of the same job that ran at the same time, per
    attempt launched twice (two containers of one task id, overlapping or not), and per
    container started more than once."""
    by_job: dict[str, list[Container]] = {}
    by_task: dict[str, list[Container]] = {}
    for c in containers:
        by_job.setdefault(c.job_id, []).append(c)
        if c.start is not None:
            by_task.setdefault(c.task_id, []).append(c)
    out = [
        f"job {group[0].job_id}: attempt {task_id} launched {len(group)} times "
        f"({', '.join(c.container_id[:12] for c in group)})"
        for task_id, group in sorted(by_task.items())
        if len(group) > 1
    ]
    out += [
        f"job {c.job_id}: container {c.container_id[:12]} of {c.task_id} started {c.starts} times"
        for c in containers
        if c.starts > 1
    ]
    for job_id, group in sorted(by_job.items()):
        for a, b in combinations(sorted(group, key=lambda c: c.start or 0), 2):
            sa, sb = a.span(end), b.span(end)
            if sa and sb and overlap(sa, sb) > 0:
                out.append(
                    f"job {job_id}: {b.task_id} started at t={sb[0] - t0:.1f}s while "
                    f"{a.task_id} ran (overlap {overlap(sa, sb):.1f}s)"
                )
    return out


def gpu_conflicts(
    containers: list[Container], end: float, t0: float, gpu_mem_mib: int = GPU_MEM_MIB
) -> list[str]:
    """One line per pair of containers that held a common whole GPU at the same time (a
    share counts as holding its GPU against a whole-GPU container), and per share that
    started while the shares already on its GPU left it less memory than it took."""
    out = []
    ordered = sorted((c for c in containers if c.span(end)), key=lambda c: c.span(end)[0])
    for a, b in combinations(ordered, 2):
        if a.agent != b.agent or (a.share and b.share):
            continue
        shared = sorted(_held(a) & _held(b))
        together = overlap(a.span(end), b.span(end))
        if shared and together > 0:
            out.append(
                f"GPUs {','.join(map(str, shared))}: {b.task_id} started at "
                f"t={b.span(end)[0] - t0:.1f}s while {a.task_id} still ran "
                f"({together:.1f}s together)"
            )
    shares = [c for c in ordered if c.share]
    for b in shares:
        at = b.span(end)[0]
        alongside = [
            a for a in shares
            if a is not b and a.agent == b.agent and a.share[0] == b.share[0]
            and a.span(end)[0] <= at < a.span(end)[1]
        ]  # fmt: skip
        taken = b.share[1] + sum(a.share[1] for a in alongside)
        if taken > gpu_mem_mib:
            out.append(
                f"GPU {b.share[0]}: share {b.task_id} of {b.share[1]} MiB started at "
                f"t={at - t0:.1f}s with {taken - b.share[1]} MiB already shared out "
                f"({taken} > {gpu_mem_mib} MiB)"
            )
    return out


def _held(c: Container) -> set[int]:
    """The GPUs a container holds: its whole GPUs, or its share's GPU."""
    return set(c.gpus or ()) | ({c.share[0]} if c.share else set())


def unknown_gpus(containers: list[Container], jobs: list[PlannedJob]) -> list[str]:
    """One line per started container whose GPUs are not known for sure: no ``dlc.gpus``
    label, or GPUs that differ from what the scheduler recorded for that task."""
    recorded = {t["task_id"]: t for j in jobs for t in ((j.final or {}).get("tasks") or ()) if t}
    out = []
    for c in containers:
        if c.start is None:
            continue
        if c.gpus is None and c.share is None:
            out.append(f"container {c.container_id[:12]} of {c.task_id}: no GPU label")
            continue
        task = recorded.get(c.task_id)
        if task is None:
            continue  # an earlier attempt: the API shows the current one only
        want = tuple(sorted(task.get("gpu_ids") or ()))
        has = tuple(sorted(c.gpus or ()))
        share = task.get("share_gpu")
        want_share = None if share is None else (share, task.get("share_memory_mib"))
        if has != want or c.share != want_share:
            out.append(
                f"container {c.container_id[:12]} of {c.task_id}: GPUs {has} share {c.share}, "
                f"the scheduler placed it on {want} share {want_share}"
            )
    return out


def missing_containers(jobs: list[PlannedJob], containers: list[Container]) -> list[str]:
    """One line per job that ended ``finished`` without a container of it that started and
    exited 0 (the state must come from a run, not from bookkeeping)."""
    ran_ok = {c.job_id for c in containers if c.start is not None and c.exit_code == 0}
    return [
        f"job {j.job_id} ({j.name}): finished, but no container of it started and exited 0"
        for j in jobs
        if j.job_id and (j.final or {}).get("state") == "finished" and j.job_id not in ran_ok
    ]


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


def expected_states(job: PlannedJob) -> set[str]:
    """Final states that are right for ``job`` (a fault excuses none: a job it ended must
    have been retried and have finished)."""
    killed = job.kind == "kill" and job.kill_answer is not None
    if killed and job.kill_answer not in TERMINAL:
        return {"killed"}
    base = {"fail": {"failed"}}.get(job.kind, {"finished"})
    if killed:  # the job had ended before the kill arrived: it keeps that end
        base = base | {job.kill_answer}
    return base


def judge(
    jobs: list[PlannedJob],
    containers: list[Container],
    kills: list[KillPoint],
    end: float,
    t0: float,
    gpu_mem_mib: int = GPU_MEM_MIB,
) -> Report:
    """All counts except orphans and leftover processes (the caller adds those)."""
    report = Report(jobs=len(jobs), containers=sum(1 for c in containers if c.start))
    twice = double_launches(containers, end, t0)
    report.launched_twice = len(twice)
    conflicts = gpu_conflicts(containers, end, t0, gpu_mem_mib)
    report.gpu_conflicts = len(conflicts)
    unknown = unknown_gpus(containers, jobs)
    report.gpus_unknown = len(unknown)
    missing = missing_containers(jobs, containers)
    report.no_container = len(missing)
    report.details += twice + conflicts + unknown + missing
    hit = hit_jobs(jobs, containers, kills)
    attempts: dict[str, set[int]] = {}
    own_ends: dict[str, set[int]] = {}
    ends_seen: dict[str, list[str]] = {}
    for c in containers:
        if c.die is not None:
            ends_seen.setdefault(c.job_id, []).append(
                f"attempt {c.attempt} exit {c.exit_code} at t={c.die - t0:.1f}s"
            )
        if c.start is not None:
            attempts.setdefault(c.job_id, set()).add(c.attempt)
        if ended_by_its_command(c, kills):
            own_ends.setdefault(c.job_id, set()).add(c.attempt)
    for j in jobs:
        _check_ended_while_running(j, containers, end, t0, report)
        if j.job_id is None:
            report.not_submitted += 1
            report.details.append(f"{j.name}: never accepted by the API")
            continue
        _judge_state(j, j.job_id in hit, report)
        ran = len(attempts.get(j.job_id, ()))
        own = len(own_ends.get(j.job_id, ()))
        if own > j.retries + 1 or ran > j.retries + 1 + FREE_RELAUNCHES:
            report.over_retries += 1
            report.details.append(
                f"job {j.job_id} ({j.name}): {ran} attempts ran, {own} ended by the command; "
                f"retries allow {j.retries + 1} such ends and {FREE_RELAUNCHES} free relaunches "
                f"({', '.join(ends_seen.get(j.job_id, []))})"
            )
    return report


#: exit codes of a container stopped by a signal (SIGKILL, SIGTERM): the infrastructure's end
_SIGNAL_EXITS = frozenset({137, 143})


def victim_task(k: KillPoint) -> str | None:
    """The task whose executor an executor kill point killed (from its detail, which names
    the executor ``dlc-executor.<task id>``), or None."""
    found = re.search(r"dlc-executor\.(\S+?)\)", k.detail)
    return found.group(1) if found else None


def ended_by_its_command(c: Container, kills: list[KillPoint]) -> bool:
    """Whether ``c``'s attempt ended on its own (the command's exit code, not a signal),
    seen by the scheduler. Two ends go unseen, and the attempt is then rightly relaunched for
    free: one inside an outage (the master forgot the task), and that of a container whose
    executor was killed while it ran (the container may exit later, with no one to report
    it; the agent reports the executor's death instead)."""
    if c.start is None or c.die is None or c.exit_code is None or c.exit_code in _SIGNAL_EXITS:
        return False
    if any(k.target == "executor" and victim_task(k) == c.task_id for k in kills):
        return False  # its executor was killed: whatever the container did next went unseen
    outages = [k for k in kills if k.target in TASK_ENDING_TARGETS and k.target != "executor"]
    return not any(k.at - HIT_SLACK_S <= c.die <= k.at + k.outage_s + HIT_SLACK_S for k in outages)


def _judge_state(j: PlannedJob, hit: bool, report: Report) -> None:
    """Count ``j``'s final state: not terminal, or ended by a fault, is lost; else it must be
    one of :func:`expected_states`."""
    state = (j.final or {}).get("state")
    report.final_states[str(state)] = report.final_states.get(str(state), 0) + 1
    message = (j.final or {}).get("message", "")
    if state not in TERMINAL:
        report.jobs_lost += 1
        report.details.append(
            f"job {j.job_id} ({j.name}, {j.kind}): lost, ends {state or 'unknown'}"
        )
        return
    ok = expected_states(j)
    if state in ok:
        return
    if j.kind != "fail" and state in ("failed", "lost"):
        # its command succeeds: only the infrastructure can have ended it, and then the job
        # must have been retried until it finished
        report.jobs_lost += 1
        report.ended_by_fault += int(hit)
        why = "a fault in flight ended it" if hit else "no fault was in flight"
        report.details.append(
            f"job {j.job_id} ({j.name}, {j.kind}, retries {j.retries}): lost, ended {state} "
            f"and was not retried to finish ({why}; {message[:120]})"
        )
        return
    report.wrong_state += 1
    report.details.append(
        f"job {j.job_id} ({j.name}, {j.kind}, retries {j.retries}): {state}, "
        f"expected {'/'.join(sorted(ok))} ({message[:120]})"
    )


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
