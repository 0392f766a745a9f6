"""The pull path against the local registry: progress, missing images, unreachable registries."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import tarfile
import uuid

import pytest
from docker import errors as docker_errors

from dlc.errors import ContainerError, ImageNotFound


def _unique_image_tar() -> bytes:
    """busybox plus 3 MB of random bytes: a layer the engine cannot already have."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(shutil.which("busybox") or "/usr/bin/busybox", arcname="bin/busybox")
        link = tarfile.TarInfo("bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "busybox"
        tar.addfile(link)
        blob = os.urandom(3 * 1024 * 1024)
        info = tarfile.TarInfo("blob")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    return buf.getvalue()


@pytest.fixture
def pushed_image(docker_runtime, local_registry):
    """A fresh image pushed to the local registry, then removed locally (so it must be pulled)."""
    repo = f"{local_registry}/dlc-test/pull"
    tag = uuid.uuid4().hex[:8]
    api = docker_runtime.client.api
    api.import_image_from_data(
        _unique_image_tar(), repository=repo, tag=tag, changes=["ENV PATH=/bin"]
    )
    for event in api.push(repo, tag=tag, stream=True, decode=True):
        assert "error" not in event, event
    api.remove_image(f"{repo}:{tag}")
    yield f"{repo}:{tag}"
    with contextlib.suppress(docker_errors.NotFound):
        api.remove_image(f"{repo}:{tag}", force=True)


def test_pull_reports_progress_and_leaves_image(docker_runtime, pushed_image):
    assert docker_runtime.image_env(pushed_image) is None
    messages = []
    env = docker_runtime.ensure_image(pushed_image, messages.append, every_s=0)
    assert env["PATH"] == "/bin"
    assert messages[0] == f"pulling {pushed_image}"
    assert messages[-1] == f"pulled {pushed_image}"
    percents = [m for m in messages if "% (" in m]
    assert percents, messages
    assert percents[-1].startswith(f"pulling {pushed_image}: 100% (")
    assert docker_runtime.image_env(pushed_image) is not None


def test_present_image_is_not_pulled(docker_runtime, busybox_image):
    messages = []
    docker_runtime.ensure_image(busybox_image, messages.append)
    assert messages == []


def test_image_missing_from_registry(docker_runtime, local_registry):
    image = f"{local_registry}/dlc-test/nope:{uuid.uuid4().hex[:6]}"
    with pytest.raises(ImageNotFound, match=f"not found in registry {local_registry}"):
        docker_runtime.ensure_image(image)


def test_unreachable_registry(docker_runtime):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ContainerError, match=f"registry 127.0.0.1:{port} unreachable"):
        docker_runtime.ensure_image(f"127.0.0.1:{port}/dlc-test/x:1")
