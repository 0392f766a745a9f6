"""Consolidation through SchedulerCore: offers and status updates as data, a real SQLite
store. A fragmented cluster keeps an 8-GPU job waiting; consolidation moves two
preemptible jobs, holds the cleared agent, and all three run once the moved jobs stop."""

from __future__ import annotations

from dlc.api.metrics import SchedulerMetrics
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        self.now += 1
        return self.now


def slave(agent: str) -> dict:
    return {"id": agent, "hostname": f"host-{agent}", "active": True,
            "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"}}  # fmt: skip


def make_core(tmp_path, moves_per_hour: int, **kw) -> SchedulerCore:
    config = CoreConfig(
        placement=PlacementConfig("first-fit"),
        max_skips=0,  # the waiting job may reserve (and consolidate) on its first round
        consolidation_moves_per_hour=moves_per_hour,
        **kw,
    )
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, config, lambda s: (s.image, None), clock=Clock(),
                         metrics=SchedulerMetrics())  # fmt: skip
    core.update_agents([slave(a) for a in ("a1", "a2", "a3")])
    return core


def submit(core, gpus, **kw):
    return core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": gpus, **kw}))


def status(task_id, state, agent):
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}}


def launched(actions) -> dict[str, tuple[str, list[int]]]:
    """task id -> (agent, GPU ids) of the round's launches."""
    out = {}
    for _, infos in actions.accepts:
        for info in infos:
            ids = next(r["set"]["item"] for r in info["resources"] if r["name"] == "gpu_ids")
            out[info["task_id"]["value"]] = (info["agent_id"]["value"], sorted(map(int, ids)))
    return out


def fragment(core):
    """a1: A (6 GPUs) + 2 free; a2: B (2) + C (4) + 2 free; a3: D (4) + 4 free: 8 GPUs
    free, no agent with 8. Returns the four running jobs."""
    a = submit(core, 6)
    core.on_offers([offer("o1", "a1")])
    b, c = submit(core, 2), submit(core, 4)
    core.on_offers([offer("o2", "a2")])
    d = submit(core, 4)
    core.on_offers([offer("o3", "a3")])
    where = {"a1": a, "a2": b, "a3": d}
    for agent, job in [*where.items(), ("a2", c)]:
        core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING", agent))
        assert core.visible_job(job.job_id, "alice").state is JobState.RUNNING
    return a, b, c, d


def fragmented_offers(n: int) -> list[dict]:
    return [offer(f"f{n}-1", "a1", [6, 7]), offer(f"f{n}-2", "a2", [6, 7]),
            offer(f"f{n}-3", "a3", [4, 5, 6, 7])]  # fmt: skip


def test_consolidation_moves_two_jobs_and_the_8_gpu_job_runs(tmp_path):
    core = make_core(tmp_path, moves_per_hour=4)
    a, b, c, d = fragment(core)
    w = submit(core, 8)
    actions = core.on_offers(fragmented_offers(1))
    assert launched(actions) == {}
    # Clearing a2 is the only plan where every moved job has a place at once: C (4) on a3,
    # B (2) on a1. Clearing a3 would leave D (4) without one; a1's A (6) fits nowhere.
    assert sorted(actions.kills) == sorted([(f"{b.job_id}.0.0", "a2"), (f"{c.job_id}.0.0", "a2")])
    for job in (b, c):
        moved = core.visible_job(job.job_id, "alice")
        assert moved.state is JobState.PREEMPTED
        assert moved.message.startswith(
            f"preempted: moved to make room for job {w.job_id} "
            "(consolidation; 8 GPUs on one node, host-a2)"
        )
        assert "GPU-hours at most" in moved.message
    for job in (a, d):
        assert core.visible_job(job.job_id, "alice").state is JobState.RUNNING
    events = [e for _, _, e in core.store.history(w.job_id) if e]
    assert any(e.startswith("consolidation: moving 2 job(s)") for e in events)
    assert "reserving agent a2" in core.queue_reason(w.job_id)
    moved, lost = core.consolidation_totals()
    assert moved == 2 and lost > 0
    exposition = core.metrics.exposition().decode()
    assert "dlc_consolidation_moves_total 2.0" in exposition
    assert "dlc_consolidation_lost_gpu_hours_total" in exposition
    # While B and C stop, nothing more moves (one plan at a time).
    assert core.on_offers(fragmented_offers(2)).kills == []
    for job in (b, c):
        core.on_status(status(f"{job.job_id}.0.0", "TASK_KILLED", "a2"))
        requeued = core.visible_job(job.job_id, "alice")
        assert requeued.state is JobState.QUEUED
        assert (requeued.failures, requeued.attempt) == (0, 1)
        assert requeued.message.endswith("queued again (no retry used)")
    # Next round: W gets all of a2 (held for it); B and C take their places elsewhere.
    offers = [offer("g1", "a1", [6, 7]), offer("g2", "a2"), offer("g3", "a3", [4, 5, 6, 7])]
    actions = core.on_offers(offers)
    assert launched(actions) == {
        f"{w.job_id}.0.0": ("a2", list(range(8))),
        f"{b.job_id}.1.0": ("a1", [6, 7]),
        f"{c.job_id}.1.0": ("a3", [4, 5, 6, 7]),
    }


