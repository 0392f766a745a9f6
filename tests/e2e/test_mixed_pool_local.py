"""A mixed pool on `dlc local` (issue 29's "Done when"): a simulated DGX-1 and a simulated
MI300X node side by side, started as a user does (`dlc local --simulate A --simulate B`).

* emulator + stand-in executors: a ``--gpu-vendor amd`` job lands on the MI300X agent and its
  executor runs as an AMD agent's (``DLC_GPU_VENDOR=amd``), a ``--gpu-vendor nvidia`` job on the
  DGX-1; a CUDA-only catalog framework with ``--gpu-vendor amd`` is refused at submit, one line;
* the real Docker engine (marker ``docker``): the AMD job's container (``docker inspect``) holds
  ``/dev/kfd`` and exactly its GPUs' render and card nodes, stand-in character devices made the
  way tests/docker/test_docker_amd_devices.py makes them (simulated GPUs have no real nodes).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from dlc.cli.main import cli
from dlc.errors import DlcError
from dlc.executor.container_spec import LABEL_JOB
from tests.app.test_local import STAND_IN, wait_done
from tests.docker.conftest import busybox_image, docker_runtime  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
MI300X = ROOT / "examples" / "topologies" / "mi300x-amd-smi.json"
#: the agents' hostnames: one per --simulate file, in order
NVIDIA_HOST, AMD_HOST = "127.0.0.1", "127.0.0.2"
PRINT_VENDOR = ["sh", "-c", "echo vendor=$DLC_GPU_VENDOR"]


def start_local(work: Path) -> tuple[subprocess.Popen, ApiClient, str]:
    """`dlc local` with both machines and stand-in executors; its client and banner."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "local", "--simulate", str(DGX1), "--simulate", str(MI300X),
         "--api-port", "0", "--work-dir", str(work), "--executor-command", STAND_IN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    lines: list[str] = []
    while not any("DLC_TOKEN=" in line for line in lines):
        line = proc.stdout.readline()
        assert line, "dlc local exited early:\n" + "".join(lines)
        lines.append(line)
    text = "".join(lines)
    api = re.search(r"export DLC_API=(\S+)", text).group(1)
    token = re.search(r"export DLC_TOKEN=(\S+)", text).group(1)
    return proc, ApiClient(api, token), text


def test_jobs_land_on_the_vendor_they_ask_for_and_cuda_images_are_refused_on_amd(tmp_path):
    proc, client, banner = start_local(tmp_path / "state")
    try:
        assert "agent nvidia GPUs 0,1,2,3,4,5,6,7, simulated from" in banner
        assert "agent amd GPUs 0,1,2,3,4,5,6,7, simulated from" in banner
        assert "AMD Instinct MI300X" in banner
        for vendor, host in (("amd", AMD_HOST), ("nvidia", NVIDIA_HOST)):
            job = client.submit(
                {"image": "none", "gpus": 4, "gpu_vendor": vendor, "command": PRINT_VENDOR}
            )
            done = wait_done(client, job["id"], timeout=60)
            assert done["state"] == "finished", done["message"]
            assert done["tasks"][0]["hostname"] == host
            # the agent gave its executor its vendor: an AMD agent's renders ROCm devices
            assert f"vendor={vendor}\n" in client.logs(job["id"])["data"]
        # a CUDA-only catalog framework (tensorflow 2.13 has no ROCm build) on AMD: refused
        # at submit, one line, as a user meets it through the CLI
        output = cuda_on_amd_refusal(client)
        assert len(output.strip().splitlines()) == 1, output
        assert "built for NVIDIA (CUDA 11.8) only, not AMD" in output
        assert not [j for j in client.jobs() if "tensorflow" in (j.get("image") or "")]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


DRM_MAJOR, KFD_MAJOR = 226, 509  # as tests/docker/test_docker_amd_devices.py
VIDEO_GID, RENDER_GID = 44, 993


def stand_in_devices(root: Path, gpus: int) -> Path:
    """``kfd`` and ``dri/card<i>``/``dri/renderD<128+i>`` character devices under ``root``: an
    AMD host with no sysfs says nothing else, so the executor assumes that numbering."""
    (root / "dri").mkdir(parents=True)
    os.mknod(root / "kfd", 0o660 | stat.S_IFCHR, os.makedev(KFD_MAJOR, 0))
    os.chown(root / "kfd", 0, RENDER_GID)
    for i in range(gpus):
        for name, minor, gid in ((f"card{i}", i, VIDEO_GID), (f"renderD{128 + i}", 128 + i,
                                                               RENDER_GID)):  # fmt: skip
            os.mknod(root / "dri" / name, 0o660 | stat.S_IFCHR, os.makedev(DRM_MAJOR, minor))
            os.chown(root / "dri" / name, 0, gid)
    return root


