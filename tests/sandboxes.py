"""Agent sandboxes laid out as a Mesos agent lays them out, for tests that read job output.

The scheduler finds a task's sandbox only from an operator root and ids it knows itself
(dlc/api/logs.py); a status update cannot name it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the framework id the API tests' LogReaders report
FRAMEWORK_ID = "fw-test"


def agent_sandbox(
    root: Path, task_id: str, agent_id: str = "a1", framework_id: str = FRAMEWORK_ID
) -> Path:
    """Create ``root/slaves/<agent>/frameworks/<fid>/executors/dlc-executor.<task>/runs/<run>``
    with a ``runs/latest`` link to it, as a real agent does; returns the run directory."""
    runs = (
        root / "slaves" / agent_id / "frameworks" / framework_id / "executors"
        / f"dlc-executor.{task_id}" / "runs"
    )  # fmt: skip
    run = runs / "c0ffee"
    run.mkdir(parents=True)
    os.symlink("c0ffee", runs / "latest")
    return run
