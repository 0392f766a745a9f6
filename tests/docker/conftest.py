"""Fixtures for tests against the real Docker engine (``scripts/docker.sh start`` runs them).

* ``docker_runtime``: a :class:`~dlc.executor.runtime.DockerRuntime` on the local engine; the
  test FAILS (not skips) when no engine answers.
* ``busybox_image``: ``dlc-test/busybox:1``, imported from Debian's busybox-static if missing
  or older than ``TEST_IMAGE_LAYOUT`` (its ``/`` must be 0755: containers run as uid 65534).
* ``local_registry``: ``127.0.0.1:5000`` (or ``$DLC_TEST_REGISTRY``); fails when it is down.
* ``fake_dev``: a directory of stand-in ``nvidia*`` character devices (major 195, as the NVIDIA
  driver uses) so the engine accepts legacy-style device mappings on a machine without GPUs.
* ``framework_id``: a unique framework id; every container carrying it is removed afterwards.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path

import pytest

from dlc.executor.container_spec import LABEL_FRAMEWORK

TEST_IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
REGISTRY = os.environ.get("DLC_TEST_REGISTRY", "127.0.0.1:5000")
NVIDIA_MAJOR = 195  # the NVIDIA driver's character-device major (nvidiactl is minor 255)
UVM_MAJOR = 510  # dynamic on real hosts; any free major works for the stand-ins
#: the image's layout version (scripts/docker.sh's TEST_IMAGE_LAYOUT): an older one is rebuilt
TEST_IMAGE_LAYOUT = "2"


def pytest_collection_modifyitems(items):
    # every test in this folder talks to the engine
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_runtime():
    from dlc.errors import ContainerError
    from dlc.executor.runtime import DockerRuntime

    try:
        return DockerRuntime()
    except ContainerError as exc:
        pytest.fail(f"{exc} - run `bash scripts/docker.sh start` first", pytrace=False)


def _busybox_tar() -> bytes:
    busybox = shutil.which("busybox") or "/usr/bin/busybox"
    assert os.path.exists(busybox), "busybox-static missing: apt-get install busybox-static"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for folder in (".", "bin", "tmp", "etc"):  # "." 0755: containers run as a non-root uid
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in (
            "sh",
            "env",
            "echo",
            "cat",
            "sleep",
            "ls",
            "id",
            "touch",
            "head",
            "wc",
            "stat",
            "ln",
            "grep",
            "true",
        ):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    return buf.getvalue()


def _layout(docker_runtime) -> str | None:
    import docker

    try:
        attrs = docker_runtime.client.api.inspect_image(TEST_IMAGE)
    except docker.errors.ImageNotFound:
        return None
    return ((attrs.get("Config") or {}).get("Labels") or {}).get("dlc.test.layout")


@pytest.fixture(scope="session")
def busybox_image(docker_runtime) -> str:
    if _layout(docker_runtime) != TEST_IMAGE_LAYOUT:
        repo, tag = TEST_IMAGE.rsplit(":", 1)
        changes = ["ENV PATH=/bin", 'CMD ["/bin/sh"]', f"LABEL dlc.test.layout={TEST_IMAGE_LAYOUT}"]
        docker_runtime.client.api.import_image_from_data(
            _busybox_tar(), repository=repo, tag=tag, changes=changes
        )
    assert docker_runtime.image_env(TEST_IMAGE) is not None
    return TEST_IMAGE


@pytest.fixture(scope="session")
def local_registry() -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5) as resp:
            assert resp.status == 200
    except OSError as exc:
        pytest.fail(
            f"local registry {REGISTRY} not answering ({exc}) - run `bash scripts/docker.sh start`",
            pytrace=False,
        )
    return REGISTRY


@pytest.fixture(scope="session")
def fake_dev(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fake-dev")
    nodes = {"nvidiactl": (NVIDIA_MAJOR, 255), "nvidia-uvm": (UVM_MAJOR, 0)}
    nodes["nvidia-uvm-tools"] = (UVM_MAJOR, 1)
    nodes.update({f"nvidia{m}": (NVIDIA_MAJOR, m) for m in range(8)})
    for name, (major, minor) in nodes.items():
        os.mknod(root / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return root


@pytest.fixture
def framework_id(docker_runtime):
    fid = f"test-{uuid.uuid4().hex[:10]}"
    yield fid
    leftovers = docker_runtime.list_containers({LABEL_FRAMEWORK: fid})
    docker_runtime.remove_all(leftovers, 0)


@pytest.fixture
def driver_volume(docker_runtime):
    name = f"nvidia_driver_999.{uuid.uuid4().hex[:6]}"
    docker_runtime.client.volumes.create(name)
    yield name
    for container in docker_runtime.client.api.containers(all=True, filters={"volume": name}):
        docker_runtime.remove(container["Id"])
    docker_runtime.client.volumes.get(name).remove(force=True)
