"""One MPS control daemon per shared GPU, started with its first share, stopped after its last.

Why one per GPU (docs/sharing.md): a fatal fault in one MPS client is reported to every client
of that GPU's server, and a server covering several GPUs refuses all new clients until the
faulted ones exit. A daemon per GPU keeps the damage on that GPU.

Facts from the real H100 (docs/gpu-check.md): ``nvidia-cuda-mps-control -d`` with its own
``CUDA_MPS_PIPE_DIRECTORY``/``CUDA_MPS_LOG_DIRECTORY`` needs no change of compute mode;
``echo quit | nvidia-cuda-mps-control`` with the same pipe directory stops the server and the
daemon within about 0.1 s. The daemon is started with ``CUDA_VISIBLE_DEVICES`` set to the GPU's
UUID, so inside it the GPU is device 0 (what ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=...`` names).
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dlc.errors import ContainerError
from dlc.scheduler.jobs.launch_spec import GpuShare

log = logging.getLogger(__name__)

CONTROL = "nvidia-cuda-mps-control"
DEFAULT_ROOT = "/var/run/dlc-mps"

#: runs argv with env and stdin text; returns (exit code, combined output)
ProcessRunner = Callable[[list[str], Mapping[str, str], str | None], tuple[int, str]]


def subprocess_runner(
    argv: list[str], env: Mapping[str, str], stdin: str | None
) -> tuple[int, str]:
    """The real :data:`ProcessRunner` (``-d`` daemonises, so the call returns at once)."""
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            argv,
            env=dict(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


@dataclass(frozen=True)
class MpsDaemon:
    """Where one GPU's daemon and its clients meet."""

    gpu_index: int
    pipe_dir: str
    log_dir: str


class MpsManager:
    """Starts and stops per-GPU MPS control daemons as shares come and go (thread-safe).

    Args:
        root: host directory holding ``gpu<i>/pipe`` and ``gpu<i>/log`` per GPU.
        runner: how commands run (tests pass a fake).
        base_env: environment the daemon inherits (``PATH`` to find the control binary).
    """

    def __init__(
        self,
        root: str = DEFAULT_ROOT,
        runner: ProcessRunner = subprocess_runner,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.runner = runner
        self.base_env = dict(os.environ if base_env is None else base_env)
        self._users: dict[int, set[str]] = {}
        self._uuids: dict[int, str | None] = {}
        self._lock = threading.Lock()

    def daemon(self, gpu_index: int) -> MpsDaemon:
        """The pipe and log directories of GPU ``gpu_index``'s daemon."""
        base = os.path.join(self.root, f"gpu{gpu_index}")
        return MpsDaemon(gpu_index, os.path.join(base, "pipe"), os.path.join(base, "log"))

    def env(self, daemon: MpsDaemon, gpu_uuid: str | None) -> dict[str, str]:
        """The daemon's environment: its own directories and only its GPU visible."""
        env = dict(self.base_env)
        env["CUDA_MPS_PIPE_DIRECTORY"] = daemon.pipe_dir
        env["CUDA_MPS_LOG_DIRECTORY"] = daemon.log_dir
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid or str(daemon.gpu_index)
        return env

    def users(self, gpu_index: int) -> frozenset[str]:
        """The tasks holding a share of GPU ``gpu_index`` now."""
        with self._lock:
            return frozenset(self._users.get(gpu_index, ()))

    def acquire(self, task_id: str, share: GpuShare) -> MpsDaemon:
        """Register ``task_id`` on its GPU, starting that GPU's daemon for the first share.

        Raises:
            ContainerError: the daemon would not start.
        """
        daemon = self.daemon(share.gpu_index)
        with self._lock:
            users = self._users.setdefault(share.gpu_index, set())
            if not users:
                try:
                    self._start(daemon, share.gpu_uuid)
                except ContainerError:
                    del self._users[share.gpu_index]
                    raise
                self._uuids[share.gpu_index] = share.gpu_uuid
            users.add(task_id)
        return daemon

    def release(self, task_id: str, gpu_index: int) -> bool:
        """Forget ``task_id``; after the GPU's last share, stop its daemon.

        Returns:
            True when the daemon was asked to quit.
        """
        with self._lock:
            users = self._users.get(gpu_index)
            if not users or task_id not in users:
                return False
            users.discard(task_id)
            if users:
                return False
            del self._users[gpu_index]
            self._quit(self.daemon(gpu_index), self._uuids.pop(gpu_index, None))
            return True

    def _start(self, daemon: MpsDaemon, gpu_uuid: str | None) -> None:
        for path in (daemon.pipe_dir, daemon.log_dir):
            os.makedirs(path, mode=0o755, exist_ok=True)
        code, output = self.runner([CONTROL, "-d"], self.env(daemon, gpu_uuid), None)
        if code != 0:
            said = " | ".join(line for line in output[-300:].splitlines() if line.strip())
            raise ContainerError(
                f"MPS daemon for GPU {daemon.gpu_index} did not start (exit {code}): "
                f"{said or 'no output'}; is {CONTROL} installed on this agent?"
            )
        log.info("MPS daemon for GPU %s started (pipe %s)", daemon.gpu_index, daemon.pipe_dir)

    def _quit(self, daemon: MpsDaemon, gpu_uuid: str | None) -> None:
        code, output = self.runner([CONTROL], self.env(daemon, gpu_uuid), "quit\n")
        if code != 0:  # nothing to fail any more: the tasks have ended
            log.warning(
                "MPS daemon for GPU %s: quit failed (%s): %s", daemon.gpu_index, code, output
            )
