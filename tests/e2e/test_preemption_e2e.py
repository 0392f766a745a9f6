"""Preemption end to end: quotas set with the CLI, a borrowed job stopped with SIGTERM and the
POLICY's grace period (TaskInfo.kill_policy, longer than the executor's ``--grace 1``) when the
lender needs its guarantee, its container gone, run again later; nothing lost or launched twice.
On DLC's emulator and the REAL Mesos 1.11.0 master (marker ``mesos``), with the real Docker
engine (marker ``docker``).

The executor runs with ``--gpu-style none``: its GPU claim counts only this framework's
containers on this agent, so other tests' containers on the shared engine (holding the same
stand-in GPU ids) cannot make the node refuse a launch, and the waits can stay short.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK
from tests.e2e.test_docker_e2e import (  # noqa: F401  (fixtures)
    IMAGE,
    TOKEN,
    _containers,
    _wait,
    docker_runtime,
    master,
)

pytestmark = pytest.mark.docker

#: launches are never refused (see the module doc): a job runs within seconds
SLOW = 60

#: the policy's grace period; the executor's own --grace is 1 s
GRACE_S = 8

#: on SIGTERM takes 2 s to write a "checkpoint", then exits: only a grace period longer than
#: the executor's 1 s (the policy's, sent as the task's kill_policy) lets it finish
SCRIPT = (
    "trap 'sleep 2; echo checkpointed; exit 0' TERM; echo started; while true; do sleep 0.2; done"
)


@pytest.fixture
def service(master, docker_runtime, tmp_path):  # noqa: F811
    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig

    address, sandbox_roots = master
    command = f"{sys.executable} -m dlc executor --gpu-style none --grace 1"
    config = ServiceConfig(master=address, sandbox_roots=sandbox_roots, db=str(tmp_path / "db"),
                           api_port=0, executor=ExecutorConfig(command=command),
                           admin_token=TOKEN)  # fmt: skip
    svc = SchedulerService(config)
    svc.start()
    assert svc.framework.registered.wait(30), "framework did not register"
    yield svc
    framework_id = svc.core.framework_id
    svc.stop()
    docker_runtime.remove_all(docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}), 0)


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
    svc.store.set_grace(GRACE_S, "admin")  # read with the policy on the next admin change
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
    assert f"preemption grace {GRACE_S} s" in run(svc, TOKEN, "quota")

    lender = submit(svc, bob, 2)
    wait_running(svc, lender, borrowed)
    history = svc.store.history(borrowed)
    preempted = [m for _, state, m in history if state == "preempted"]
    assert preempted and preempted[0].startswith("preempted: team-b reclaims its guarantee")
    # SIGTERM first: the job wrote its checkpoint in the policy's grace period (2 s > --grace 1)
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
