"""TaskRunner: status sequences, kill, shutdown and failures, on a fake runtime."""

from __future__ import annotations

import os
import threading
import time

import pytest

from dlc.executor.gpu_render import GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.scheduler.jobs.launch_spec import LaunchSpec

from .fake_runtime import FakeRuntime


class ListSink:
    def __init__(self):
        self.updates = []
        self.terminal = threading.Event()

    def update(self, task_id, state, message=None, reason=None, labels=None):
        self.updates.append((task_id, state, message, reason, labels))
        if state in ("TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST"):
            self.terminal.set()

    def states(self):
        return [u[1] for u in self.updates]

    def last(self):
        return self.updates[-1]


def make(tmp_path, runtime=None, **config):
    runtime = runtime or FakeRuntime()
    sink = ListSink()
    config.setdefault("driver_info", ProcDriverInfo(tmp_path / "no-driver"))
    runner = TaskRunner(runtime, sink, "fw", "ex", RunnerConfig(sandbox=str(tmp_path), **config))
    return runner, runtime, sink


def data(**kw):
    kw.setdefault("job_id", "j1")
    kw.setdefault("image", "img:1")
    return LaunchSpec(**kw).encode()


def test_success_reports_starting_running_finished_with_output(tmp_path):
    runner, runtime, sink = make(tmp_path)
    runner.launch("t1", data(command=("echo", "hello")))
    runner.join(5)
    states = sink.states()
    assert states[0] == "TASK_STARTING"
    assert states[-2:] == ["TASK_RUNNING", "TASK_FINISHED"]
    running = sink.updates[-2]
    assert running[4] == {"dlc.container_id": runtime.calls[1][1]}
    assert "hello" in sink.last()[2]
    assert (tmp_path / "stdout").read_text() == "hello\n"
    assert runtime.containers == {}  # removed after exit


def test_pull_progress_is_reported_as_starting_message(tmp_path):
    runner, _, sink = make(tmp_path)
    runner.launch("t1", data())
    runner.join(5)
    assert ("t1", "TASK_STARTING", "pulling img:1: 100% (1/1 MB)", None, None) in sink.updates


def test_nonzero_exit_fails_with_code_and_tail(tmp_path):
    runtime = FakeRuntime(output=("a", "b", "boom"))
    runtime.exit_code = 3
    runner, _, sink = make(tmp_path, runtime)
    runner.launch("t1", data())
    runner.join(5)
    _, state, message, _, _ = sink.last()
    assert state == "TASK_FAILED"
    assert message.startswith("exit code 3") and message.endswith("a | b | boom")


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        pytest.param(lambda rt: None, "not found in registry", id="unknown-image"),
        pytest.param(
            lambda rt: setattr(rt, "start_error", "bad command: executable file not found"),
            "executable file not found",
            id="bad-command",
        ),
    ],
)
def test_launch_failures_become_task_failed(tmp_path, setup, words):
    runtime = FakeRuntime(images=("img:1",))
    setup(runtime)
    runner, _, sink = make(tmp_path, runtime)
    image = "other:1" if words.startswith("not found") else "img:1"
    runner.launch("t1", data(image=image))
    runner.join(5)
    _, state, message, reason, _ = sink.last()
    assert (state, reason) == ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED")
    assert words in message
    assert runtime.containers == {}


def test_bad_task_data_fails_the_task(tmp_path):
    runner, _, sink = make(tmp_path)
    runner.launch("t1", "not base64!")
    runner.join(5)
    assert sink.last()[1] == "TASK_FAILED"
    assert "base64" in sink.last()[2]


def test_gpus_without_gpu_support_fail_clearly(tmp_path):
    runner, _, sink = make(tmp_path)
    runner.launch("t1", data(gpu_ids=(0, 1)))
    runner.join(5)
    assert sink.last()[1] == "TASK_FAILED"
    assert "no 'nvidia' runtime" in sink.last()[2]


