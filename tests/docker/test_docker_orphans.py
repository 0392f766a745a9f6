"""Orphans: the reaper removes a killed executor's containers; `dlc cleanup` removes the rest."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_FRAMEWORK, TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuReservation, GpuStyle, render
from dlc.scheduler.jobs.launch_spec import LaunchSpec


def _run_container(runtime, image, framework_id, executor_id, task_id):
    spec = LaunchSpec(job_id="job-o", image=image, command=("sleep", "300"))
    identity = TaskIdentity(framework_id, executor_id, task_id, spec.job_id)
    kwargs = create_kwargs(spec, identity, render(GpuReservation(), GpuStyle.NONE))
    cid = runtime.create(kwargs)
    runtime.start(cid, image)
    return cid


def _wait_gone(runtime, labels, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not runtime.list_containers(labels):
            return True
        time.sleep(0.2)
    return False


#: runs the reaper with its poll sleep instrumented: it prints "looked again" after its second
#: look at the executor's pid found it alive, which proves it was watching (not still starting).
#: Its look for late creates after the death is 1 s, not 8 (tests/executor/test_reaper.py
#: covers that look; here the containers exist before the executor dies)
_NOTING_REAPER = """
import functools, sys, time
from dlc.executor import reaper
reaper.watch = functools.partial(reaper.watch, late_s=1.0)
_sleep, _calls = time.sleep, []
def _noting(seconds):
    _calls.append(seconds)
    if len(_calls) == 2:
        print("looked again", flush=True)
    _sleep(seconds)
time.sleep = _noting
sys.exit(reaper.main(sys.argv[1:]))
"""


def _read_line(proc, timeout=60.0) -> str:
    """The next line of ``proc``'s stdout, or "" after ``timeout`` or at its end."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().decode().strip() if ready else ""


def test_reaper_removes_containers_of_a_killed_executor(
    docker_runtime, busybox_image, framework_id
):
    # a stand-in executor process; the reaper watches its pid, as `dlc executor` arranges
    executor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    _run_container(docker_runtime, busybox_image, framework_id, "ex-dead", "t1")
    survivor = _run_container(docker_runtime, busybox_image, framework_id, "ex-alive", "t2")
    reaper = subprocess.Popen(
        [sys.executable, "-c", _NOTING_REAPER, "--pid", str(executor.pid),
         "--framework-id", framework_id, "--executor-id", "ex-dead", "--grace", "0"],
        start_new_session=True, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        # the reaper has looked at the live executor twice: it must not have removed anything
        assert _read_line(reaper) == "looked again"
        assert len(docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})) == 2
        executor.send_signal(signal.SIGKILL)
        executor.wait()
        assert reaper.wait(timeout=60) == 0
        remaining = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
        assert [c.id for c in remaining] == [survivor]
    finally:
        executor.kill()
        reaper.kill()


def test_cleanup_removes_by_framework_and_requires_a_selector(
    docker_runtime, busybox_image, framework_id
):
    for n in range(2):
        _run_container(docker_runtime, busybox_image, framework_id, f"ex-{n}", f"t{n}")
    runner = CliRunner()
    refused = runner.invoke(cli, ["cleanup"])
    assert refused.exit_code == 1 and "--all, --framework ID" in refused.output
    dry = runner.invoke(cli, ["cleanup", "--framework", framework_id, "--dry-run"])
    assert dry.exit_code == 0 and "2 container(s) found" in dry.output
    assert len(docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})) == 2
    done = runner.invoke(cli, ["cleanup", "--framework", framework_id, "--grace", "0"])
    assert done.exit_code == 0, done.output
    assert "2 container(s) removed" in done.output
    assert _wait_gone(docker_runtime, {LABEL_FRAMEWORK: framework_id})
