"""The ``shim`` backend's files on the agent: the built library and each task's config.

:func:`~dlc.executor.sharing.render.render_share` mounts them read-only into the container
(pure); this module finds ``libdlc_cuda_shim.so`` and writes a task's ``cuda-shim.conf`` and
``ld.so.preload`` under ``root/<task>/`` before the container is created, and removes them
after it is gone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from dlc.errors import ContainerError
from dlc.executor.sharing.render import (
    DEFAULT_CONTEXT_MIB,
    ShimFiles,
    shim_config_text,
    shim_preload_text,
)
from dlc.scheduler.jobs.launch_spec import GpuShare

DEFAULT_ROOT = "/var/run/dlc-shim"
#: where ``make setup`` builds the library in a checkout, and where packages install it
_CHECKOUT_LIBRARY = (
    Path(__file__).resolve().parents[3] / "native/cuda_shim/build/libdlc_cuda_shim.so"
)
_INSTALLED_LIBRARY = Path("/usr/lib/dlc/libdlc_cuda_shim.so")


def find_library(env: Mapping[str, str] | None = None) -> str | None:
    """``$DLC_CUDA_SHIM``, else the checkout's build, else ``/usr/lib/dlc``; None if none."""
    env = os.environ if env is None else env
    for candidate in (env.get("DLC_CUDA_SHIM"), _CHECKOUT_LIBRARY, _INSTALLED_LIBRARY):
        if candidate and os.path.isfile(candidate):
            return str(candidate)
    return None


class ShimStore:
    """Per-task shim files under ``root`` (thread-safe: one folder per task).

    Args:
        root: host folder for the tasks' files.
        library: the shim library; default :func:`find_library`.
        context_mib: the context footprint the shim counts (``$DLC_SHIM_CONTEXT_MIB``).
    """

    def __init__(
        self, root: str = DEFAULT_ROOT, library: str | None = None, context_mib: int | None = None
    ) -> None:
        self.root = root
        self.library = library
        if context_mib is None:
            context_mib = int(os.environ.get("DLC_SHIM_CONTEXT_MIB", DEFAULT_CONTEXT_MIB))
        self.context_mib = context_mib

    def folder(self, task_id: str) -> str:
        """The task's folder (its id made a safe file name)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
        return os.path.join(self.root, safe)

    def write(self, task_id: str, share: GpuShare) -> ShimFiles:
        """Write the task's config and preload file.

        Raises:
            ContainerError: the library is not built, or the files cannot be written.
        """
        library = self.library or find_library()
        if library is None:
            raise ContainerError(
                "shim share: libdlc_cuda_shim.so not found on this agent; run `make setup` "
                "(builds native/cuda_shim with gcc) or set DLC_CUDA_SHIM to its path"
            )
        folder = self.folder(task_id)
        files = ShimFiles(
            library, os.path.join(folder, "cuda-shim.conf"), os.path.join(folder, "ld.so.preload")
        )
        try:
            os.makedirs(folder, mode=0o755, exist_ok=True)
            for path, text in (
                (files.config, shim_config_text(share, self.context_mib)),
                (files.preload, shim_preload_text()),
            ):
                with open(path, "w", encoding="utf-8") as out:
                    out.write(text)
                os.chmod(path, 0o644)  # the container's non-root user reads them
        except OSError as exc:
            raise ContainerError(f"shim share: cannot write {folder}: {exc}") from None
        return files

    def remove(self, task_id: str) -> None:
        """Forget the task's files (the container is gone)."""
        shutil.rmtree(self.folder(task_id), ignore_errors=True)