@pytest.mark.parametrize(
    ("runtimes", "volumes", "expect_key"),
    [
        pytest.param(("runc", "nvidia"), (), "device_requests", id="auto-toolkit"),
        pytest.param(("runc",), ("nvidia_driver_535.1",), "devices", id="auto-legacy"),
    ],
)
def test_auto_style_follows_engine(tmp_path, runtimes, volumes, expect_key):
    runtime = FakeRuntime(runtimes=runtimes, volumes=volumes)
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime)
    runner.launch("t1", data(gpu_ids=(1,), gpu_minors=(4,), driver_version="535.1"))
    for _ in range(100):
        if runtime.containers:
            break
        threading.Event().wait(0.02)
    (box,) = runtime.containers.values()
    assert box["kwargs"][expect_key]
    runtime.finish(next(iter(runtime.containers)), 0)
    runner.join(5)
    assert sink.last()[1] == "TASK_FINISHED"


def test_kill_stops_with_grace_and_reports_killed_once(tmp_path):
    runtime = FakeRuntime()
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime, grace_s=7)
    runner.launch("t1", data())
    while "TASK_RUNNING" not in sink.states():
        threading.Event().wait(0.01)
    runner.kill("t1")
    runner.join(5)
    assert sink.terminal.wait(5)
    threading.Event().wait(0.1)
    terminal = [
        s
        for s in sink.states()
        if s.startswith("TASK_") and s not in ("TASK_STARTING", "TASK_RUNNING")
    ]
    assert terminal == ["TASK_KILLED"]
    assert any(c[0] == "stop" and c[2] == 7 for c in runtime.calls)
    assert runtime.containers == {}


def test_kill_uses_the_task_kill_policy_grace_over_the_runner_default(tmp_path):
    runtime = FakeRuntime()
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime, grace_s=7)
    runner.launch("t1", data(), grace_s=45.0)
    while "TASK_RUNNING" not in sink.states():
        threading.Event().wait(0.01)
    runner.kill("t1")
    runner.join(5)
    assert sink.terminal.wait(5)
    assert [c[2] for c in runtime.calls if c[0] == "stop"] == [45.0]


def test_kill_of_unknown_task_is_lost(tmp_path):
    runner, _, sink = make(tmp_path)
    runner.kill("nope")
    assert sink.last()[:2] == ("nope", "TASK_LOST")


def test_shutdown_twice_removes_containers_once(tmp_path):
    runtime = FakeRuntime()
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime)
    runner.launch("t1", data())
    while "TASK_RUNNING" not in sink.states():
        threading.Event().wait(0.01)
    first = runner.shutdown()
    second = runner.shutdown()
    runner.join(5)
    assert len(first) == 1 and second == []
    assert runtime.containers == {}
    assert sink.states().count("TASK_KILLED") == 1
    runner.launch("t2", data())
    assert sink.last()[:2] == ("t2", "TASK_FAILED")


def test_remove_orphans_only_touches_this_executor(tmp_path):
    runtime = FakeRuntime()
    mine = runtime.create({"labels": {"dlc.framework_id": "fw", "dlc.executor": "ex"}})
    other = runtime.create({"labels": {"dlc.framework_id": "fw", "dlc.executor": "other"}})
    runner, _, _ = make(tmp_path, runtime)
    assert runner.remove_orphans() == [mine]
    assert list(runtime.containers) == [other]


def test_redelivered_launch_does_not_start_a_second_container(tmp_path):
    runtime = FakeRuntime()
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime, gpu_style=GpuStyle.NONE)
    runner.launch("t1", data())
    runner.launch("t1", data())
    while "TASK_RUNNING" not in sink.states():
        threading.Event().wait(0.01)
    assert len(runtime.containers) == 1
    assert "TASK_FAILED" not in sink.states()
    runner.shutdown()


def test_configured_legacy_without_driver_volume_fails_instead_of_creating_one(tmp_path):
    runner, runtime, sink = make(tmp_path, gpu_style=GpuStyle.LEGACY, driver_version="535.1")
    runner.launch("t1", data(gpu_ids=(0,)))
    runner.join(5)
    assert sink.last()[1] == "TASK_FAILED"
    assert "no Docker volume nvidia_driver_535.1" in sink.last()[2]
    assert not any(c[0] == "create" for c in runtime.calls)


