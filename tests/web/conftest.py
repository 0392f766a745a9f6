"""Fixtures of the monitoring tests: a scheduler core with metrics on a fake clock."""

from __future__ import annotations

import pytest

from dlc.api.metrics import SchedulerMetrics
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore


class FakeClock:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def resolver(spec):
    return spec.image or f"img/{spec.framework}", "12.1"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def monitored(tmp_path, clock):
    """``(core, metrics)`` sharing one store and the fake clock."""
    store = JobStore(tmp_path / "db", clock=clock)
    metrics = SchedulerMetrics(clock=clock)
    core = SchedulerCore(
        store,
        CoreConfig(placement=PlacementConfig("tree")),
        resolver,
        clock=clock,
        metrics=metrics,
    )
    yield core, metrics
    store.close()
