"""TaskRunner on the real engine: statuses, sandbox output, kill, shutdown, failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dlc.devices.nvidia.render import PROC_DRIVER
from dlc.executor.container_spec import ENGINE_MASKED_PATHS, LABEL_FRAMEWORK
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.tasks import launch as task_launch

TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST"}


class Sink:
    def __init__(self):
        self.updates = []
        self.cond = threading.Condition()

    def update(self, task_id, state, message=None, reason=None, labels=None):
        with self.cond:
            self.updates.append((task_id, state, message, reason, labels))
            self.cond.notify_all()

    def wait_for(self, state, timeout=30):
        with self.cond:
            assert self.cond.wait_for(lambda: state in self.states(), timeout), self.updates

    def states(self):
        return [u[1] for u in self.updates]

    def terminal(self):
        return [u for u in self.updates if u[1] in TERMINAL]


@pytest.fixture
def runner_for(docker_runtime, framework_id, fake_dev, tmp_path):
    def make(**config):
        sink = Sink()
        config.setdefault("gpu_style", GpuStyle.LEGACY)
        cfg = RunnerConfig(
            device_root=str(fake_dev),
            sandbox=str(tmp_path),
            driver_info=ProcDriverInfo(tmp_path / "no-driver"),
            **config,
        )
        return TaskRunner(docker_runtime, sink, framework_id, "ex-1", cfg), sink

    return make


def _data(image, **kw):
    kw.setdefault("job_id", "job-1")
    return LaunchSpec(image=image, **kw).encode()


def test_env_printing_container_finishes_with_output_in_sandbox(
    runner_for, busybox_image, docker_runtime, framework_id, tmp_path, driver_volume
):
    runner, sink = runner_for()
    spec = _data(
        busybox_image,
        command=("sh", "-c", "env; echo to-stderr >&2"),
        gpu_ids=(3, 1),
        gpu_minors=(3, 1),
        driver_version=driver_volume.removeprefix("nvidia_driver_"),
    )
    runner.launch("t-env", spec)
    runner.join(30)
    assert sink.states()[0] == "TASK_STARTING"
    assert sink.states()[-2:] == ["TASK_RUNNING", "TASK_FINISHED"]
    running = sink.updates[-2]
    assert len(running[4]["dlc.container_id"]) == 64
    stdout = (tmp_path / "stdout").read_text()
    assert "CUDA_VISIBLE_DEVICES=1,0" in stdout
    assert "DLC_GPU_HOST_IDS=3,1" in stdout
    assert "DLC_JOB_ID=job-1" in stdout
    assert (tmp_path / "stderr").read_text() == "to-stderr\n"
    assert "DLC_JOB_ID=job-1" in sink.terminal()[0][2]  # the last lines travel in the message
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []


def test_a_cpu_only_task_sees_no_gpu_even_from_a_cuda_image(
    runner_for, docker_runtime, tmp_path, driver_volume
):
    """A CPU-only job placed and built as the scheduler does, on an agent set up for GPUs
    (legacy style, its driver volume present, NVIDIA device nodes on the host): no device,
    no driver volume, and an image that says ``NVIDIA_VISIBLE_DEVICES=all`` (as CUDA base
    images do, which an engine whose default runtime is ``nvidia`` would honour) gets
    ``void``: every GPU hidden. Its ``AMD_VISIBLE_DEVICES=all``, which the AMD container
    runtime as the engine's default would honour, reads ``none`` (red-team finding 54)."""
    from tests.docker.conftest import _busybox_tar
    from tests.scheduler.helpers import job, offer, place

    image = "dlc-test/cuda-env:1"
    cuda_env = ["ENV NVIDIA_VISIBLE_DEVICES=all", "ENV CUDA_VISIBLE_DEVICES=0",
                "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                "ENV AMD_VISIBLE_DEVICES=all"]  # fmt: skip
    docker_runtime.client.api.import_image_from_data(
        _busybox_tar(), repository=image.split(":")[0], tag="1",
        changes=["ENV PATH=/bin", 'CMD ["/bin/sh"]', *cuda_env],
    )  # fmt: skip
    cpu_job = job("j-cpu", gpus=0, image=image, command=["sh", "-c", "env; ls /dev"])
    [placed] = place([offer("o1", "a1", [0, 1])], [cpu_job]).launches
    assert placed.gpu_ids == ()
    data = task_launch.launch_spec(cpu_job, placed).encode()
    runner, sink = runner_for(driver_version=driver_volume.removeprefix("nvidia_driver_"))
    runner.launch("t-cpu", data)
    runner.join(30)
    assert sink.states()[-1] == "TASK_FINISHED", sink.updates
    out = (tmp_path / "stdout").read_text().splitlines()
    assert "NVIDIA_VISIBLE_DEVICES=void" in out and "CUDA_VISIBLE_DEVICES=" in out
    assert "AMD_VISIBLE_DEVICES=none" in out
    assert "DLC_GPU_IDS=" in out
    assert not [line for line in out if line.startswith(("nvidia", "kfd", "dri"))], out
    assert not any(line.startswith(("LD_LIBRARY_PATH=/usr/local/nvidia", "DLC_GPU_HOST_IDS"))
                   for line in out)  # fmt: skip


def test_a_cpu_only_task_cannot_read_the_drivers_gpu_list(
    runner_for, docker_runtime, busybox_image, tmp_path, monkeypatch
):
    """Red-team finding 58 (docs/security.md): a CPU-only container read the host's
    ``/proc/driver/nvidia`` (every GPU's model, UUID, bus location and minor, the driver
    version), which the engine does not mask. It is masked now, with the engine's own masks
    kept. This host has no NVIDIA driver, so ``/proc/interrupts`` (where a GPU host lists each
    GPU's ``nvidia`` interrupt lines; this engine, Docker 20.10, leaves it readable by default)
    shows the masks at work: it reads empty."""
    from tests.scheduler.helpers import job, offer, place

    masks = []
    create = docker_runtime.create

    def recording(kwargs):
        container_id = create(kwargs)
        inspected = docker_runtime.client.api.inspect_container(container_id)
        masks.append(inspected["HostConfig"]["MaskedPaths"])
        return container_id

    monkeypatch.setattr(docker_runtime, "create", recording)
    cpu_job = job("j-mask", gpus=0, image=busybox_image,
                  command=["sh", "-c", "wc -c < /proc/interrupts"])  # fmt: skip
    [placed] = place([offer("o1", "a1", [0, 1])], [cpu_job]).launches
    runner, sink = runner_for()
    runner.launch("t-mask", task_launch.launch_spec(cpu_job, placed).encode())
    runner.join(30)
    assert sink.states()[-1] == "TASK_FINISHED", sink.updates
    assert PROC_DRIVER in masks[0] and set(ENGINE_MASKED_PATHS) <= set(masks[0])
    assert (tmp_path / "stdout").read_text().split() == ["0"]


def test_a_cpu_only_task_sees_no_drivers_procfs_and_no_interrupt_handlers(
    runner_for, docker_runtime, busybox_image, tmp_path
):
    """Red-team finding 60 (session 14): masking ``/proc/driver/nvidia`` left its sibling
    ``/proc/driver/nvidia-uvm``, whose ``gpus/`` folder holds, in release drivers, a link named
    by the UUID of every GPU any process has used since the module loaded and an ``info`` file
    with its name; and masking ``/proc/interrupts`` left ``/proc/irq/N/``, which names each
    line's handler (``nvidia`` on a GPU host) as a folder. A CPU-only container reads neither
    now: ``/proc/driver`` and ``/proc/irq`` are empty read-only folders. This host has no
    NVIDIA driver; its ``/proc/irq`` names its own handlers (the container saw them before)."""
    from tests.scheduler.helpers import job, offer, place

    host_handlers = {
        entry.name
        for line in Path("/proc/irq").iterdir()
        if line.is_dir()
        for entry in line.iterdir()
        if entry.is_dir()
    }
    assert host_handlers  # the host names some handler the container could read
    script = "ls /proc/irq /proc/irq/* /proc/driver; grep ' /proc/[di][ri]' /proc/self/mountinfo"
    cpu_job = job("j-irq", gpus=0, image=busybox_image, command=["sh", "-c", script])
    [placed] = place([offer("o1", "a1", [0, 1])], [cpu_job]).launches
    runner, sink = runner_for()
    runner.launch("t-irq", task_launch.launch_spec(cpu_job, placed).encode())
    runner.join(30)
    assert sink.states()[-1] == "TASK_FINISHED", sink.updates
    out = (tmp_path / "stdout").read_text()
    assert not host_handlers & set(out.split()), out
    mounts = [line.split() for line in out.splitlines() if " - tmpfs " in line]
    assert {m[4] for m in mounts} >= {"/proc/driver", "/proc/irq"}, out
    assert all(m[5].startswith("ro") for m in mounts), out


def test_failing_command_reports_exit_code_and_last_lines(runner_for, busybox_image):
    runner, sink = runner_for(gpu_style=GpuStyle.NONE)
    runner.launch(
        "t-fail", _data(busybox_image, command=("sh", "-c", "echo one; echo two; exit 3"))
    )
    runner.join(30)
    ((_, state, message, _, _),) = sink.terminal()
    assert state == "TASK_FAILED"
    assert message.startswith("exit code 3") and message.endswith("one | two")


def test_bad_command_is_explained(runner_for, busybox_image, docker_runtime, framework_id):
    runner, sink = runner_for(gpu_style=GpuStyle.NONE)
    runner.launch("t-bad", _data(busybox_image, command=("no-such-program",)))
    runner.join(30)
    ((_, state, message, reason, _),) = sink.terminal()
    assert (state, reason) == ("TASK_FAILED", "REASON_CONTAINER_LAUNCH_FAILED")
    assert "executable file not found" in message
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []


def test_unknown_image_is_explained(runner_for, local_registry):
    runner, sink = runner_for(gpu_style=GpuStyle.NONE)
    runner.launch("t-img", _data(f"{local_registry}/dlc-test/absent:1"))
    runner.join(30)
    ((_, state, message, _, _),) = sink.terminal()
    assert state == "TASK_FAILED"
    assert f"not found in registry {local_registry}" in message


def test_killed_task_container_is_gone(runner_for, busybox_image, docker_runtime, framework_id):
    runner, sink = runner_for(gpu_style=GpuStyle.NONE, grace_s=1)
    # the shell ignores SIGTERM, so only the SIGKILL after the grace period ends it
    command = ("sh", "-c", "trap '' TERM; while true; do sleep 1; done")
    runner.launch("t-kill", _data(busybox_image, command=command))
    sink.wait_for("TASK_RUNNING")
    started = time.monotonic()
    runner.kill("t-kill")
    sink.wait_for("TASK_KILLED")
    elapsed = time.monotonic() - started
    runner.join(30)
    assert 0.9 <= elapsed < 10
    assert [u[1] for u in sink.terminal()] == ["TASK_KILLED"]
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []


def test_shutdown_removes_every_container(runner_for, busybox_image, docker_runtime, framework_id):
    runner, sink = runner_for(gpu_style=GpuStyle.NONE, grace_s=0)
    for n in range(2):
        runner.launch(f"t-{n}", _data(busybox_image, command=("sleep", "300")))
    for n in range(2):
        with sink.cond:
            sink.cond.wait_for(
                lambda n=n: ("t-" + str(n), "TASK_RUNNING") in [u[:2] for u in sink.updates], 30
            )
    assert len(docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id})) == 2
    runner.shutdown()
    runner.shutdown()
    runner.join(30)
    assert docker_runtime.list_containers({LABEL_FRAMEWORK: framework_id}) == []
    assert sorted(u[0] for u in sink.terminal()) == ["t-0", "t-1"]
