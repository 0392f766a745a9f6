"""The launch contract end to end on the real engine: the allocator's GPUs, by device minor.

An agent whose ``dlc_topo`` numbers its device minors differently from its GPU indices (as
on machines where PCI order is not index order) gets a job; placement picks the GPUs, the
TaskInfo carries their UUIDs, minors and the driver version, and the executor (with no
``/proc/driver/nvidia`` to fall back on) gives the container exactly those ``/dev/nvidia<minor>``
nodes (stand-ins made with mknod), and the driver volume the topology names.
"""

from __future__ import annotations

import itertools
import time

from dlc.executor.gpu_render import CONTROL_DEVICES, GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.scheduler.tasks.states import DOUBLE_ASSIGNMENT_PREFIX
from dlc.topology.model import Gpu, PairLink, PcieLevel, Topology
from dlc.topology.node_config import agent_attributes
from tests.docker.test_docker_task_runner import Sink
from tests.scheduler.helpers import place

#: index -> minor: no minor equals its index, so using an index as a minor would show.
#: Indices 4-7: the e2e tests that share this engine hold GPUs 0-3 while they run, and the
#: executor's host-wide GPU claim would (rightly) refuse those.
MINORS = {4: 3, 5: 2, 6: 1, 7: 0}


def _offer(topology: Topology) -> dict:
    attrs = [
        {"name": k, "type": "TEXT", "text": {"value": v}}
        for k, v in agent_attributes(topology).items()
    ]
    resources = [
        {"name": n, "type": "SCALAR", "scalar": {"value": v}}
        for n, v in (("cpus", 4.0), ("mem", 4096.0), ("gpus", 4.0))
    ]
    ids = [str(i) for i in MINORS]
    resources.append({"name": "gpu_ids", "type": "SET", "set": {"item": ids}})
    return {
        "id": {"value": "o1"},
        "agent_id": {"value": "a1"},
        "hostname": "gpu-host",
        "resources": resources,
        "attributes": attrs,
    }


def test_container_devices_are_the_allocators_gpus_by_minor(
    docker_runtime, busybox_image, fake_dev, framework_id, driver_volume, tmp_path
):
    version = driver_volume.removeprefix("nvidia_driver_")
    topology = Topology(
        gpus=tuple(Gpu(i, model="H100", uuid=f"GPU-{i:04d}", minor=m) for i, m in MINORS.items()),
        links={
            (a, b): PairLink(a, b, PcieLevel.SYS, nvlinks=4 if (a, b) == (5, 7) else 0)
            for a, b in itertools.combinations(MINORS, 2)
        },
        driver_version=version,
        source="test",
    )
    job = Job(
        "j1",
        "alice",
        JobSpec(gpus=2, cpus=0.5, mem_mib=64, image=busybox_image, command=("sh", "-c", "ls /dev")),
    )
    result = place([_offer(topology)], [job])
    (launch,) = result.launches
    assert sorted(launch.gpu_ids) == [5, 7]  # the NVLinked pair: the topology was used
    info = build_task_info(job, launch, framework_id)
    spec = LaunchSpec.decode(info["data"])
    assert spec.gpu_minors == tuple(MINORS[i] for i in launch.gpu_ids)
    assert spec.gpu_uuids == tuple(f"GPU-{i:04d}" for i in launch.gpu_ids)
    assert spec.driver_version == version

    config = RunnerConfig(
        gpu_style=GpuStyle.LEGACY,
        device_root=str(fake_dev),
        sandbox=str(tmp_path),
        driver_info=ProcDriverInfo(tmp_path / "no-driver"),  # no fallback: the spec must say
    )
    # The GPU claim is host-wide: other sessions' tests on this shared engine may hold the
    # same stand-in GPUs for a few seconds. Such a refusal is the node doing its job, not
    # this contract failing: try again, a bounded number of times.
    for _ in range(20):
        sink = Sink()
        runner = TaskRunner(docker_runtime, sink, framework_id, "ex-1", config)
        runner.launch(launch.task_id, info["data"])
        runner.join(30)
        last = sink.updates[-1]
        if not (last[1] == "TASK_FAILED" and (last[2] or "").startswith(DOUBLE_ASSIGNMENT_PREFIX)):
            break
        time.sleep(3)
    assert sink.states()[-1] == "TASK_FINISHED", sink.updates
    devices = [line for line in (tmp_path / "stdout").read_text().split() if "nvidia" in line]
    expected = set(CONTROL_DEVICES) | {f"nvidia{MINORS[i]}" for i in launch.gpu_ids}
    assert sorted(devices) == sorted(expected)  # exactly these: no other GPU's node
    assert {f"nvidia{i}" for i in launch.gpu_ids}.isdisjoint(devices)  # indices are not minors
