"""Finding 59 on the real engine: a container under a job uid, sharing a network namespace with
a root service on 127.0.0.1 as a host-network gang shares the agent's, reads the service until
the loopback guard is installed, and is refused after.

The shared namespace is a sandbox container's (``--network none``: loopback only), never this
host's: the test installs the guard there through ``nsenter`` with the executor's own
:class:`~dlc.executor.loopback_guard.LoopbackGuard`, and the job container joins it with
``--network container:SANDBOX``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlc.executor.loopback_guard import GuardMode, LoopbackGuard

BANNER = "nv-hostengine stand-in"
#: a root service on loopback only, as DCGM's nv-hostengine listens by default
STAND_IN = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 5555)); s.listen(8); print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"{BANNER}\\n"); c.close()
"""


@pytest.fixture
def sandbox(docker_runtime, busybox_image, framework_id):
    """A container whose network namespace plays the agent's host network, and a root
    listener on its 127.0.0.1:5555."""
    client = docker_runtime.client
    labels = {"dlc.framework": framework_id}  # removed by the fixture if the test dies
    box = client.containers.run(busybox_image, ["sleep", "300"], detach=True,
                                network_mode="none", labels=labels)  # fmt: skip
    pid = client.api.inspect_container(box.id)["State"]["Pid"]
    netns = f"--net=/proc/{pid}/ns/net"
    service = subprocess.Popen(["nsenter", netns, sys.executable, "-c", STAND_IN],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert service.stdout is not None and service.stdout.readline().strip() == "listening"
        yield box, netns
    finally:
        service.kill()
        service.wait(10)
        box.remove(force=True)


def _nc(docker_runtime, image: str, box, user: str) -> str:
    """What ``nc 127.0.0.1 5555`` prints in a container of ``user`` in the sandbox's network."""
    client = docker_runtime.client
    command = ["sh", "-c", "busybox nc -w 5 127.0.0.1 5555 2>&1; true"]
    job = client.containers.run(image, command, detach=True, user=user,
                                network_mode=f"container:{box.id}")  # fmt: skip
    try:
        job.wait(timeout=60)
        return job.logs().decode()
    finally:
        job.remove(force=True)


def test_a_job_uid_container_loses_the_root_service_on_loopback(docker_runtime, busybox_image,
                                                                sandbox):  # fmt: skip
    box, netns = sandbox
    # the finding: the job container reads the service
    assert BANNER in _nc(docker_runtime, busybox_image, box, "65534:65534")

    LoopbackGuard(GuardMode.ENFORCE, nft=("nsenter", netns, "nft")).before_host_network("t1")

    refused = _nc(docker_runtime, busybox_image, box, "65534:65534")
    assert BANNER not in refused and "refused" in refused.lower()
    assert BANNER not in _nc(docker_runtime, busybox_image, box, "1000:1000")
    # the operator's root containers (an exporter of the service's metrics) keep it
    assert BANNER in _nc(docker_runtime, busybox_image, box, "0:0")
