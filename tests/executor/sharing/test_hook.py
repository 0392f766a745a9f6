"""TaskRunner with shares on a fake runtime: MPS daemon lifecycle, watchdog kill path, MIG."""

from __future__ import annotations

import time

import pytest

from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.mps import CONTROL, MpsManager
from dlc.executor.sharing.render import LABEL_SHARING
from dlc.scheduler.jobs.launch_spec import GpuShare, LaunchSpec

from ..fake_runtime import FakeRuntime
from ..test_task_runner import make as make_runner
from .h100 import CLIENT_1GIB_MIB, FakeH100Nvml
from .test_mps import FakeRunner

UUID = FakeH100Nvml().uuid


def make(tmp_path, runtime=None, **config):
    # a lock file of the test's own: the host-wide default is shared with other test runs
    return make_runner(tmp_path, runtime, claim_lock_path=str(tmp_path / "claim.lock"), **config)


def _data(share: GpuShare, job: str = "j1") -> str:
    return LaunchSpec(job_id=job, image="img:1", share=share, driver_version="580.159.04").encode()


def _hook(tmp_path, nvml=None, pids=None):
    runner = FakeRunner()
    hook = ShareHook(
        mps=MpsManager(str(tmp_path / "mps"), runner, base_env={}),
        nvml_factory=lambda: nvml,
        pids_of=lambda cid: (pids or {}).get(cid, set()),
        interval_s=0.05,
    )
    return hook, runner


