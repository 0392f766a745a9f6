"""``dlc executor``: the Mesos executor that runs DLC jobs as Docker containers.

The Mesos agent starts it (the scheduler's ExecutorInfo runs ``<python> -m dlc executor``);
people run it only to debug. See :mod:`dlc.executor.executor` for the MESOS_* environment.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from dlc.errors import DlcError
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.loopback_guard import DEFAULT_OPEN_PORTS, DEFAULT_UIDS


@click.command(name="executor")
@click.option(
    "--gpu-style",
    type=click.Choice([s.value for s in GpuStyle]),
    default=lambda: os.environ.get("DLC_GPU_STYLE", "auto"),
    show_default="auto, or $DLC_GPU_STYLE",
    help="How containers get GPUs: toolkit (NVIDIA container toolkit), legacy "
    "(nvidia-docker v1 volume + devices), none, or auto (what the engine supports).",
)
@click.option(
    "--gpu-vendor",
    type=click.Choice(["nvidia", "amd"]),
    default=lambda: os.environ.get("DLC_GPU_VENDOR", "nvidia"),
    show_default="nvidia, or $DLC_GPU_VENDOR",
    help="Whose GPUs this agent has; amd gives containers /dev/kfd and their GPUs' "
    "/dev/dri render nodes (the device backend, dlc/devices/).",
)
@click.option(
    "--device-root",
    default=lambda: os.environ.get("DLC_DEVICE_ROOT", "/dev"),
    show_default="/dev, or $DLC_DEVICE_ROOT",
    help="Host directory holding the nvidia* device nodes (legacy style).",
)
@click.option(
    "--driver-version",
    default=lambda: os.environ.get("DLC_DRIVER_VERSION") or None,
    help="NVIDIA driver version to assume when the task does not carry one "
    "[default: $DLC_DRIVER_VERSION, else /proc/driver/nvidia/version].",
)
@click.option(
    "--grace",
    type=float,
    default=None,
    help="Seconds between SIGTERM and SIGKILL when stopping a container "
    "[default: MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD minus 1 s, else 10].",
)
@click.option(
    "--network",
    "network_mode",
    default=lambda: os.environ.get("DLC_NETWORK_MODE", "bridge"),
    show_default="bridge, or $DLC_NETWORK_MODE",
    help="Docker network mode of task containers (bridge, host, none).",
)
@click.option(
    "--loopback-guard",
    type=click.Choice(["enforce", "warn", "off"]),
    default=lambda: os.environ.get("DLC_LOOPBACK_GUARD", "warn"),
    show_default="warn, or $DLC_LOOPBACK_GUARD",
    help="Before a host-network container starts: enforce installs the nftables table that "
    "keeps job uids off 127.0.0.0/8 and ::1 (and fails the task if it cannot), warn logs when "
    "it is missing, off does nothing (docs/install.md).",
)
@click.option(
    "--loopback-guard-uids",
    default=lambda: os.environ.get("DLC_LOOPBACK_GUARD_UIDS", DEFAULT_UIDS),
    show_default=f"{DEFAULT_UIDS}, or $DLC_LOOPBACK_GUARD_UIDS",
    help="The uids (a number or LOW-HIGH) the loopback guard holds: those containers run as.",
)
@click.option(
    "--loopback-guard-ports",
    default=lambda: os.environ.get("DLC_LOOPBACK_GUARD_PORTS", ",".join(DEFAULT_OPEN_PORTS)),
    show_default=f"{','.join(DEFAULT_OPEN_PORTS)}, or $DLC_LOOPBACK_GUARD_PORTS",
    help="Loopback ports that stay open to those uids: DNS and the agent's Mesos port range.",
)
@click.option(
    "--memlock-unlimited",
    is_flag=True,
    help="Run containers with `ulimit -l unlimited` (NCCL over RDMA; needs an engine "
    "allowed to raise rlimits).",
)
@click.option(
    "--reaper/--no-reaper",
    default=True,
    show_default=True,
    help="Start a watcher that removes this executor's containers if the executor is killed.",
)
@click.option(
    "--ack-timeout",
    type=float,
    default=20.0,
    show_default=True,
    help="Seconds to wait for the agent to acknowledge the last terminal update before exiting.",
)
@click.option(
    "--gpu-sample-interval",
    type=click.FloatRange(min=0),
    default=lambda: os.environ.get("DLC_GPU_SAMPLE_S") or "10",
    show_default="10, or $DLC_GPU_SAMPLE_S",
    help="Seconds between NVML samples of running tasks' GPUs (utilisation, memory) reported "
    "to the scheduler; 0 turns sampling off. Nothing is sampled without NVML or with "
    "--gpu-style none.",
)
def command(
    gpu_style,
    gpu_vendor,
    device_root,
    driver_version,
    grace,
    network_mode,
    loopback_guard,
    loopback_guard_uids,
    loopback_guard_ports,
    memlock_unlimited,
    reaper,
    ack_timeout,
    gpu_sample_interval,
):
    """Run the DLC Mesos executor (reads MESOS_* variables set by the agent)."""
    from dlc.executor import reaper as reaper_mod
    from dlc.executor.executor import (
        DriverSink,
        grace_from_env,
        make_driver,
        make_executor_class,
        recovery_timeout_from_env,
        serve,
    )
    from dlc.executor.lifecycle import ExecutorLifecycle
    from dlc.executor.loopback_guard import GuardMode, GuardSettings, LoopbackGuard, port_list
    from dlc.executor.runtime import DockerRuntime
    from dlc.executor.task_runner import RunnerConfig, TaskRunner
    from dlc.executor.usage import UsageSampler, load_nvml

    missing = [
        v
        for v in ("MESOS_FRAMEWORK_ID", "MESOS_EXECUTOR_ID", "MESOS_AGENT_ENDPOINT")
        if not os.environ.get(v)
    ]
    if missing:
        raise DlcError(f"{', '.join(missing)} not set: `dlc executor` is started by a Mesos agent")
    framework_id = os.environ["MESOS_FRAMEWORK_ID"]
    executor_id = os.environ["MESOS_EXECUTOR_ID"]
    sandbox = os.environ.get("MESOS_SANDBOX") or os.environ.get("MESOS_DIRECTORY") or os.getcwd()
    try:
        _configure_logging(os.path.join(sandbox, "dlc-executor.log"))
    except OSError as exc:
        raise DlcError(
            f"MESOS_SANDBOX {sandbox}: cannot write dlc-executor.log there ({exc.strerror})"
        ) from None
    config = RunnerConfig(
        gpu_style=GpuStyle(gpu_style),
        gpu_vendor=gpu_vendor,
        device_root=device_root,
        driver_version=driver_version,
        grace_s=grace if grace is not None else grace_from_env(),
        network_mode=network_mode,
        memlock_unlimited=memlock_unlimited,
        sandbox=sandbox,
        loopback_guard=LoopbackGuard(
            GuardMode(loopback_guard),
            GuardSettings(loopback_guard_uids, port_list(loopback_guard_ports)),
        ),
        # set by `dlc local` for simulated agents (stand-in AMD device nodes included)
        simulated_gpus=os.environ.get("DLC_SIMULATED_GPUS") == "1",
        usage=UsageSampler(load_nvml, interval_s=gpu_sample_interval)
        if gpu_style != GpuStyle.NONE.value and gpu_sample_interval > 0
        else None,
    )
    lifecycle = ExecutorLifecycle(
        ack_timeout_s=ack_timeout, recovery_timeout_s=recovery_timeout_from_env()
    )
    sink = DriverSink(lifecycle)
    runner = TaskRunner(DockerRuntime(), sink, framework_id, executor_id, config)
    if reaper:
        reaper_mod.spawn(framework_id, executor_id, os.path.join(sandbox, "dlc-reaper.log"))
    executor = make_executor_class()(runner, sink, lifecycle)
    driver = make_driver(executor)
    sink.driver = driver
    # returns when the last task ended and was acknowledged, the agent shut the executor
    # down, or the agent stayed unreachable past the recovery timeout
    serve(driver, executor)


def _configure_logging(path: str) -> None:
    """Executor log lines go to ``dlc-executor.log`` in the sandbox; only warnings to stderr.

    The sandbox ``stderr`` file carries the container's own stderr (what ``dlc logs`` shows),
    so the executor keeps its chatter out of it.
    """
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    to_file = logging.FileHandler(path)
    to_file.setFormatter(fmt)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(fmt)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(to_file)
    root.addHandler(to_stderr)
