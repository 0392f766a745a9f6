"""An AMD (ROCm) task on the real engine: exactly its GPUs' DRM nodes, /dev/kfd, their groups.

Stand-in character devices (the DRM major 226; any free major for kfd) under a temp dir,
and a fake /sys/class/drm built like an MI300X host's (tests/fixtures/amd), so the executor
maps GPU indices to card/renderD numbers as on a real AMD agent.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from dlc.devices.amd.host import SysfsDrm
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.scheduler.jobs.launch_spec import LaunchSpec
from dlc.topology.discovery.discover import discover


class Sink:
    """Status updates of the runner, waited for with a deadline."""

    def __init__(self):
        self.updates = []
        self.cond = threading.Condition()

    def update(self, task_id, state, message=None, reason=None, labels=None):
        with self.cond:
            self.updates.append((task_id, state, message, reason, labels))
            self.cond.notify_all()

    def wait_for(self, state, timeout=60):
        with self.cond:
            assert self.cond.wait_for(lambda: state in [u[1] for u in self.updates], timeout), (
                self.updates
            )


DRM_MAJOR = 226  # the kernel's DRM character-device major
KFD_MAJOR = 509  # dynamic on real hosts; any free major works for the stand-in
VIDEO_GID, RENDER_GID = 44, 993  # owners of card* / renderD* (+ kfd) as on Ubuntu hosts
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/amd"
MI300X = FIXTURE / "mi300x-8gpu_amd-smi-topology-static_CONSTRUCTED.json"


@pytest.fixture
def amd_host(tmp_path):
    """``(dev root, sysfs root)`` of a fake 8-GPU MI300X host (bus ids from the fixture)."""
    topo = discover(from_file=MI300X)
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    (dev / "dri").mkdir(parents=True)
    os.mknod(dev / "kfd", 0o660 | stat.S_IFCHR, os.makedev(KFD_MAJOR, 0))
    os.chown(dev / "kfd", 0, RENDER_GID)
    for gpu in topo.gpus:
        # card numbers deliberately not the GPU index: sysfs, not arithmetic, decides
        card, render = 7 - gpu.index, 135 - gpu.index
        for name, minor, gid in ((f"card{card}", card, VIDEO_GID),
                                 (f"renderD{render}", render, RENDER_GID)):  # fmt: skip
            os.mknod(dev / "dri" / name, 0o660 | stat.S_IFCHR, os.makedev(DRM_MAJOR, minor))
            os.chown(dev / "dri" / name, 0, gid)
            pci = sysfs / "devices" / gpu.pci_bus_id
            pci.mkdir(parents=True, exist_ok=True)
            (pci / "vendor").write_text("0x1002\n")
            (sysfs / name).mkdir()
            os.symlink(pci, sysfs / name / "device")
    return dev, sysfs


def test_amd_container_gets_exactly_its_render_nodes(
    docker_runtime, busybox_image, framework_id, amd_host, tmp_path
):
    dev, sysfs = amd_host
    sink = Sink()
    config = RunnerConfig(
        gpu_style=GpuStyle.AUTO,
        gpu_vendor="amd",
        device_root=str(dev),
        drm=SysfsDrm(sysfs),
        sandbox=str(tmp_path),
        driver_info=ProcDriverInfo(tmp_path / "no-driver"),
    )
    runner = TaskRunner(docker_runtime, sink, framework_id, "ex-1", config)
    command = ("sh", "-c", "ls /dev/dri; id -G; env; sleep 300")
    spec = LaunchSpec(job_id="job-amd", image=busybox_image, command=command, gpu_ids=(5, 2))
    runner.launch("t-amd", spec.encode())
    sink.wait_for("TASK_RUNNING")
    cid = next(u[4]["dlc.container_id"] for u in sink.updates if u[1] == "TASK_RUNNING")
    host = docker_runtime.client.api.inspect_container(cid)["HostConfig"]
    # GPU5 is card2/renderD130 and GPU2 card5/renderD133 on this host (sysfs order)
    assert [(d["PathOnHost"], d["PathInContainer"]) for d in host["Devices"]] == [
        (f"{dev}/{p}", f"/dev/{p}")
        for p in ("kfd", "dri/renderD130", "dri/card2", "dri/renderD133", "dri/card5")
    ]
    assert host["GroupAdd"] == [str(RENDER_GID), str(VIDEO_GID)]
    assert host["DeviceRequests"] in (None, []) and host["Privileged"] is False
    runner.kill("t-amd")
    sink.wait_for("TASK_KILLED")
    runner.join(30)
    lines = (tmp_path / "stdout").read_text().splitlines()
    nodes = [n for line in lines for n in line.split() if n.startswith(("card", "renderD"))]
    assert sorted(nodes) == ["card2", "card5", "renderD130", "renderD133"]
    assert "ROCR_VISIBLE_DEVICES=1,0" in lines and "HIP_VISIBLE_DEVICES=1,0" in lines
    gids = next(line.split() for line in lines if line.replace(" ", "").isdigit())
    assert {str(RENDER_GID), str(VIDEO_GID)} <= set(gids)  # the process holds both groups