def test_off_by_default_nothing_moves(tmp_path):
    core = make_core(tmp_path, moves_per_hour=0)
    _, b, c, _ = fragment(core)
    w = submit(core, 8)
    for n in range(3):
        assert core.on_offers(fragmented_offers(n)).kills == []
    assert core.visible_job(w.job_id, "alice").state is JobState.QUEUED
    assert core.consolidation_totals() == (0, 0.0)


def test_a_budget_too_small_for_the_plan_moves_nothing(tmp_path):
    core = make_core(tmp_path, moves_per_hour=1)  # the only plan needs two moves
    _, b, c, _ = fragment(core)
    submit(core, 8)
    for n in range(3):
        assert core.on_offers(fragmented_offers(n)).kills == []
    assert core.visible_job(b.job_id, "alice").state is JobState.RUNNING


def test_environments_and_higher_priority_jobs_are_not_moved(tmp_path):
    core = make_core(tmp_path, moves_per_hour=4)
    a = submit(core, 6)
    core.on_offers([offer("o1", "a1")])
    b = submit(core, 2, priority=0)
    c = submit(core, 4, priority=0)
    core.on_offers([offer("o2", "a2")])
    d = submit(core, 4)
    core.on_offers([offer("o3", "a3")])
    for agent, job in (("a1", a), ("a2", b), ("a2", c), ("a3", d)):
        core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING", agent))
    # the waiting job has priority -1: B and C (priority 0) outrank it
    submit(core, 8, priority=-1)
    assert core.on_offers(fragmented_offers(1)).kills == []


def test_the_scheduler_flag_reaches_the_core_config(monkeypatch):
    from click.testing import CliRunner

    import dlc.app.service as service
    from dlc.cli.main import cli

    seen = {}

    class Captured(Exception):
        pass

    def fake_service(config):
        seen["config"] = config
        raise Captured

    monkeypatch.setattr(service, "SchedulerService", fake_service)
    where = ["scheduler", "--master", "127.0.0.1:1", "--db", ":memory:"]
    CliRunner().invoke(cli, [*where, "--consolidation-moves-per-hour", "6"])
    assert seen["config"].consolidation_moves_per_hour == 6
    bad = CliRunner().invoke(cli, [*where, "--consolidation-moves-per-hour", "-1"])
    assert bad.exit_code != 0 and "--consolidation-moves-per-hour" in bad.output


def test_a_moved_job_needs_a_place_in_its_own_pool(tmp_path):
    """a4 (pool dev) has the 4 free GPUs C would need: C may not run there, so clearing a2
    has no joint placement and nothing moves."""
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=0,
                        consolidation_moves_per_hour=4)  # fmt: skip
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None),
                         clock=Clock())  # fmt: skip
    dev = {**slave("a4"), "attributes": {"dlc_pool": "dev"}}
    core.update_agents([slave(a) for a in ("a1", "a2", "a3")] + [dev])
    jobs = {}
    for name, gpus, agent in (("A", 6, "a1"), ("B", 2, "a2"), ("C", 4, "a2"), ("D", 8, "a3")):
        jobs[name] = submit(core, gpus, pool="default")
        free = list(range(2, 8)) if name == "C" else None  # B holds a2's GPUs 0 and 1
        core.on_offers([offer(f"o-{name}", agent, free)])
        core.on_status(status(f"{jobs[name].job_id}.0.0", "TASK_RUNNING", agent))
    busy = submit(core, 4, pool="dev")
    core.on_offers([offer("o-dev", "a4", attrs={"dlc_pool": "dev"})])
    core.on_status(status(f"{busy.job_id}.0.0", "TASK_RUNNING", "a4"))
    assert all(core.visible_job(j.job_id, "alice").state is JobState.RUNNING
               for j in [*jobs.values(), busy])  # fmt: skip
    submit(core, 8, pool="default")
    offers = [offer("f1", "a1", [6, 7]), offer("f2", "a2", [6, 7]),
              offer("f4", "a4", [4, 5, 6, 7], attrs={"dlc_pool": "dev"})]  # fmt: skip
    assert core.on_offers(offers).kills == []
    assert core.visible_job(jobs["C"].job_id, "alice").tasks[0].gpu_ids == (2, 3, 4, 5)
    assert core.visible_job(jobs["C"].job_id, "alice").state is JobState.RUNNING


def test_protected_runtime_and_eviction_delay_hold_for_moves(tmp_path):
    from dlc.scheduler.tenancy.preemption import parse_protection

    core = make_core(tmp_path, 4, protection=parse_protection(["normal=30m:45s"]))
    _, b, c, _ = fragment(core)
    w = submit(core, 8)
    # B and C started a moment ago: inside their 30 min protection, nothing moves
    assert core.on_offers(fragmented_offers(1)).kills == []
    assert core.consolidation_totals()[0] == 0
    core.state.clock.now += 31 * 60  # past the protection
    assert core.on_offers(fragmented_offers(2)).kills == []  # decided; evicted after 45 s
    for job in (b, c):
        moved = core.visible_job(job.job_id, "alice")
        assert moved.state is JobState.PREEMPTED
        assert f"moved to make room for job {w.job_id}" in moved.message
        assert "to be evicted 45 s after the decision" in moved.message
    core.state.clock.now += 46
    kills = core.on_offers(fragmented_offers(3)).kills
    assert sorted(kills) == sorted([(f"{b.job_id}.0.0", "a2"), (f"{c.job_id}.0.0", "a2")])
