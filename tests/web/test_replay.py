"""Dashboard plots after a restart: rebuilt from the job store's state history."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from dlc.api.metrics import SchedulerMetrics
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.store.sqlite import JobStore
from dlc.web.dashboard import Dashboard
from dlc.web.replay import replay_samples

from .conftest import FakeClock


def _history(store: JobStore, clock: FakeClock) -> None:
    """Job a (2 GPUs): queued 1000, staging 1010, running 1012, finished 1100.
    Job b (4 GPUs): queued 1050, re-entered the queue at 1060 (a retry entry), running 1200."""
    steps = [
        (1000, "a", JobState.QUEUED),
        (1010, "a", JobState.STAGING),
        (1012, "a", JobState.RUNNING),
        (1050, "b", JobState.QUEUED),
        (1100, "a", JobState.FINISHED),
        (1200, "b", JobState.RUNNING),
    ]
    jobs: dict[str, Job] = {}
    for at, name, state in steps:
        clock.now = at
        if name not in jobs:
            spec = JobSpec.from_dict({"image": "x", "gpus": 2 if name == "a" else 4})
            jobs[name] = store.add_job(Job(name, "alice", spec, submitted_at=at))
        else:
            jobs[name] = store.save_job(replace(jobs[name], state=state))
        if (at, name) == (1050, "b"):
            clock.now = 1060
            store.save_job(jobs[name], event="kill requested")  # same state, new entry


# (time, gpus allocated, jobs waiting, longest queue wait) at the sample times
EXPECTED = [
    (1000, 0, 1, 0.0),  # a just queued (entries at the sample time count)
    (1050, 2, 1, 0.0),  # a running, b just queued
    (1100, 0, 1, 50.0),  # a finished; b waits since 1050 (the 1060 entry keeps its start)
    (1150, 0, 1, 100.0),
    (1200, 4, 0, 0.0),  # b running
    (1250, 4, 0, 0.0),
]


@pytest.mark.parametrize("count", [10, 3], ids=["window-before-first-event", "last-3-only"])
def test_replay_rebuilds_the_series(tmp_path, count):
    clock = FakeClock()
    store = JobStore(tmp_path / "db", clock=clock)
    _history(store, clock)
    samples = replay_samples(store, now=1300, interval_s=50, count=count)
    got = [(s.at, s.gpus_allocated, s.jobs_waiting, s.queue_wait_s) for s in samples]
    assert got == EXPECTED[-count:]
    assert all(s.gpus_total == 0 for s in samples)


def test_empty_store_replays_nothing(tmp_path):
    assert replay_samples(JobStore(tmp_path / "db"), now=1300, interval_s=5, count=720) == []


def test_restarted_dashboard_starts_with_the_replayed_plot(monitored, clock):
    core, _ = monitored
    _history(core.store, clock)
    clock.now = 1300
    metrics = SchedulerMetrics(clock=clock)
    metrics.watch_jobs(core)
    dash = Dashboard(core, metrics, clock=clock, sample_interval_s=50, ring_capacity=8)
    dash.start()
    try:
        deadline = time.monotonic() + 10
        while len(dash.ring) < 7 and time.monotonic() < deadline:
            time.sleep(0.01)  # the sampler thread takes the first live sample
    finally:
        dash.stop()
    series = dash.ring.to_dict()
    assert series["t"][:6] == [at for at, *_ in EXPECTED]
    assert series["gpus_allocated"][:6] == [gpus for _, gpus, *_ in EXPECTED]
    assert series["t"][6] == 1300  # the first live sample follows the replayed ones
