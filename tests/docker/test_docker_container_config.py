"""The created container's real configuration (docker inspect) for both GPU styles."""

from __future__ import annotations

import pytest

from dlc.executor.container_spec import TaskIdentity, create_kwargs
from dlc.executor.gpu_render import GpuReservation, GpuStyle, render
from dlc.scheduler.jobs.launch_spec import LaunchSpec, Volume


def _spec(image, **kw):
    base = dict(job_id="job-1", image=image, cpus=0.5, mem_mib=96, user="alice")
    base.update(kw)
    return LaunchSpec(**base)


def _create(runtime, spec, framework_id, gpu):
    identity = TaskIdentity(framework_id, "ex-1", f"{framework_id}.t0", spec.job_id)
    kwargs = create_kwargs(spec, identity, gpu, runtime.image_env(spec.image))
    cid = runtime.create(kwargs)
    return cid, runtime.client.api.inspect_container(cid)


def _env(inspect):
    return dict(e.split("=", 1) for e in inspect["Config"]["Env"])


def test_legacy_style_devices_volume_env_and_limits(
    docker_runtime, busybox_image, fake_dev, framework_id, driver_volume, tmp_path
):
    version = driver_volume.removeprefix("nvidia_driver_")
    reservation = GpuReservation(indices=(2, 0), minors=(6, 4), driver_version=version)
    gpu = render(reservation, GpuStyle.LEGACY, device_root=str(fake_dev))
    data = tmp_path / "data"
    data.mkdir()
    spec = _spec(
        busybox_image,
        command=("sh", "-c", "env; ls /dev; touch /usr/local/nvidia/x || echo ro-ok"),
        gpu_ids=(2, 0),
        volumes=(Volume(str(data), "/data"),),
        env={"CUDA_VISIBLE_DEVICES": "9", "A": "b"},
    )
    cid, inspect = _create(docker_runtime, spec, framework_id, gpu)
    host = inspect["HostConfig"]
    assert [(d["PathOnHost"], d["PathInContainer"]) for d in host["Devices"]] == [
        (f"{fake_dev}/{name}", f"/dev/{name}")
        for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia6", "nvidia4")
    ]
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    assert mounts["/usr/local/nvidia"]["Name"] == driver_volume
    assert mounts["/usr/local/nvidia"]["RW"] is False
    assert mounts["/data"]["Source"] == str(data) and mounts["/data"]["RW"] is False
    env = _env(inspect)
    assert env["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert env["DLC_GPU_HOST_IDS"] == "2,0"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["PATH"] == "/usr/local/nvidia/bin:/bin"  # the image's own PATH is /bin
    assert env["A"] == "b"
    assert host["Privileged"] is False
    assert host["NanoCpus"] == 500_000_000
    assert host["Memory"] == 96 * 1024 * 1024
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["CapDrop"] == ["ALL"]
    assert host["PidsLimit"] == 4096  # no fork bomb reaches the host's pid limit
    engine_log = {"max-size": "64m", "max-file": "2"}
    assert host["LogConfig"] == {"Type": "json-file", "Config": engine_log}
    assert host["DeviceRequests"] in (None, [])
    assert inspect["Config"]["Labels"]["dlc.framework_id"] == framework_id
    assert inspect["Config"]["Labels"]["dlc.user"] == "alice"

    # and the engine really runs it: the devices exist inside, the driver volume is read-only
    docker_runtime.start(cid, busybox_image)
    assert docker_runtime.wait(cid).exit_code == 0
    out = docker_runtime.client.api.logs(cid).decode()
    assert "nvidia6" in out and "nvidia4" in out and "nvidia0" not in out.split()
    assert "ro-ok" in out


def test_toolkit_style_device_request(docker_runtime, busybox_image, framework_id):
    reservation = GpuReservation(indices=(3, 1), minors=(3, 1), uuids=("GPU-b", "GPU-a"))
    gpu = render(reservation, GpuStyle.TOOLKIT)
    _, inspect = _create(docker_runtime, _spec(busybox_image, gpu_ids=(3, 1)), framework_id, gpu)
    host = inspect["HostConfig"]
    (request,) = host["DeviceRequests"]
    assert request["Driver"] == "nvidia"
    assert request["DeviceIDs"] == ["GPU-b", "GPU-a"]
    assert request["Capabilities"] == [["gpu"]]
    assert host["Devices"] in (None, [])
    env = _env(inspect)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-b,GPU-a"
    assert env["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert host["Privileged"] is False


@pytest.mark.parametrize("style", [GpuStyle.NONE, GpuStyle.TOOLKIT, GpuStyle.LEGACY])
def test_cpu_job_gets_no_devices(docker_runtime, busybox_image, framework_id, style):
    gpu = render(GpuReservation(), style)
    _, inspect = _create(docker_runtime, _spec(busybox_image), framework_id, gpu)
    assert inspect["HostConfig"]["Devices"] in (None, [])
    assert inspect["HostConfig"]["DeviceRequests"] in (None, [])
    assert _env(inspect)["NVIDIA_VISIBLE_DEVICES"] == "void"
