"""What the Docker engine saw: containers of one run, their GPUs and start/die times.

The engine's event log has the times and labels but not a container's environment, and DLC
puts the GPU ids only in the environment (``DLC_GPU_IDS``), so a watcher thread inspects each
DLC container as it is created (while it still exists) and keeps the run's own. After the run,
:func:`containers` reads the events between two instants (``since``/``until``) and joins them.
"""

from __future__ import annotations

import contextlib
import threading
import time

import docker

from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK, LABEL_JOB, LABEL_TASK
from tests.fault.checks import Container

RUN_ENV = "FAULT_RUN"  # put into every job's env: marks the run's containers


class DockerWatch:
    """Inspect every new DLC container and remember those of run ``run_id``."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.client = docker.from_env(timeout=30)
        self.gpus: dict[str, tuple[int, ...]] = {}  # container id -> GPUs, for the run's own
        self.framework_ids: set[str] = set()
        self.since = time.time()
        self._stream = None
        self._thread: threading.Thread | None = None

    def start(self) -> DockerWatch:
        filters = {"type": "container", "event": "create", "label": LABEL_FRAMEWORK}
        self._stream = self.client.events(decode=True, filters=filters)
        self._thread = threading.Thread(target=self._loop, name="fault-docker-watch", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            for event in self._stream:
                self._note(event.get("id") or event.get("Actor", {}).get("ID", ""))
        except Exception:  # the stream was closed by stop()
            return

    def _note(self, container_id: str) -> None:
        try:
            info = self.client.api.inspect_container(container_id)
        except docker.errors.APIError:
            return  # already removed: its GPUs stay unknown (counted as gpus_unknown)
        env = dict(e.partition("=")[::2] for e in info["Config"].get("Env") or ())
        if env.get(RUN_ENV) != self.run_id:
            return
        ids = env.get("DLC_GPU_IDS", "")
        self.gpus[container_id] = tuple(int(i) for i in ids.split(",") if i.strip())
        self.framework_ids.add(info["Config"]["Labels"].get(LABEL_FRAMEWORK, ""))

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()

    def containers(self, until: float) -> list[Container]:
        """The run's containers with their start/die times, from the engine's event log."""
        events = self.client.events(
            since=int(self.since) - 1,
            until=int(until) + 1,
            decode=True,
            filters={"type": "container", "label": LABEL_FRAMEWORK},
        )
        found: dict[str, Container] = {}
        for event in events:
            attrs = event.get("Actor", {}).get("Attributes", {})
            cid = event.get("id", "")
            ours = cid in self.gpus or attrs.get(LABEL_FRAMEWORK) in self.framework_ids
            if not ours or LABEL_TASK not in attrs:
                continue
            c = found.setdefault(
                cid, Container(cid, attrs.get(LABEL_JOB, ""), attrs[LABEL_TASK], self.gpus.get(cid))
            )
            at = event.get("timeNano", 0) / 1e9 or float(event.get("time", 0))
            action = event.get("Action") or event.get("status")
            if action == "start" and c.start is None:
                c.start = at
            elif action == "die":
                c.die = at
        return list(found.values())

    def busy_executors(self) -> set[str]:
        """Executor ids of the run's running containers."""
        running = [c for c in self.leftovers() if c.get("State") == "running"]
        return {c["Labels"].get(LABEL_EXECUTOR, "") for c in running}

    def leftovers(self) -> list[dict]:
        """The run's DLC containers still present (running or not): those of its frameworks,
        and any other DLC container whose environment carries the run's marker (one created
        after a framework change the watcher had not seen yet)."""
        out = []
        listed = self.client.api.containers(all=True, filters={"label": LABEL_FRAMEWORK})
        for c in listed:
            if c["Labels"].get(LABEL_FRAMEWORK) in self.framework_ids or self._marked(c["Id"]):
                out.append(c)
        return out

    def _marked(self, container_id: str) -> bool:
        try:
            env = self.client.api.inspect_container(container_id)["Config"].get("Env") or ()
        except docker.errors.APIError:
            return False
        return f"{RUN_ENV}={self.run_id}" in env

    def remove(self, containers: list[dict]) -> None:
        """Remove the run's leftover containers (cleanup after counting)."""
        for c in containers:
            with contextlib.suppress(docker.errors.APIError):
                self.client.api.remove_container(c["Id"], force=True)
