"""Shared pytest fixtures: the real ``nvidia-smi topo`` outputs in ``../shared``.

Fixtures:

* ``fixture_dir``: :class:`~pathlib.Path` of ``<repo>/../shared/fixtures/topology``
  (the test fails, not skips, when it is missing).
* ``complete_topo_paths`` / ``truncated_topo_paths``: sorted lists of complete
  ``topo -m`` outputs and ``*_TRUNCATED.txt`` outputs.

``pytest.mark.parametrize`` runs before fixtures exist, so the same lists are also
plain functions in :mod:`tests.fixture_files`.

Cores built here without ``codec=`` get the Mesos codec (imported below).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

# the Mesos adapter registers its codec as the default of cores built without ``codec=``
# (dlc/scheduler/core/ports.py): the suite's hundred-odd cores speak Mesos
import dlc.mesos.codec  # noqa: F401
from tests.fixture_files import (  # noqa: F401  (re-exported for fixtures)
    FIXTURE_DIR,
    REPO_ROOT,
    complete_topo_files,
    p2p_files,
    truncated_topo_files,
)


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """Directory of the real topology outputs; fails (not skips) when it is missing."""
    assert FIXTURE_DIR.is_dir(), f"topology fixtures not found at {FIXTURE_DIR}"
    return FIXTURE_DIR


@pytest.fixture(scope="session")
def complete_topo_paths(fixture_dir: Path) -> list[Path]:
    """All complete ``topo -m`` fixture files."""
    return complete_topo_files()


@pytest.fixture(scope="session")
def truncated_topo_paths(fixture_dir: Path) -> list[Path]:
    """All truncated ``topo -m`` fixture files."""
    return truncated_topo_files()


@pytest.fixture(scope="session", autouse=True)
def no_state_left_in_the_repo():
    """Fail the run when a test leaves `dlc local`'s default state directory in the repo root
    (tests must pass --work-dir or run in a temporary directory)."""

    state = REPO_ROOT / ".dlc-local"
    existed = state.exists()
    yield
    if state.exists() and not existed:
        import shutil

        shutil.rmtree(state, ignore_errors=True)
        pytest.fail(f"a test left {state}; give it --work-dir under tmp_path", pytrace=False)


@pytest.fixture(autouse=True)
def interpreter_settings_restored():
    """`dlc scheduler` and `dlc local` set the process's GIL switch interval and collector
    thresholds (dlc/app/interpreter.py); a test that runs one in-process must not leave
    them changed for the tests after it."""
    before = sys.getswitchinterval(), gc.get_threshold()
    yield
    sys.setswitchinterval(before[0])
    gc.set_threshold(*before[1])