def wait_for(predicate, timeout_s=90.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def running_containers(runtime, job_id: str) -> list:
    return [c for c in runtime.list_containers({LABEL_JOB: job_id}) if c.status == "running"]


@pytest.mark.docker
def test_amd_container_gets_exactly_its_render_nodes_on_the_real_engine(
    docker_runtime,  # noqa: F811
    busybox_image,  # noqa: F811
    tmp_path,
):
    dev = stand_in_devices(tmp_path / "dev", 8)
    config = LocalConfig(
        simulate=(str(DGX1), str(MI300X)), work_dir=str(tmp_path / "state"), api_port=0,
        cpus=8, mem_mib=8192, device_root=str(dev),
    )  # fmt: skip
    cluster = LocalCluster(config).start()
    try:
        client = ApiClient(cluster.service.api_url, cluster.admin_token)
        # an NVIDIA job holds all 8 of the DGX-1's GPUs first: simulated GPUs of
        # another agent must not block the AMD agent's (stand-in) devices
        nvidia = client.submit(
            {"image": busybox_image, "gpus": 8, "gpu_vendor": "nvidia", "cpus": 0.5,
             "mem_mib": 64, "command": ["sleep", "300"]}
        )  # fmt: skip
        (held,) = wait_for(lambda: running_containers(docker_runtime, nvidia["id"]))
        assert client.show(nvidia["id"])["tasks"][0]["hostname"] == NVIDIA_HOST
        assert docker_runtime.client.api.inspect_container(held.id)["HostConfig"]["Devices"] in (
            None,
            [],
        )  # simulated NVIDIA GPUs: no devices
        job = client.submit(
            {"image": busybox_image, "gpus": 2, "gpu_vendor": "amd", "cpus": 0.5, "mem_mib": 64,
             "command": ["sleep", "300"]}
        )  # fmt: skip
        (container,) = wait_for(lambda: running_containers(docker_runtime, job["id"]))
        task = client.show(job["id"])["tasks"][0]
        assert task["hostname"] == AMD_HOST
        host = docker_runtime.client.api.inspect_container(container.id)["HostConfig"]
        nodes = ["kfd"]
        for i in task["gpu_ids"]:
            nodes += [f"dri/renderD{128 + i}", f"dri/card{i}"]
        assert [(d["PathOnHost"], d["PathInContainer"]) for d in host["Devices"]] == [
            (f"{dev}/{p}", f"/dev/{p}") for p in nodes
        ]
        assert len(task["gpu_ids"]) == 2
        assert sorted(host["GroupAdd"]) == sorted([str(RENDER_GID), str(VIDEO_GID)])
        assert host["DeviceRequests"] in (None, []) and host["Privileged"] is False
        for ended in (job, nvidia):
            client.kill(ended["id"])
            assert wait_done(client, ended["id"], timeout=60)["state"] == "killed"
    finally:
        cluster.stop()


def cuda_on_amd_refusal(client: ApiClient) -> str:
    """The CLI's whole output for a CUDA-only catalog framework asked on AMD (must fail)."""
    env = {"DLC_API": client.url, "DLC_TOKEN": client.token or "", "COLUMNS": "100"}
    argv = ["submit", "--framework", "tensorflow:2.13", "--gpu-vendor", "amd", "--gpus", "1",
            "--", "python", "train.py"]  # fmt: skip
    result = CliRunner().invoke(cli, argv, env=env, prog_name="dlc")
    assert result.exit_code != 0, result.output
    return result.output


@pytest.mark.mesos
def test_vendor_placement_on_the_real_master(tmp_path):
    """The real Mesos 1.11 master, one agent started with the MI300X's `dlc node-config` flags
    (the test helper's agents are all alike, so the NVIDIA side is a job no agent can take): the
    AMD job runs there with its executor given the vendor by the agent, the NVIDIA job and a
    CUDA-only image on AMD are refused at submit in one line."""
    import json

    from dlc.app.service import SchedulerService, ServiceConfig
    from dlc.scheduler.tasks.launch import ExecutorConfig
    from dlc.topology.discovery.discover import discover
    from dlc.topology.node_config import node_config
    from tests.real_mesos import real_mesos_master

    flags = node_config(discover(from_file=MI300X), cpus=4, mem_mib=4096).env()
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    # a real AMD agent's operator sets the vendor for its executors, as dlc local does
    executor_env = json.dumps({"PATH": path, "DLC_GPU_VENDOR": "amd", "DLC_GPU_STYLE": "none"})
    with real_mesos_master(
        tmp_path / "mesos", MESOS_EXECUTOR_ENVIRONMENT_VARIABLES=executor_env, **flags
    ) as mesos:
        service = SchedulerService(
            ServiceConfig(
                master=mesos.address, db=str(tmp_path / "db"), api_port=0,
                executor=ExecutorConfig(command=STAND_IN), admin_token="mixed-pool-token",
            )
        )  # fmt: skip
        service.start()
        try:
            assert service.framework.registered.wait(30), "no registration with the master"
            client = ApiClient(service.api_url, "mixed-pool-token")
            amd = client.submit(
                {"image": "none", "gpus": 8, "gpu_vendor": "amd", "command": PRINT_VENDOR}
            )
            done = wait_done(client, amd["id"], timeout=90)
            assert done["state"] == "finished", done["message"]
            assert sorted(done["tasks"][0]["gpu_ids"]) == list(range(8))  # the XGMI group whole
            assert "vendor=amd\n" in client.logs(amd["id"])["data"]
            # no agent the master knows has NVIDIA GPUs: refused at submit, in one line
            with pytest.raises(DlcError) as refused:
                client.submit({"image": "none", "gpus": 1, "gpu_vendor": "nvidia",
                               "command": ["true"]})  # fmt: skip
            assert "no agent has nvidia GPUs (the agents have: amd)" in str(refused.value)
            assert "\n" not in str(refused.value)
            output = cuda_on_amd_refusal(client)
            assert len(output.strip().splitlines()) == 1, output
            assert "built for NVIDIA (CUDA 11.8) only, not AMD" in output
        finally:
            service.stop()
