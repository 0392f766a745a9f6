"""A fake container runtime with DockerRuntime's methods (for TaskRunner tests)."""

from __future__ import annotations

import threading

from dlc.errors import ContainerError, ImageNotFound
from dlc.executor.runtime import ContainerInfo, ExitInfo


class FakeRuntime:
    """Containers are dicts; ``wait`` blocks until ``exit`` (or ``stop``) ends them."""

    def __init__(self, runtimes=("runc",), volumes=(), images=("img:1",), output=("hello",)):
        self.runtimes = frozenset(runtimes)
        self.volumes = set(volumes)
        self.images = set(images)
        self.output = list(output)
        self.containers: dict[str, dict] = {}
        self.calls: list[tuple] = []
        self.start_error: str | None = None
        self.exit_code = 0
        self.auto_exit = True
        self._n = 0

    def engine_runtimes(self):
        return self.runtimes

    #: the engine's ``DockerRootDir`` (``""``: the engine says none), and how often it was asked
    data_root = "/var/lib/docker"
    state_asked = 0

    def engine_state(self):
        self.state_asked += 1
        return ((self.data_root, "the Docker engine's data"),) if self.data_root else ()

    def volume_exists(self, name):
        return name in self.volumes

    def ensure_image(self, image, progress=None, every_s=2.0):
        self.calls.append(("ensure_image", image))
        if image not in self.images:
            raise ImageNotFound(f"image {image} not found in registry docker.io")
        if progress:
            progress(f"pulling {image}: 100% (1/1 MB)")
        return {"PATH": "/bin"}

    def create(self, kwargs):
        self._n += 1
        cid = f"c{self._n:063d}"
        self.containers[cid] = {"kwargs": kwargs, "done": threading.Event(), "exit": None}
        self.calls.append(("create", cid))
        return cid

    def start(self, cid, image=""):
        self.calls.append(("start", cid))
        if self.start_error:
            raise ContainerError(self.start_error)
        if self.auto_exit:
            self.finish(cid, self.exit_code)

    def finish(self, cid, code):
        box = self.containers[cid]
        box["exit"] = code
        box["done"].set()

    def follow_logs(self, cid, stdout_path, stderr_path, tail):
        with open(stdout_path, "a") as out:
            for line in self.output:
                out.write(line + "\n")
                tail.append(line)
        return []

    def wait(self, cid):
        self.containers[cid]["done"].wait(10)
        return ExitInfo(self.containers[cid]["exit"])

    def stop(self, cid, grace_s):
        self.calls.append(("stop", cid, grace_s))
        if cid in self.containers and not self.containers[cid]["done"].is_set():
            self.finish(cid, 137)

    def remove(self, cid):
        self.calls.append(("remove", cid))
        self.containers.pop(cid, None)

    def list_containers(self, labels):
        out = []
        for cid, box in self.containers.items():
            have = box["kwargs"]["labels"]
            if all(v is None and k in have or have.get(k) == v for k, v in labels.items()):
                out.append(ContainerInfo(cid, cid[:12], "running", have))
        return out

    def remove_all(self, found, grace_s):
        for info in found:
            self.stop(info.id, grace_s)
            self.remove(info.id)
        return [info.id for info in found]
