"""What :class:`~dlc.executor.task_runner.TaskRunner` calls around a share's container.

``prepare`` (before create: starts the GPU's MPS daemon for its first share, checks a MIG
device still exists, writes a ``shim`` share's config, renders the container arguments),
``started`` (the watchdog begins), ``outcome`` (the watchdog's TASK_FAILED message, if it
ended the task) and ``finished`` (after the container is removed: stops watching, stops the
MPS daemon after the GPU's last share, removes a ``shim`` share's files).
On simulated GPUs (GPU style ``none``) nothing is started and nothing is enforced.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dlc.errors import ContainerError
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.mig import MigDevice, find_mig_device, list_mig_devices
from dlc.executor.sharing.mps import MpsManager
from dlc.executor.sharing.render import LABEL_SHARING, ShareArgs, render_share
from dlc.executor.sharing.shim import ShimStore
from dlc.executor.sharing.watchdog import (
    MemoryWatchdog,
    Violation,
    pids_from_cgroups,
    pids_from_top,
)
from dlc.scheduler.jobs.launch_spec import GpuShare

log = logging.getLogger(__name__)

#: the reason a watchdog-ended task reports
REASON_SHARE_EXCEEDED = "REASON_CONTAINER_LIMITATION"


def _load_nvml() -> Any:
    import pynvml  # noqa: PLC0415 - only agents with shares need NVML

    pynvml.nvmlInit()
    return pynvml


class ShareHook:
    """Per-executor share lifecycle (thread-safe).

    Args:
        mps: the MPS daemons (a default manager when ``None``).
        nvml_factory: returns an initialised NVML binding (watchdog, MIG); lazy.
        stop_container: ``container_id -> None`` used when the watchdog ends a task; the
            runner binds it with :meth:`bind`.
        pids_of: container id -> host pids (default: the Docker API's top, else cgroups).
        shim: where ``shim`` shares' files are written (a default store when ``None``).
    """

    def __init__(
        self,
        mps: MpsManager | None = None,
        nvml_factory: Callable[[], Any] = _load_nvml,
        stop_container: Callable[[str], None] | None = None,
        pids_of: Callable[[str], Any] | None = None,
        interval_s: float = 2.0,
        shim: ShimStore | None = None,
    ) -> None:
        self.mps = mps or MpsManager()
        self.shim = shim or ShimStore()
        self.nvml_factory = nvml_factory
        self.stop_container = stop_container
        self.pids_of = pids_of or pids_from_cgroups
        self.interval_s = interval_s
        self._nvml: Any = None
        self._watchdog: MemoryWatchdog | None = None
        self._shares: dict[str, tuple[GpuShare, bool]] = {}  # task -> (share, uses MPS)
        self._violations: dict[str, Violation] = {}
        self._lock = threading.Lock()

    def bind(self, runtime: Any, grace_s: float) -> None:
        """Use ``runtime`` to stop violating containers and (Docker) to list their pids."""
        if self.stop_container is None:
            self.stop_container = lambda cid: runtime.stop(cid, grace_s)
        client = getattr(runtime, "client", None)
        if client is not None and self.pids_of is pids_from_cgroups:
            self.pids_of = lambda cid: pids_from_top(client.api.top(cid))

    def nvml(self) -> Any:
        """The NVML binding, initialised on first use."""
        if self._nvml is None:
            self._nvml = self.nvml_factory()
        return self._nvml

    def prepare(
        self,
        task_id: str,
        share: GpuShare,
        style: GpuStyle,
        driver_version: str | None,
        device_root: str = "/dev",
    ) -> ShareArgs:
        """Ready the node for ``share`` and render its container arguments.

        Raises:
            ContainerError: the MPS daemon would not start, or the MIG device is gone.
        """
        if style is GpuStyle.NONE:  # simulated GPUs: nothing to start, nothing enforced
            args = render_share(replace(share, backend="none"), style)
            with self._lock:  # kept as "none": no NVML to watch it with (started() skips it)
                self._shares[task_id] = (replace(share, backend="none"), False)
            return replace(
                args, labels={**args.labels, LABEL_SHARING: f"{share.backend}-simulated"}
            )
        pipe_dir, shim_files = None, None
        if share.backend == "mig":
            self._check_mig(share)
        if share.backend == "shim":
            shim_files = self.shim.write(task_id, share)
        if share.backend == "mps":
            pipe_dir = self.mps.acquire(task_id, share).pipe_dir
        with self._lock:
            self._shares[task_id] = (share, share.backend == "mps")
        return self._render(
            task_id, share, style, driver_version, pipe_dir, device_root, shim_files
        )

    def _render(self, task_id, share, style, driver, pipe_dir, device_root, shim_files):
        try:
            return render_share(share, style, driver, pipe_dir, device_root, shim_files)
        except Exception:
            self.finished(task_id)  # nothing will run: give the daemon and files back
            raise

    def started(self, task_id: str, container_id: str) -> None:
        """The container runs: watch its memory when the backend is ``watchdog``, ``mps`` or
        ``shim`` (the backstop for what the shim cannot see: raw ioctls, static binaries).

        Under MPS too: its memory cap is the client variable ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``,
        which the job owns; unset or raised, a 2,048 MiB share got 6,144 MiB on the H100
        (red-team 2026-11-23, ``scripts/redteam_mps_override.py``). NVML lists MPS clients.
        """
        with self._lock:
            share, _ = self._shares.get(task_id, (None, False))
        watched = ("watchdog", "mps", "shim")
        if share is None or share.backend not in watched or share.memory_mib <= 0:
            return
        self._watchdog_started().watch(task_id, container_id, share)

    def outcome(self, task_id: str) -> tuple[str, str, str] | None:
        """``(TASK_FAILED, message, reason)`` when the watchdog ended the task, else ``None``."""
        with self._lock:
            violation = self._violations.pop(task_id, None)
        if violation is None:
            return None
        return "TASK_FAILED", violation.message, REASON_SHARE_EXCEEDED

    def finished(self, task_id: str) -> None:
        """The container is gone: stop watching; stop the MPS daemon after the last share."""
        with self._lock:
            share, uses_mps = self._shares.pop(task_id, (None, False))
        if self._watchdog is not None:
            self._watchdog.unwatch(task_id)
        if share is not None and uses_mps:
            self.mps.release(task_id, share.gpu_index)
        if share is not None and share.backend == "shim":
            self.shim.remove(task_id)

    def close(self) -> None:
        """Stop the watchdog thread."""
        if self._watchdog is not None:
            self._watchdog.stop()

    # internals -----------------------------------------------------------------------------
    def _watchdog_started(self) -> MemoryWatchdog:
        with self._lock:
            if self._watchdog is None:
                self._watchdog = MemoryWatchdog(
                    self.nvml(), self.pids_of, self._exceeded, self.interval_s
                )
                self._watchdog.start()
            return self._watchdog

    def _exceeded(self, violation: Violation) -> None:
        with self._lock:
            self._violations[violation.task_id] = violation
        log.warning("task %s: %s", violation.task_id, violation.message)
        if self.stop_container is not None:
            try:
                self.stop_container(violation.container_id)
            except ContainerError as exc:
                log.warning("task %s: stopping after the watchdog: %s", violation.task_id, exc)

    def _check_mig(self, share: GpuShare) -> MigDevice:
        try:
            devices = list_mig_devices(self.nvml())
        except Exception as exc:  # NVML missing or broken on this agent
            raise ContainerError(
                f"mig share: cannot list MIG devices through NVML ({exc})"
            ) from None
        device = find_mig_device(devices, share.gpu_uuid or "")
        if device is None:
            raise ContainerError(
                f"mig share: MIG device {share.gpu_uuid} does not exist on this agent "
                "(DLC never creates MIG instances; the operator must)"
            )
        return device
