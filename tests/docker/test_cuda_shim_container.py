"""The CUDA shim in a real container, loaded the way the executor loads it.

The container gets exactly the mounts :func:`~dlc.executor.sharing.render.render_share`
renders for a ``shim`` share (the library, ``/etc/ld.so.preload`` and the limit config
read-only, the accounting tmpfs) and runs as uid 65534 with NO ``LD_PRELOAD``: the dynamic
loader reads ``/etc/ld.so.preload`` itself. The job then tries what a job could try: unset
``LD_PRELOAD``, point ``DLC_SHIM_CONFIG`` at a config of its own with a huge limit, rewrite
``/etc/ld.so.preload``, reach the driver by dlopen+dlsym and cuGetProcAddress, and spread the
use over two processes. The image is the test busybox plus the host's glibc loader (busybox
is static; the shim needs a dynamic loader), the driver is the stub ``libcuda.so.1``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.render import render_share
from dlc.executor.sharing.shim import ShimStore
from dlc.scheduler.jobs.launch_spec import GpuShare
from tests.native.shim_helpers import build

IMAGE = "dlc-test/busybox-glibc:1"
LOADER = Path("/lib64/ld-linux-x86-64.so.2")
LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")

JOB = r"""
unset LD_PRELOAD
printf 'limit_mib=999999\n' > /tmp/mine.conf
export DLC_SHIM_CONFIG=/tmp/mine.conf
echo x > /etc/ld.so.preload 2>/dev/null && echo preload-writable || echo preload-read-only
mkfifo /tmp/in
/opt/t/client direct < /tmp/in > /tmp/a.out 2>&1 &
exec 3> /tmp/in
echo ctx >&3
echo 'alloc mem 3000' >&3
i=0
while [ "$(grep -c . /tmp/a.out)" -lt 3 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "first: $(tr '\n' ' ' < /tmp/a.out)"
second=$(printf 'ctx\ninfo\nalloc mem 1000\nalloc mem 60\nquit\n' | /opt/t/client dlsym)
echo "second: $(echo "$second" | tr '\n' ' ')"
echo "third: $(printf 'ctx\nalloc mem 5000\nquit\n' | /opt/t/client getproc2 | tr '\n' ' ')"
echo quit >&3
wait
"""


@pytest.fixture(scope="module")
def glibc_image(docker_runtime, busybox_image, tmp_path_factory):
    if not (LOADER.exists() and LIBC.exists()):
        pytest.fail(
            f"no x86-64 glibc at {LOADER} / {LIBC} to put in the image (CI runs on Debian x86-64)"
        )
    context = tmp_path_factory.mktemp("glibc-image")
    shutil.copy(LOADER, context / "ld-linux-x86-64.so.2")
    shutil.copy(LIBC, context / "libc.so.6")
    (context / "Dockerfile").write_text(
        f"FROM {busybox_image}\n"
        "COPY ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2\n"
        "COPY libc.so.6 /lib/x86_64-linux-gnu/libc.so.6\n"
    )
    docker_runtime.client.images.build(path=str(context), tag=IMAGE, rm=True)
    return IMAGE


def test_the_job_cannot_shed_or_raise_the_shim(docker_runtime, glibc_image, tmp_path):
    built = build(tmp_path / "build")
    store = ShimStore(str(tmp_path / "shim"), str(built.shim))
    share = GpuShare(0, None, 4096, 0, "shim")
    args = render_share(share, GpuStyle.NONE, shim=store.write("task-1", share))
    # the client and the stub driver, as the image's own software would be
    opt = {"Type": "bind", "Source": str(built.client.parent), "Target": "/opt/t",
           "ReadOnly": True}  # fmt: skip
    tmp = {"Type": "tmpfs", "Target": "/tmp", "TmpfsOptions": {"Mode": 0o1777}}
    assert "LD_PRELOAD" not in args.gpu.env
    output = docker_runtime.client.containers.run(
        glibc_image,
        ["sh", "-c", JOB],
        user="65534:65534",
        environment=args.gpu.env,
        mounts=[*args.mounts, opt, tmp],
        network_mode="none",
        remove=True,
        stderr=True,
    ).decode()
    lines = {line.split(":")[0]: line for line in output.splitlines() if ":" in line}
    assert "preload-read-only" in output, output
    assert lines["first"].endswith("ready ok ok 0 "), output
    # two processes, one share: 512 + 512 (contexts) + 3000 leave 72 MiB
    assert lines["second"] == "second: ready ok info 72 4096 err 2 ok 0 ", output
    assert lines["third"] == "third: ready ok err 2 ", output
    assert "refused on GPU 0: share 4096 MiB" in output


def test_the_executor_s_create_path_takes_the_shim_mounts(
    docker_runtime, busybox_image, framework_id, tmp_path
):
    """The share rendered, applied to the executor's own create kwargs and created by the
    runtime: read-only binds and the tmpfs reach the engine as rendered."""
    from tests.docker.test_docker_sharing import UUID, _create

    library = tmp_path / "libdlc_cuda_shim.so"
    library.write_bytes(b"")
    share = GpuShare(0, UUID, 4096, 0, "shim")
    files = ShimStore(str(tmp_path / "shim"), str(library)).write("t-1", share)
    _, inspect = _create(
        docker_runtime, busybox_image, framework_id, share, GpuStyle.TOOLKIT, shim=files
    )
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    for target in ("/usr/lib/dlc/libdlc_cuda_shim.so", "/etc/ld.so.preload",
                   "/etc/dlc/cuda-shim.conf"):  # fmt: skip
        assert mounts[target]["RW"] is False, mounts[target]
    assert mounts["/run/dlc-shim"]["Type"] == "tmpfs"
    assert inspect["HostConfig"]["IpcMode"] != "host"
    assert "LD_PRELOAD" not in str(inspect["Config"]["Env"])