def test_driver_version_from_config_when_task_lacks_it(tmp_path):
    runtime = FakeRuntime(volumes=("nvidia_driver_470.1",))
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime, gpu_style=GpuStyle.LEGACY, driver_version="470.1")
    runner.launch("t1", data(gpu_ids=(0,)))
    while not runtime.containers:
        threading.Event().wait(0.01)
    ((cid, box),) = runtime.containers.items()
    assert "nvidia_driver_470.1" in box["kwargs"]["volumes"]
    runtime.finish(cid, 0)
    runner.join(5)
    assert sink.last()[1] == "TASK_FINISHED"


class OrderSink(ListSink):
    """Records, with each update, which containers the runtime still holds."""

    def __init__(self, runtime):
        super().__init__()
        self.runtime = runtime
        self.live_at_terminal = None

    def update(self, task_id, state, message=None, reason=None, labels=None):
        if state in ("TASK_FINISHED", "TASK_FAILED", "TASK_KILLED"):
            self.live_at_terminal = dict(self.runtime.containers)
        super().update(task_id, state, message, reason, labels)


@pytest.mark.parametrize("exit_code", [0, 3])
def test_container_is_removed_before_the_terminal_update(tmp_path, exit_code):
    runtime = FakeRuntime()
    runtime.exit_code = exit_code
    sink = OrderSink(runtime)
    config = RunnerConfig(sandbox=str(tmp_path), driver_info=ProcDriverInfo(tmp_path / "x"))
    runner = TaskRunner(runtime, sink, "fw", "ex", config)
    runner.launch("t1", data(command=("true",)))
    runner.join(5)
    assert sink.live_at_terminal == {}  # a terminal state means the GPUs are free


def test_containers_carry_gpu_and_executor_pid_labels(tmp_path):
    runner, runtime, sink = make(tmp_path, gpu_style=GpuStyle.NONE)
    runtime.auto_exit = False
    runner.launch("t1", data(command=("sleep", "9"), gpu_ids=(2, 0)))
    deadline = time.monotonic() + 5
    while not runtime.containers and time.monotonic() < deadline:
        time.sleep(0.01)
    (box,) = runtime.containers.values()
    labels = box["kwargs"]["labels"]
    assert labels["dlc.gpus"] == "2,0"
    assert labels["dlc.executor_pid"].startswith(f"{os.getpid()}:")
    runner.shutdown()


def test_a_repeated_kill_during_the_grace_period_sends_no_second_sigterm(tmp_path):
    """Seen on ``dlc local``: a preempted job printed "got SIGTERM, checkpointing" twice, its
    handler cut short by a second SIGTERM when the kill was sent again within the grace."""

    class SlowStop(FakeRuntime):
        def __init__(self):
            super().__init__()
            self.in_grace, self.grace_over = threading.Event(), threading.Event()

        def stop(self, cid, grace_s):
            self.calls.append(("stop", cid, grace_s))
            self.in_grace.set()  # SIGTERM sent: the container checkpoints now
            self.grace_over.wait(5)
            if cid in self.containers and not self.containers[cid]["done"].is_set():
                self.finish(cid, 143)

    runtime = SlowStop()
    runtime.auto_exit = False
    runner, _, sink = make(tmp_path, runtime, grace_s=7)
    runner.launch("t1", data())
    while "TASK_RUNNING" not in sink.states():
        threading.Event().wait(0.01)
    runner.kill("t1")
    assert runtime.in_grace.wait(5)
    runner.kill("t1")  # the scheduler sends the kill again
    runtime.grace_over.set()
    runner.join(5)
    assert sink.terminal.wait(5)
    assert [c[0] for c in runtime.calls].count("stop") == 1
    assert sink.states().count("TASK_KILLED") == 1
