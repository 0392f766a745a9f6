"""The Docker engine adapter: the only DLC module that calls the docker SDK.

Everything the executor and ``dlc cleanup`` do to containers goes through
:class:`DockerRuntime`, which turns docker SDK exceptions into :class:`~dlc.errors.ContainerError`
or :class:`~dlc.errors.ImageNotFound` with a reason a person understands.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dlc.errors import ContainerError, ImageNotFound

ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class ContainerInfo:
    """A DLC container as the engine lists it."""

    id: str
    name: str
    status: str
    labels: dict[str, str]


@dataclass(frozen=True)
class ExitInfo:
    """How a container ended."""

    exit_code: int
    oom_killed: bool = False


def registry_of(image: str) -> str:
    """The registry host of an image reference (``docker.io`` for Docker Hub names)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def pull_progress_text(image: str, layers: dict[str, tuple[int, int]]) -> str | None:
    """``"pulling <image>: 45% (12/27 MB)"`` from per-layer ``(current, total)`` bytes."""
    total = sum(t for _, t in layers.values())
    if total <= 0:
        return None
    done = sum(min(c, t) for c, t in layers.values())
    mb = 1024 * 1024
    return f"pulling {image}: {100 * done // total}% ({done // mb}/{max(1, round(total / mb))} MB)"


#: engine/registry phrases meaning "no such image" (pull: 404 manifest; Hub: no repository)
_MISSING_IMAGE = (
    "manifest unknown",
    "repository does not exist",
    "no such image",
    "pull access denied",
)


def explain_engine_error(image: str, text: str) -> Exception:
    """A DLC error for an engine message about ``image`` (pull, create or start)."""
    lowered = text.lower()
    registry = registry_of(image)
    bad_exec = "exec" in lowered and "no such file or directory" in lowered
    if "executable file not found" in lowered or bad_exec:
        return ContainerError(
            f"bad command: executable file not found in the image {image} ({text})"
        )
    if any(s in lowered for s in _MISSING_IMAGE):
        return ImageNotFound(f"image {image} not found in registry {registry}")
    if any(s in lowered for s in ("connection refused", "no such host", "dial tcp", "timeout")):
        return ContainerError(f"registry {registry} unreachable while pulling {image}: {text}")
    if "unauthorized" in lowered or "denied" in lowered:
        return ContainerError(f"registry {registry} refused access to {image}: {text}")
    return ContainerError(f"docker: {text}")


#: bytes of output kept per sandbox file (stdout, stderr) of one executor
SANDBOX_LOG_CAP = 1 << 30
_TRUNCATED_NOTE = b"\n[dlc: output truncated here: the sandbox keeps at most 1 GiB per stream]\n"


#: ``<stream>.ts`` beside each sandbox file: ``UNIX_SECONDS OFFSET`` lines for ``--since``
TIME_INDEX_SUFFIX = ".ts"


class TimeIndex:
    """When the output at each offset arrived, one line per second that saw output.

    ``dlc logs --since`` reads it to find where to start. The time is the arrival from the
    engine's follow stream (milliseconds after the container wrote it); the engine's own
    ``timestamps=True`` would put a stamp in every line, and lines over 16 KiB come split in
    several stamped messages that could not be told apart from the output to strip them.
    """

    def __init__(self, path: str, clock=time.time):
        self.path, self.clock, self.last = path, clock, -1

    def note(self, offset: int) -> None:
        """Record that output from ``offset`` on arrived now (once per second)."""
        second = int(self.clock())
        if second == self.last:
            return
        self.last = second
        try:
            with open(self.path, "a") as fh:
                fh.write(f"{second} {offset}\n")
        except OSError:  # no index, no --since; the output itself matters more
            return


