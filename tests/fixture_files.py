"""Paths of the real ``nvidia-smi topo`` outputs in ``../shared/fixtures/topology``.

Plain functions, not fixtures, because ``pytest.mark.parametrize`` needs the lists at
collection time: ``from tests.fixture_files import complete_topo_files``.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = REPO_ROOT.parent / "shared" / "fixtures" / "topology"


def complete_topo_files() -> list[Path]:
    """Complete ``nvidia-smi topo -m`` fixture files, sorted by name."""
    return sorted(
        p
        for p in FIXTURE_DIR.glob("*.txt")
        if not p.name.endswith(".p2p.txt") and not p.name.endswith("_TRUNCATED.txt")
    )


def truncated_topo_files() -> list[Path]:
    """``topo -m`` fixture files cut mid-table (``*_TRUNCATED.txt``), sorted by name."""
    return sorted(FIXTURE_DIR.glob("*_TRUNCATED.txt"))


def p2p_files() -> list[Path]:
    """``nvidia-smi topo -p2p`` fixture matrices (``*.p2p.txt``), sorted by name."""
    return sorted(FIXTURE_DIR.glob("*.p2p.txt"))
