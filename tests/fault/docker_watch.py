"""What the Docker engine saw: containers of one run, their GPUs and start/die times.

A watcher thread reads the engine's live event stream (``docker events --filter
type=container``) from before the cluster starts until the run is judged, and keeps every
event of a DLC container. An event carries all the container's labels, and the executor puts
what it was given on them (``dlc.gpus``, ``dlc.gpu_share``, ``dlc.sim_agent``), so nothing
has to be inspected while the container still exists: a container created and removed within a
second is counted like any other. The engine's own event log (``since``/``until``) is merged in
as a second source; it is not relied on alone because the engine keeps only its last 256 events.
The stream ending before :meth:`DockerWatch.stop` is reported (``stream_errors``): launches
after it could be missed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import docker

from dlc.executor.container_spec import LABEL_EXECUTOR, LABEL_FRAMEWORK, LABEL_JOB, LABEL_TASK
from dlc.executor.gpu_claim import LABEL_GPUS, parse_gpus_label
from dlc.executor.sharing.render import LABEL_SHARE
from dlc.executor.task_runner import LABEL_SIM_AGENT
from tests.fault.checks import Container

RUN_ENV = "FAULT_RUN"  # put into every job's env: marks the run's containers


def _share(text: str | None) -> tuple[int, int] | None:
    """(GPU, MiB) of a ``dlc.gpu_share`` label (``GPU:MiB:milli:backend``)."""
    parts = (text or "").split(":")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


def fold(events: list[dict], job_ids: set[str]) -> list[Container]:
    """The containers of ``job_ids`` from raw engine events (each counted once)."""
    found: dict[str, Container] = {}
    seen: set[tuple] = set()
    for event in sorted(events, key=lambda e: e.get("timeNano", 0)):
        attrs = event.get("Actor", {}).get("Attributes", {})
        cid = event.get("id") or event.get("Actor", {}).get("ID", "")
        action = event.get("Action") or event.get("status")
        key = (cid, action, event.get("timeNano"))
        if attrs.get(LABEL_JOB) not in job_ids or LABEL_TASK not in attrs or key in seen:
            continue
        seen.add(key)
        gpus = tuple(sorted(parse_gpus_label(attrs[LABEL_GPUS]))) if LABEL_GPUS in attrs else None
        c = found.setdefault(
            cid,
            Container(
                cid, attrs[LABEL_JOB], attrs[LABEL_TASK], gpus,
                share=_share(attrs.get(LABEL_SHARE)), agent=attrs.get(LABEL_SIM_AGENT, ""),
            ),
        )  # fmt: skip
        at = event.get("timeNano", 0) / 1e9 or float(event.get("time", 0))
        if action == "start":
            c.starts += 1
            c.start = at if c.start is None else c.start
        elif action == "die":
            c.die = at
            code = str(attrs.get("exitCode", ""))
            c.exit_code = int(code) if code.lstrip("-").isdigit() else None
    return list(found.values())


class DockerWatch:
    """Record every DLC container event from :meth:`start` to :meth:`stop`."""

    def __init__(self, run_id: str, job_ids: Callable[[], set[str]] = set):
        self.run_id = run_id
        self.job_ids = job_ids  # the ids the API gave the run's jobs so far
        self.client = docker.from_env(timeout=30)
        self.events: list[dict] = []
        self.stream_errors: list[str] = []
        self.since = time.time()
        self._stream = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> DockerWatch:
        filters = {"type": "container", "label": LABEL_FRAMEWORK}
        self._stream = self.client.events(decode=True, filters=filters)
        self._thread = threading.Thread(target=self._loop, name="fault-docker-watch", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            for event in self._stream:
                with self._lock:
                    self.events.append(event)
        except Exception as exc:  # noqa: BLE001 - closed by stop(), or broken: said below
            if not self._stopping.is_set():
                self.stream_errors.append(f"docker event stream broke: {exc}")
            return
        if not self._stopping.is_set():
            self.stream_errors.append("docker event stream ended before the run did")

    def stop(self) -> None:
        self._stopping.set()
        if self._stream is not None:
            self._stream.close()

    def containers(self, until: float) -> list[Container]:
        """The run's containers with their start/die times and GPUs."""
        logged = self.client.events(
            since=int(self.since) - 1,
            until=int(until) + 1,
            decode=True,
            filters={"type": "container", "label": LABEL_FRAMEWORK},
        )
        with self._lock:
            events = list(self.events)
        return fold(events + list(logged), self.job_ids())

    def framework_ids(self) -> set[str]:
        """Frameworks that launched containers of the run's jobs."""
        job_ids = self.job_ids()
        with self._lock:
            events = list(self.events)
        return {
            attrs.get(LABEL_FRAMEWORK, "")
            for e in events
            if (attrs := e.get("Actor", {}).get("Attributes", {})).get(LABEL_JOB) in job_ids
        }

    def busy_executors(self) -> set[str]:
        """Executor ids of the run's running containers."""
        running = [c for c in self.leftovers() if c.get("State") == "running"]
        return {c["Labels"].get(LABEL_EXECUTOR, "") for c in running}

    def leftovers(self) -> list[dict]:
        """The run's DLC containers still present (running or not): those of its jobs or of
        their frameworks, and any other DLC container whose environment carries the run's
        marker."""
        job_ids, frameworks = self.job_ids(), self.framework_ids()
        out = []
        listed = self.client.api.containers(all=True, filters={"label": LABEL_FRAMEWORK})
        for c in listed:
            labels = c["Labels"]
            if (
                labels.get(LABEL_JOB) in job_ids
                or labels.get(LABEL_FRAMEWORK) in frameworks
                or self._marked(c["Id"])
            ):
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
