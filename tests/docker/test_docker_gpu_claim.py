"""One container per GPU on the real engine: orphans of a SIGKILLed executor are removed before a
new container on the same GPUs starts (checked with ``docker events``); a live executor's
container on the same GPU makes the new task fail instead of overlapping, whether it holds the
GPU whole or a share of it (shares of one GPU are no conflict for each other)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from dlc.executor.container_spec import LABEL_FRAMEWORK
from dlc.executor.gpu_claim import LABEL_EXECUTOR_PID, LABEL_GPUS
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.render import LABEL_SHARE
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.scheduler.jobs.launch_spec import GpuShare, LaunchSpec
from tests.docker.test_docker_task_runner import Sink

#: a stand-alone "executor": one TaskRunner running `sleep 300` on GPUs 1 and 2, no reaper
CHILD = textwrap.dedent(
    """
    import sys, time
    from dlc.executor.gpu_render import GpuStyle
    from dlc.scheduler.jobs.launch_spec import LaunchSpec
    from dlc.executor.runtime import DockerRuntime
    from dlc.executor.task_runner import RunnerConfig, TaskRunner

    class Print:
        def update(self, task_id, state, message=None, reason=None, labels=None):
            print(state, message, flush=True)

    framework_id, image, sandbox = sys.argv[1:4]
    config = RunnerConfig(gpu_style=GpuStyle.NONE, sandbox=sandbox, grace_s=0)
    runner = TaskRunner(DockerRuntime(), Print(), framework_id, "ex-old", config)
    spec = LaunchSpec(image=image, job_id="old", command=("sleep", "300"), gpu_ids=(1, 2))
    runner.launch("task-old", spec.encode())
    time.sleep(600)
    """
)


def _runner(docker_runtime, framework_id, tmp_path, executor_id):
    sink = Sink()
    config = RunnerConfig(gpu_style=GpuStyle.NONE, sandbox=str(tmp_path), grace_s=0)
    return TaskRunner(docker_runtime, sink, framework_id, executor_id, config), sink


def _wait_running(docker_runtime, framework_id, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
        if found and found[0].status == "running":
            return found[0]
        time.sleep(0.2)
    raise AssertionError("the old container never ran")


def _events(docker_runtime, framework_id, since):
    """(time_nano, action, container id) of the framework's container events, in order."""
    events = docker_runtime.client.events(
        since=since,
        until=int(time.time()) + 1,
        filters={"label": f"{LABEL_FRAMEWORK}={framework_id}", "type": "container"},
        decode=True,
    )
    return [(e["timeNano"], e["Action"], e["id"]) for e in events]


