"""Every GPU-share backend rendered into a real container (create, docker inspect, remove).

The engine here has no GPU: the toolkit style's DeviceRequest is checked in the inspected
config (creating it needs no NVIDIA runtime), the legacy style runs against stand-in device
nodes, and the MPS pipe directory is a plain folder standing in for the daemon's.
"""

from __future__ import annotations

import os
import threading

from dlc.executor.container_spec import TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.sharing.hook import ShareHook
from dlc.executor.sharing.mps import CONTROL, MpsManager
from dlc.executor.sharing.render import LABEL_SHARE, LABEL_SHARING, apply_share, render_share
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.scheduler.jobs.launch_spec import GpuShare, LaunchSpec
from tests.executor.sharing.h100 import FakeH100Nvml

UUID = "GPU-094dfacd-6ee2-c0d6-540b-1740f12448d1"  # the real H100's
MIG = "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"


def _create(runtime, image, framework_id, share, style, **render_kw):
    spec = LaunchSpec(job_id="job-s", image=image, cpus=0.5, mem_mib=96, share=share)
    identity = TaskIdentity(framework_id, "ex-1", f"{framework_id}.s", spec.job_id)
    args = render_share(share, style, **render_kw)
    kwargs = apply_share(create_kwargs(spec, identity, args.gpu, runtime.image_env(image)), args)
    cid = runtime.create(kwargs)
    return cid, runtime.client.api.inspect_container(cid)


def _env(inspect):
    return dict(e.split("=", 1) for e in inspect["Config"]["Env"])


def test_mps_toolkit_share_in_docker_inspect(docker_runtime, busybox_image, framework_id, tmp_path):
    pipe = tmp_path / "mps" / "gpu0" / "pipe"
    pipe.mkdir(parents=True)
    share = GpuShare(0, UUID, 4096, 250, "mps")
    _, inspect = _create(
        docker_runtime, busybox_image, framework_id, share, GpuStyle.TOOLKIT, pipe_dir=str(pipe)
    )
    host = inspect["HostConfig"]
    (request,) = host["DeviceRequests"]
    assert request["Driver"] == "nvidia" and request["DeviceIDs"] == [UUID]
    assert host["IpcMode"] == "host"
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    assert mounts[str(pipe)]["Source"] == str(pipe) and mounts[str(pipe)]["RW"] is True
    env = _env(inspect)
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(pipe)
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_VISIBLE_DEVICES"] == UUID == env["NVIDIA_VISIBLE_DEVICES"]
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and env["DLC_GPU_MEMORY_MIB"] == "4096"
    labels = inspect["Config"]["Labels"]
    assert (labels[LABEL_SHARE], labels[LABEL_SHARING]) == ("0:4096:250:mps", "mps")


def test_mps_legacy_share_starts_with_host_ipc_and_its_device(
    docker_runtime, busybox_image, fake_dev, framework_id, driver_volume, tmp_path
):
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    share = GpuShare(1, None, 2048, 500, "mps", gpu_minor=5)
    cid, inspect = _create(
        docker_runtime,
        busybox_image,
        framework_id,
        share,
        GpuStyle.LEGACY,
        driver_version=driver_volume.removeprefix("nvidia_driver_"),
        pipe_dir=str(pipe),
        device_root=str(fake_dev),
    )
    devices = [d["PathInContainer"] for d in inspect["HostConfig"]["Devices"]]
    assert devices == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia5"]
    assert inspect["HostConfig"]["IpcMode"] == "host"
    # the engine starts it with host IPC and the stand-in devices (the image's default command)
    docker_runtime.client.api.start(cid)
    assert docker_runtime.wait(cid).exit_code == 0
    spec_env = _env(inspect)
    assert spec_env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert spec_env["CUDA_VISIBLE_DEVICES"] == "0"  # no UUID known: the only GPU, ordinal 0