def _wait_for(predicate, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def test_two_mps_shares_share_one_daemon_stopped_after_the_last(tmp_path):
    hook, runner = _hook(tmp_path)
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    fake.auto_exit = False
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("a", _data(GpuShare(0, UUID, 4096, 250, "mps"), "ja"))
    task_runner.launch("b", _data(GpuShare(0, UUID, 4096, 250, "mps"), "jb"))
    assert _wait_for(lambda: len(runtime.containers) == 2)
    starts = [c for c in runner.calls if c[0] == [CONTROL, "-d"]]
    assert len(starts) == 1
    kwargs = next(iter(runtime.containers.values()))["kwargs"]
    pipe = starts[0][1]["CUDA_MPS_PIPE_DIRECTORY"]
    assert kwargs["environment"]["CUDA_MPS_PIPE_DIRECTORY"] == pipe
    assert kwargs["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert kwargs["ipc_mode"] == "host" and kwargs["mounts"][-1]["Source"] == pipe
    assert kwargs["device_requests"][0]["DeviceIDs"] == [UUID]
    by_task = {box["kwargs"]["labels"]["dlc.task"]: cid for cid, box in runtime.containers.items()}
    first, second = by_task["a"], by_task["b"]
    runtime.finish(first, 0)
    assert _wait_for(lambda: "a" in [u[0] for u in sink.updates if u[1] == "TASK_FINISHED"])
    assert [c[2] for c in runner.calls].count("quit\n") == 0  # b still holds GPU 0
    runtime.finish(second, 0)
    task_runner.join(20)
    assert [c[2] for c in runner.calls].count("quit\n") == 1
    assert hook.mps.users(0) == frozenset()


def test_watchdog_ends_a_task_over_its_share_with_task_failed(tmp_path):
    nvml = FakeH100Nvml()
    pids = {}
    hook, _ = _hook(tmp_path, nvml, pids)
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    fake.auto_exit = False
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("t1", _data(GpuShare(2, UUID, 4096, 0, "watchdog")))
    assert _wait_for(lambda: "TASK_RUNNING" in sink.states())
    (cid,) = runtime.containers
    pids[cid] = {750, 751}
    nvml.procs = [(750, CLIENT_1GIB_MIB), (751, 3885)]  # 5.3 GiB on the only GPU (its UUID)
    assert sink.terminal.wait(20)
    task_runner.join(20)
    hook.close()
    _, state, message, reason, _ = sink.last()
    assert (state, reason) == ("TASK_FAILED", "REASON_CONTAINER_LIMITATION")
    assert message.startswith("used 5.3 GiB of its 4 GiB share on GPU 2")
    assert ("stop", cid, 10.0) in runtime.calls and ("remove", cid) in runtime.calls


def test_an_mps_share_that_drops_its_limit_is_ended_by_the_watchdog(tmp_path):
    """The MPS cap is a variable the job can unset (measured on the H100: a 2 GiB share then
    got 6 GiB); the watchdog ends such a task as it does on the ``watchdog`` backend."""
    nvml = FakeH100Nvml()
    pids = {}
    hook, _ = _hook(tmp_path, nvml, pids)
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    fake.auto_exit = False
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("t1", _data(GpuShare(2, UUID, 4096, 250, "mps")))
    assert _wait_for(lambda: "TASK_RUNNING" in sink.states())
    (cid,) = runtime.containers
    pids[cid] = {750, 751}
    nvml.procs = [(750, CLIENT_1GIB_MIB), (751, 3885)]  # 5.3 GiB: past the unset 4 GiB cap
    assert sink.terminal.wait(20)
    task_runner.join(20)
    hook.close()
    _, state, message, reason, _ = sink.last()
    assert (state, reason) == ("TASK_FAILED", "REASON_CONTAINER_LIMITATION")
    assert message.startswith("used 5.3 GiB of its 4 GiB share on GPU 2")


def test_mig_share_whose_instance_is_gone_fails_with_a_clear_message(tmp_path):
    hook, _ = _hook(tmp_path, FakeH100Nvml())  # MIG disabled, as on the real H100
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("t1", _data(GpuShare(0, "MIG-aaaa", 10240, 0, "mig")))
    task_runner.join(20)
    _, state, message, _, _ = sink.last()
    assert state == "TASK_FAILED"
    assert "MIG device MIG-aaaa does not exist on this agent" in message
    assert runtime.containers == {}


def test_simulated_gpus_start_nothing_and_say_so(tmp_path):
    hook, runner = _hook(tmp_path)
    task_runner, runtime, sink = make(tmp_path, shares=hook, gpu_style=GpuStyle.NONE)
    task_runner.launch("t1", _data(GpuShare(0, None, 4096, 250, "mps")))
    task_runner.join(20)
    assert sink.states()[-1] == "TASK_FINISHED" and runner.calls == []
    create = next(c for c in runtime.calls if c[0] == "create")
    assert create  # the container was created with the share labels
    assert hook.mps.users(0) == frozenset()


@pytest.mark.parametrize("backend", ["none", "watchdog"])
def test_share_labels_reach_the_container(tmp_path, backend):
    hook, _ = _hook(tmp_path, FakeH100Nvml())
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    fake.auto_exit = False
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("t1", _data(GpuShare(1, UUID, 2048, 500, backend)))
    assert _wait_for(lambda: len(runtime.containers) == 1)
    (box,) = runtime.containers.values()
    assert box["kwargs"]["labels"][LABEL_SHARING] == backend
    assert box["kwargs"]["environment"]["DLC_GPU_MEMORY_MIB"] == "2048"
    runtime.finish(next(iter(runtime.containers)), 0)
    task_runner.join(20)
    hook.close()


def test_mps_daemon_that_will_not_start_fails_the_task_in_one_line(tmp_path):
    def broken(argv, env, stdin):
        return 127, "sh: 1: nvidia-cuda-mps-control:\nnot found"

    hook = ShareHook(mps=MpsManager(str(tmp_path / "mps"), broken, base_env={}))
    fake = FakeRuntime(runtimes=("runc", "nvidia"))
    task_runner, runtime, sink = make(tmp_path, fake, shares=hook, gpu_style=GpuStyle.TOOLKIT)
    task_runner.launch("t1", _data(GpuShare(0, UUID, 4096, 250, "mps")))
    task_runner.join(20)
    _, state, message, _, _ = sink.last()
    assert state == "TASK_FAILED" and "\n" not in message
    assert message.startswith("MPS daemon for GPU 0 did not start (exit 127)")
    assert runtime.containers == {} and hook.mps.users(0) == frozenset()


def test_share_on_an_engine_without_gpu_support_names_the_shared_gpu(tmp_path):
    hook, _ = _hook(tmp_path)
    task_runner, _, sink = make(tmp_path, FakeRuntime(), shares=hook)  # auto style, runc only
    task_runner.launch("t1", _data(GpuShare(3, UUID, 4096, 0, "watchdog")))
    task_runner.join(20)
    _, state, message, _, _ = sink.last()
    assert state == "TASK_FAILED" and message.startswith("task wants GPUs [3]")


def test_bind_lists_container_pids_through_docker_top(tmp_path):
    class Api:
        def top(self, cid):
            assert cid == "c1"
            return {"Titles": ["UID", "PID", "CMD"], "Processes": [["0", "77", "python"]]}

    class Runtime:
        client = type("Client", (), {"api": Api()})()

        def stop(self, cid, grace_s):
            self.stopped = (cid, grace_s)

    runtime = Runtime()
    hook = ShareHook()
    hook.bind(runtime, 3.0)
    assert hook.pids_of("c1") == {77}
    hook.stop_container("c9")
    assert runtime.stopped == ("c9", 3.0)