def test_orphan_of_a_killed_executor_is_gone_before_the_new_container_starts(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    since = int(time.time()) - 1
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, framework_id, busybox_image, str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        old = _wait_running(docker_runtime, framework_id)
        assert old.labels[LABEL_GPUS] == "1,2"
        assert old.labels[LABEL_EXECUTOR_PID].startswith(f"{child.pid}:")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    # the executor is gone, its container still runs: an orphan holding GPUs 1 and 2
    runner, sink = _runner(docker_runtime, framework_id, tmp_path, "ex-new")
    spec = LaunchSpec(image=busybox_image, job_id="new", command=("true",), gpu_ids=(2, 3))
    runner.launch("task-new", spec.encode())
    sink.wait_for("TASK_FINISHED", timeout=90)
    runner.join(30)
    messages = [u[2] or "" for u in sink.updates]
    assert any("removing orphan container" in m for m in messages), messages
    events = _events(docker_runtime, framework_id, since)
    old_gone = [t for t, action, cid in events if cid == old.id and action == "destroy"]
    new_started = [t for t, action, cid in events if cid != old.id and action == "start"]
    assert old_gone and new_started, events
    assert max(old_gone) < min(new_started), events  # never two containers on GPU 2


def test_live_executors_container_on_the_same_gpu_fails_the_new_task(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    first, first_sink = _runner(docker_runtime, framework_id, tmp_path, "ex-a")
    busy = LaunchSpec(image=busybox_image, job_id="a", command=("sleep", "300"), gpu_ids=(0, 1))
    first.launch("task-a", busy.encode())
    first_sink.wait_for("TASK_RUNNING", timeout=60)
    second, sink = _runner(docker_runtime, framework_id, tmp_path, "ex-b")
    spec = LaunchSpec(image=busybox_image, job_id="b", command=("true",), gpu_ids=(1,))
    second.launch("task-b", spec.encode())
    sink.wait_for("TASK_FAILED", timeout=60)
    (failed,) = sink.terminal()
    assert "GPU double assignment refused" in failed[2] and "GPUs [1]" in failed[2], failed
    assert "\n" not in failed[2]
    (still,) = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
    assert still.status == "running"  # the first task was left alone
    first.shutdown()
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []


def test_a_share_claims_its_gpu_against_whole_gpu_tasks_not_other_shares(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    """Shares of GPU 0 run side by side; a whole-GPU task on GPU 0 beside them is refused."""
    share = GpuShare(0, None, 1024, 0, "none")
    first, first_sink = _runner(docker_runtime, framework_id, tmp_path, "ex-a")
    busy = LaunchSpec(image=busybox_image, job_id="a", command=("sleep", "300"), share=share)
    first.launch("task-a", busy.encode())
    first_sink.wait_for("TASK_RUNNING", timeout=60)
    (running,) = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
    assert running.labels[LABEL_SHARE].startswith("0:1024:")
    beside, beside_sink = _runner(docker_runtime, framework_id, tmp_path, "ex-b")
    other = LaunchSpec(image=busybox_image, job_id="b", command=("true",), share=share)
    beside.launch("task-b", other.encode())
    beside_sink.wait_for("TASK_FINISHED", timeout=60)  # a second share of GPU 0 is no conflict
    whole, sink = _runner(docker_runtime, framework_id, tmp_path, "ex-c")
    spec = LaunchSpec(image=busybox_image, job_id="c", command=("true",), gpu_ids=(0,))
    whole.launch("task-c", spec.encode())
    sink.wait_for("TASK_FAILED", timeout=60)
    (failed,) = sink.terminal()
    assert "GPU double assignment refused" in failed[2], failed
    assert "holds a share of GPU [0]" in failed[2], failed
    (still,) = docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})
    assert still.id == running.id and still.status == "running"  # the share was left alone
    first.shutdown()
    beside.shutdown()
    whole.shutdown()


def test_an_image_label_does_not_make_a_task_a_share(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    """Docker copies an image's labels onto its containers: a user's image labelled
    ``dlc.gpu_share=0:...`` running a CPU-only task must not block GPU 0 for other tenants'
    whole-GPU tasks (the executor writes the label on every container, empty when no share)."""
    from tests.docker.conftest import _busybox_tar

    image = "dlc-test/share-label:1"
    docker_runtime.client.api.import_image_from_data(
        _busybox_tar(), repository=image.split(":")[0], tag="1",
        changes=["ENV PATH=/bin", 'CMD ["/bin/sh"]', f"LABEL {LABEL_SHARE}=0:1:1:none"],
    )  # fmt: skip
    hostile, hostile_sink = _runner(docker_runtime, framework_id, tmp_path, "ex-h")
    cpu_only = LaunchSpec(image=image, job_id="h", command=("sleep", "300"))
    hostile.launch("task-h", cpu_only.encode())
    hostile_sink.wait_for("TASK_RUNNING", timeout=60)
    whole, sink = _runner(docker_runtime, framework_id, tmp_path, "ex-w")
    spec = LaunchSpec(image=busybox_image, job_id="w", command=("true",), gpu_ids=(0,))
    whole.launch("task-w", spec.encode())
    with sink.cond:
        assert sink.cond.wait_for(sink.terminal, 60), sink.updates
    (ended,) = sink.terminal()
    assert ended[1] == "TASK_FINISHED", ended  # not "holds a share of GPU [0]"
    hostile.shutdown()
    whole.shutdown()
