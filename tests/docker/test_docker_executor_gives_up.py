"""`dlc executor` whose agent is unreachable gives up after the recovery timeout, not after a day
(pymesos read MESOS_CHECKPOINT=0 as true and retried for 24 h)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "checkpoint",
    [
        pytest.param({"MESOS_CHECKPOINT": "0"}, id="no-checkpoint-ends-with-the-connection"),
        pytest.param(
            {"MESOS_CHECKPOINT": "1", "MESOS_RECOVERY_TIMEOUT": "3secs"}, id="recovery-timeout"
        ),
    ],
)
def test_executor_without_agent_exits(docker_runtime, tmp_path, checkpoint):
    env = dict(os.environ)
    env.update(
        MESOS_AGENT_ENDPOINT=f"127.0.0.1:{_closed_port()}",
        MESOS_FRAMEWORK_ID="fw-gone",
        MESOS_EXECUTOR_ID="ex-gone",
        MESOS_SANDBOX=str(tmp_path),
        MESOS_LOCAL="1",  # no process-group SIGKILL: the exit must be the executor's own
        **checkpoint,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "dlc", "executor", "--no-reaper"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    log = (tmp_path / "dlc-executor.log").read_text()
    assert proc.returncode == 0, proc.stderr
    if checkpoint["MESOS_CHECKPOINT"] == "1":
        assert "recovery timeout" in log, log