class DockerRuntime:
    """Container operations on one Docker engine.

    Args:
        client: a ``docker.DockerClient``; default ``docker.from_env()``.
    """

    def __init__(self, client=None):
        import docker  # imported here so that the pure modules never pull in the SDK

        self._docker = docker
        try:
            self.client = client or docker.from_env(timeout=120)
            self.client.ping()
        except docker.errors.DockerException as exc:
            raise ContainerError(
                f"Docker engine not reachable ({exc}); is dockerd running?"
            ) from None

    # engine facts ---------------------------------------------------------------------------
    def engine_runtimes(self) -> frozenset[str]:
        """Runtimes registered with the engine (``docker info`` Runtimes)."""
        return frozenset((self.client.info().get("Runtimes") or {}).keys())

    def engine_state(self) -> tuple[tuple[str, str], ...]:
        """``(path, what)`` of where this engine keeps its data (``docker info``
        ``DockerRootDir``): every container's files and configuration, wherever the operator
        moved it (``data-root``), which no job volume may reach.

        Raises:
            ContainerError: the engine did not answer.
        """
        try:
            root = self.client.info().get("DockerRootDir") or ""
        except self._docker.errors.DockerException as exc:
            raise ContainerError(f"cannot ask the Docker engine where its data is: {exc}") from None
        return ((root, "the Docker engine's data"),) if root.startswith("/") else ()

    def volume_exists(self, name: str) -> bool:
        """Whether a named volume exists (e.g. ``nvidia_driver_535.104.05``)."""
        try:
            self.client.volumes.get(name)
            return True
        except self._docker.errors.NotFound:
            return False

    # images -----------------------------------------------------------------------------------
    def image_env(self, image: str) -> dict[str, str] | None:
        """The image's ``Config.Env`` as a dict, or ``None`` when it is not present locally."""
        try:
            attrs = self.client.api.inspect_image(image)
        except self._docker.errors.ImageNotFound:
            return None
        env = (attrs.get("Config") or {}).get("Env") or []
        return dict(item.partition("=")[::2] for item in env)

    def ensure_image(self, image: str, progress: ProgressFn | None = None, every_s=2.0) -> dict:
        """Pull ``image`` unless present; report progress at most every ``every_s`` seconds.

        Returns:
            The image's environment.

        Raises:
            ImageNotFound: the registry does not have it.
            ContainerError: the registry is unreachable or refuses access.
        """
        env = self.image_env(image)
        if env is not None:
            return env
        self._pull(image, progress or (lambda _msg: None), every_s)
        env = self.image_env(image)
        if env is None:
            raise ImageNotFound(f"image {image} not present after pulling it")
        return env

    def _pull(self, image: str, progress: ProgressFn, every_s: float) -> None:
        repo, tag = _split_tag(image)
        layers: dict[str, tuple[int, int]] = {}
        last = 0.0
        progress(f"pulling {image}")
        try:
            for event in self.client.api.pull(repo, tag=tag, stream=True, decode=True):
                if "error" in event:
                    raise explain_engine_error(image, str(event["error"]))
                detail = event.get("progressDetail") or {}
                if event.get("status") == "Downloading" and detail.get("total"):
                    layers[event["id"]] = (detail.get("current", 0), detail["total"])
                elif (
                    event.get("status") in ("Download complete", "Pull complete")
                    and event.get("id") in layers
                ):
                    total = layers[event["id"]][1]
                    layers[event["id"]] = (total, total)
                text = pull_progress_text(image, layers)
                if text and time.monotonic() - last >= every_s:
                    last = time.monotonic()
                    progress(text)
        except self._docker.errors.APIError as exc:
            raise explain_engine_error(image, str(exc.explanation or exc)) from None
        progress(f"pulled {image}")

    # containers -------------------------------------------------------------------------------
    def create(self, kwargs: dict) -> str:
        """Create a container from :func:`~dlc.executor.container_spec.create_kwargs` output.

        Returns:
            The container id.
        """
        kwargs = dict(kwargs)
        kwargs["device_requests"] = [
            self._docker.types.DeviceRequest(
                driver=r["Driver"], device_ids=r["DeviceIDs"], capabilities=r["Capabilities"]
            )
            for r in kwargs.get("device_requests", [])
        ]
        image = kwargs.pop("image")
        masked = kwargs.pop("masked_paths", None)
        try:
            if not masked:
                return self.client.containers.create(image, **kwargs).id
            return self._create_masked(image, kwargs, masked)
        except self._docker.errors.DockerException as exc:
            raise explain_engine_error(image, _text(exc)) from None

    def _create_masked(self, image: str, kwargs: dict, masked: list[str]) -> str:
        """``containers.create`` with the host config's ``MaskedPaths`` set, which the SDK's
        keyword arguments cannot carry (the engine API can): the SDK's own conversion of the
        arguments, then the low-level call."""
        # private in the SDK, so its type stubs do not list it
        from docker.models.containers import _create_container_args  # type: ignore[attr-defined]

        args = _create_container_args(
            {**kwargs, "image": image, "version": self.client.api._version}
        )
        args["host_config"]["MaskedPaths"] = list(masked)
        return self.client.api.create_container(**args)["Id"]

    def start(self, container_id: str, image: str = "") -> None:
        """Start a created container."""
        try:
            self.client.api.start(container_id)
        except self._docker.errors.APIError as exc:
            raise explain_engine_error(image, _text(exc)) from None

    def wait(self, container_id: str) -> ExitInfo:
        """Block until the container exits."""
        try:
            result = self.client.api.wait(container_id)
            state = self.client.api.inspect_container(container_id)["State"]
        except self._docker.errors.DockerException as exc:
            raise ContainerError(
                f"waiting for container {container_id[:12]}: {_text(exc)}"
            ) from None
        return ExitInfo(int(result.get("StatusCode", -1)), bool(state.get("OOMKilled")))

    def follow_logs(
        self, container_id: str, stdout_path: str, stderr_path: str, tail: collections.deque
    ) -> list[threading.Thread]:
        """Append the container's output to the sandbox files as it comes (two threads).

        Every line also goes into ``tail`` (a bounded deque) for the final status message.
        """
        threads = []
        for path, out, err in ((stdout_path, True, False), (stderr_path, False, True)):
            thread = threading.Thread(
                target=self._copy_stream,
                args=(container_id, path, out, err, tail),
                name=f"logs-{container_id[:12]}-{'out' if out else 'err'}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        return threads

    def _copy_stream(self, container_id, path, stdout, stderr, tail) -> None:
        try:
            stream = self.client.api.logs(
                container_id, stdout=stdout, stderr=stderr, stream=True, follow=True
            )
            partial = b""
            written = os.path.getsize(path) if os.path.exists(path) else 0
            index = TimeIndex(path + TIME_INDEX_SUFFIX)
            with open(path, "ab", buffering=0) as sink:
                for chunk in stream:
                    index.note(min(written, SANDBOX_LOG_CAP))
                    # Past the cap the output is dropped (one note), never the disk filled;
                    # the tail keeps the last lines for the terminal message all the same.
                    if written < SANDBOX_LOG_CAP:
                        sink.write(chunk[: SANDBOX_LOG_CAP - written])
                        if written + len(chunk) >= SANDBOX_LOG_CAP:
                            sink.write(_TRUNCATED_NOTE)
                    written += len(chunk)
                    *lines, partial = (partial + chunk).split(b"\n")
                    tail.extend(line.decode(errors="replace") for line in lines)
            if partial:
                tail.append(partial.decode(errors="replace"))
        except (OSError, self._docker.errors.DockerException):
            return  # the container was removed under us; the exit path reports the task

    def stop(self, container_id: str, grace_s: float) -> None:
        """SIGTERM, wait ``grace_s`` seconds, then SIGKILL (no error if already gone)."""
        try:
            self.client.api.stop(container_id, timeout=max(0, int(round(grace_s))))
        except self._docker.errors.NotFound:
            return
        except self._docker.errors.APIError as exc:
            raise ContainerError(f"stopping container {container_id[:12]}: {_text(exc)}") from None

    def remove(self, container_id: str, timeout_s: float = 60.0) -> None:
        """Remove a container (forcefully; no error if already gone).

        Returns only once the container is gone, also when another thread's removal of it is
        already in progress (so a TASK_KILLED sent afterwards is true).
        """
        try:
            self.client.api.remove_container(container_id, force=True)
            return
        except self._docker.errors.NotFound:
            return
        except self._docker.errors.APIError as exc:
            if "already in progress" not in _text(exc):
                raise ContainerError(
                    f"removing container {container_id[:12]}: {_text(exc)}"
                ) from None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self.client.api.inspect_container(container_id)
            except self._docker.errors.NotFound:
                return
            time.sleep(0.1)
        raise ContainerError(f"container {container_id[:12]} still not removed after {timeout_s}s")

    def list_containers(self, labels: dict[str, str | None]) -> list[ContainerInfo]:
        """Containers (running or not) carrying all ``labels`` (a ``None`` value: any value)."""
        filters = [k if v is None else f"{k}={v}" for k, v in labels.items()]
        try:
            found = self.client.api.containers(all=True, filters={"label": filters})
        except self._docker.errors.DockerException as exc:
            raise ContainerError(f"listing containers: {_text(exc)}") from None
        return [
            ContainerInfo(
                c["Id"], (c.get("Names") or ["?"])[0].lstrip("/"), c["State"], c["Labels"]
            )
            for c in found
        ]

    def remove_all(self, containers: Iterable[ContainerInfo], grace_s: float) -> list[str]:
        """Stop (with grace) and remove each container; returns the removed ids."""
        removed = []
        for info in containers:
            if info.status == "running":
                self.stop(info.id, grace_s)
            self.remove(info.id)
            removed.append(info.id)
        return removed


def _split_tag(image: str) -> tuple[str, str]:
    """``repo[:tag]`` -> (repo, tag); a ``:`` before the last ``/`` is a registry port."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, digest
    head, _, last = image.rpartition("/")
    if ":" in last:
        name, tag = last.split(":", 1)
        return (f"{head}/{name}" if head else name), tag
    return image, "latest"


def _text(exc: Exception) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)