def test_watchdog_share_in_docker_inspect(docker_runtime, busybox_image, framework_id):
    share = GpuShare(2, UUID, 4096, 0, "watchdog")
    _, inspect = _create(docker_runtime, busybox_image, framework_id, share, GpuStyle.TOOLKIT)
    env = _env(inspect)
    assert not any(k.startswith("CUDA_MPS") for k in env)
    assert env["DLC_GPU_SHARING"] == "watchdog" and env["DLC_GPU_MEMORY_MIB"] == "4096"
    assert inspect["HostConfig"]["IpcMode"] != "host"
    assert inspect["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == [UUID]


def test_mig_share_in_docker_inspect(docker_runtime, busybox_image, framework_id):
    share = GpuShare(0, MIG, 10240, 0, "mig")
    _, inspect = _create(docker_runtime, busybox_image, framework_id, share, GpuStyle.TOOLKIT)
    assert inspect["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == [MIG]
    assert _env(inspect)["NVIDIA_VISIBLE_DEVICES"] == MIG


def test_none_share_in_docker_inspect(docker_runtime, busybox_image, framework_id):
    share = GpuShare(1, UUID, 0, 500, "none")
    _, inspect = _create(docker_runtime, busybox_image, framework_id, share, GpuStyle.TOOLKIT)
    env = _env(inspect)
    assert env["DLC_GPU_ISOLATION"] == "time-slicing: no memory or compute limits"
    assert inspect["Config"]["Labels"][LABEL_SHARING] == "none"


class _Sink:
    def __init__(self):
        self.updates = []
        self.done = threading.Event()

    def update(self, task_id, state, message=None, reason=None, labels=None):
        self.updates.append((state, message))
        if state in ("TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST"):
            self.done.set()


def test_task_runner_mps_share_end_to_end_on_the_engine(
    docker_runtime, busybox_image, fake_dev, framework_id, driver_volume, tmp_path
):
    """The runner starts the (fake) daemon, the container reads the pipe folder, MPS quits."""
    calls = []

    def fake_control(argv, env, stdin):
        calls.append((argv, env.get("CUDA_MPS_PIPE_DIRECTORY"), stdin))
        if argv == [CONTROL, "-d"]:  # what the daemon would leave in its pipe folder
            with open(os.path.join(env["CUDA_MPS_PIPE_DIRECTORY"], "control"), "w") as f:
                f.write("pipe\n")
        return 0, ""

    root = tmp_path / "mps"
    # MPS shares are watched through NVML too (red-team #23): the H100 fake stands in for it
    nvml = FakeH100Nvml()
    hook = ShareHook(
        mps=MpsManager(str(root), fake_control, base_env={}), nvml_factory=lambda: nvml
    )
    sink = _Sink()
    config = RunnerConfig(
        gpu_style=GpuStyle.LEGACY,
        device_root=str(fake_dev),
        sandbox=str(tmp_path),
        driver_info=ProcDriverInfo(tmp_path / "no-driver"),
        driver_version=driver_volume.removeprefix("nvidia_driver_"),
        shares=hook,
    )
    runner = TaskRunner(docker_runtime, sink, framework_id, "ex-1", config)
    share = GpuShare(0, None, 4096, 250, "mps", gpu_minor=0)
    command = (
        "sh",
        "-c",
        "cat $CUDA_MPS_PIPE_DIRECTORY/control; echo $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    )
    spec = LaunchSpec(job_id="job-s", image=busybox_image, command=command, share=share)
    runner.launch(f"{framework_id}.mps", spec.encode())
    assert sink.done.wait(60), sink.updates
    runner.join(10)
    state, message = sink.updates[-1]
    assert state == "TASK_FINISHED", message
    assert "pipe" in message and "0=4096M" in message
    pipe = str(root / "gpu0" / "pipe")
    assert calls == [([CONTROL, "-d"], pipe, None), ([CONTROL], pipe, "quit\n")]
