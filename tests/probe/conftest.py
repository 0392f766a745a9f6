"""Fixtures of the probe tests: the synthetic probe sample and the DGX-1 topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc.topology.discovery.discover import discover
from dlc.topology.model import Topology

from .helpers import DGX1_TOPO, SAMPLE_PATH


@pytest.fixture
def sample_text() -> str:
    """The synthetic DGX-1 V100 probe output (not a measurement)."""
    return SAMPLE_PATH.read_text()


@pytest.fixture
def dgx1_path(fixture_dir: Path) -> Path:
    """The real DGX-1 V100 ``nvidia-smi topo -m`` fixture."""
    return fixture_dir / DGX1_TOPO


@pytest.fixture
def dgx1(dgx1_path: Path) -> Topology:
    """The DGX-1 V100 topology (``topo -m`` text: no models, no bus ids, P2P unknown)."""
    return discover(from_file=dgx1_path)
