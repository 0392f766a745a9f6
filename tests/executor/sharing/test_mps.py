"""The per-GPU MPS daemons: started with the first share, stopped after the last (fake runner)."""

from __future__ import annotations

import threading

import pytest

from dlc.errors import ContainerError
from dlc.executor.sharing.mps import CONTROL, MpsManager
from dlc.scheduler.jobs.launch_spec import GpuShare

from .h100 import h100_gpu

UUID = h100_gpu()["uuid"]


class FakeRunner:
    """Records every command; ``fail`` makes the daemon start fail like a missing binary."""

    def __init__(self, fail: bool = False):
        self.calls = []
        self.fail = fail

    def __call__(self, argv, env, stdin):
        self.calls.append((argv, dict(env), stdin))
        if self.fail:
            return 127, "nvidia-cuda-mps-control: not found"
        return 0, ""


def _manager(tmp_path, runner):
    return MpsManager(str(tmp_path / "mps"), runner, base_env={"PATH": "/usr/bin"})


def test_one_daemon_per_gpu_with_its_own_pipe_and_log(tmp_path):
    runner = FakeRunner()
    mps = _manager(tmp_path, runner)
    first = mps.acquire("a", GpuShare(0, UUID, 4096, 250))
    second = mps.acquire("b", GpuShare(0, UUID, 4096, 250))
    other = mps.acquire("c", GpuShare(1, None, 1024, 0))
    assert first == second and first.pipe_dir != other.pipe_dir
    starts = [c for c in runner.calls if c[0] == [CONTROL, "-d"]]
    assert len(starts) == 2  # one per GPU, not one per share
    env0 = starts[0][1]
    assert env0["CUDA_MPS_PIPE_DIRECTORY"] == first.pipe_dir
    assert env0["CUDA_MPS_LOG_DIRECTORY"] == first.log_dir
    assert env0["CUDA_VISIBLE_DEVICES"] == UUID and env0["PATH"] == "/usr/bin"
    assert starts[1][1]["CUDA_VISIBLE_DEVICES"] == "1"
    assert (tmp_path / "mps" / "gpu0" / "pipe").is_dir()
    assert (tmp_path / "mps" / "gpu0" / "log").is_dir()


def test_quit_after_the_last_share_with_the_same_pipe(tmp_path):
    runner = FakeRunner()
    mps = _manager(tmp_path, runner)
    daemon = mps.acquire("a", GpuShare(0, UUID, 4096, 250))
    mps.acquire("b", GpuShare(0, UUID, 4096, 250))
    assert mps.release("a", 0) is False and mps.users(0) == {"b"}
    assert mps.release("b", 0) is True
    argv, env, stdin = runner.calls[-1]
    assert (argv, stdin) == ([CONTROL], "quit\n")
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == daemon.pipe_dir
    assert mps.release("b", 0) is False  # twice: nothing more to do
    mps.acquire("c", GpuShare(0, UUID, 1024, 0))  # the next share starts a fresh daemon
    assert [c[0] for c in runner.calls].count([CONTROL, "-d"]) == 2


def test_a_daemon_that_will_not_start_is_a_one_line_error_and_leaves_no_user(tmp_path):
    mps = _manager(tmp_path, FakeRunner(fail=True))
    with pytest.raises(ContainerError, match=r"MPS daemon for GPU 0 did not start \(exit 127\)"):
        mps.acquire("a", GpuShare(0, UUID, 4096, 250))
    assert mps.users(0) == frozenset()


def test_concurrent_first_shares_start_one_daemon(tmp_path):
    runner = FakeRunner()
    mps = _manager(tmp_path, runner)
    threads = [
        threading.Thread(target=mps.acquire, args=(f"t{i}", GpuShare(0, UUID, 512, 10)))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [c[0] for c in runner.calls] == [[CONTROL, "-d"]]
    assert len(mps.users(0)) == 8
