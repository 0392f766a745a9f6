"""Preemption end to end: quotas set with the CLI, a borrowed job stopped with SIGTERM and its
grace period when the lender needs its guarantee, its container gone, run again later; nothing
lost or launched twice. On DLC's emulator and the REAL Mesos 1.11.0 master (marker ``mesos``),
with the real Docker engine (marker ``docker``), the fixtures of ``test_docker_e2e``.
"""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_EXECUTOR
from tests.e2e.test_docker_e2e import (  # noqa: F401  (fixtures)
    IMAGE,
    TOKEN,
    _containers,
    _wait,
    docker_runtime,
    gpu_host,
    master,
    service,
)

pytestmark = pytest.mark.docker

#: the engine is shared: another DLC's container on a stand-in GPU makes the node refuse it and
#: DLC relaunch elsewhere while those GPUs drain (drain_timeout_s), so waits allow for that
SLOW = 180

#: exits on SIGTERM after writing a "checkpoint" (what a grace period is for)
SCRIPT = "trap 'echo checkpointed; exit 0' TERM; echo started; while true; do sleep 0.2; done"


def run(svc, token, *args) -> str:
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": token}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def submit(svc, token, gpus: int) -> str:
    out = run(svc, token, "submit", "--image", IMAGE, "--gpus", str(gpus), "--", "sh", "-c",
              SCRIPT)  # fmt: skip
    return out.split()[0]


def wait_until(check, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def wait_running(svc, job_id, *others):
    """Wait for a job to run; on a timeout say what the scheduler knew (histories, pools)."""
    try:
        return _wait(svc, job_id, {"running"}, timeout=SLOW)
    except AssertionError:
        facts = {j: svc.store.history(j)[-4:] for j in (job_id, *others)}
        raise AssertionError(
            f"{job_id} never ran: {facts}; pools {svc.core.pool_capacity()}; "
            f"drains {[svc.core.draining_gpus(a.agent_id) for a in svc.core.inventory.agents()]}"
        ) from None


def test_borrowed_job_is_preempted_with_grace_and_runs_again(service, docker_runtime):  # noqa: F811
    svc = service
    alice, bob = svc.store.add_token("alice"), svc.store.add_token("bob")
    run(svc, TOKEN, "groups", "create", "team-a")
    run(svc, TOKEN, "groups", "create", "team-b")
    run(svc, TOKEN, "groups", "add", "team-a", "alice")
    run(svc, TOKEN, "groups", "add", "team-b", "bob")
    for group in ("team-a", "team-b"):
        run(svc, TOKEN, "quota", "set", group, "--pool", "default", "--gpus", "2", "--cpus",
            "2", "--mem", "2G")  # fmt: skip
    first = submit(svc, alice, 2)
    wait_running(svc, first)
    borrowed = submit(svc, alice, 2)  # team-b's idle guarantee
    attempt = wait_running(svc, borrowed, first).attempt
    old_executor = svc.store.get_job(borrowed).tasks[0].executor_id
    container = wait_until(
        lambda: _containers(docker_runtime, svc, **{LABEL_EXECUTOR: old_executor}), 30, "container"
    )[0]
    output: list[bytes] = []  # the container's output, read until it stops
    reader = threading.Thread(
        target=lambda: output.extend(
            docker_runtime.client.api.logs(container.id, stream=True, follow=True)
        ),
        daemon=True,
    )
    reader.start()
    wait_until(lambda: b"started" in b"".join(output), 30, "the job to start")
    assert "team-a" in run(svc, TOKEN, "quota")

    lender = submit(svc, bob, 2)
    wait_running(svc, lender, borrowed)
    history = svc.store.history(borrowed)
    preempted = [m for _, state, m in history if state == "preempted"]
    assert preempted and preempted[0].startswith("preempted: team-b reclaims its guarantee")
    # SIGTERM first: the job wrote its checkpoint in the grace period
    reader.join(30)
    assert b"checkpointed" in b"".join(output)
    assert _containers(docker_runtime, svc, **{LABEL_EXECUTOR: old_executor}) == []
    again = svc.store.get_job(borrowed)
    assert again.state.value == "queued" and again.failures == 0
    requeued = [m for _, state, m in svc.store.history(borrowed) if state == "queued"]
    assert requeued[-1].endswith("queued again (no retry used)")
    queue = run(svc, alice, "queue")
    assert borrowed in queue and "team-a at its quota" in queue

    run(svc, bob, "kill", lender)
    job = wait_running(svc, borrowed, lender)
    assert job.attempt == attempt + 1 and job.failures == 0
    first_job = svc.store.get_job(first)
    live = _containers(docker_runtime, svc)
    executors = sorted(c.labels[LABEL_EXECUTOR] for c in live)
    assert executors == sorted([first_job.tasks[0].executor_id, job.tasks[0].executor_id])
    assert first_job.state.value == "running"  # guaranteed work is never touched
