"""Pin each checked volume to the exact inode the check saw, closing the check-to-mount race.

:func:`dlc.executor.host_paths.check_volume` walks a host path without following symlinks,
but Docker mounts by *path* when the container starts. A job with a read-write mount of a
parent directory can swap a checked component for ``x -> /`` in between: a red-team run won
11 of 40 tries that way, writing outside ``--allow-volume``. So the executor re-opens each
volume's path the same safe way, keeps the ``O_PATH`` descriptor, and bind-mounts
``/proc/self/fd/N`` (the kernel resolves it to the opened inode, not to the path) onto a
private staging point under the executor's sandbox. Docker then mounts the staging point,
whose every component belongs to the executor. Swapping the original path after this moment
changes nothing the container sees.

Needs ``CAP_SYS_ADMIN`` (the executor runs as root on agents) and the host mount namespace
(the engine must see the staging mount). Without the capability the task fails closed with
one line: an unpinned mount could be redirected.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dlc.executor.host_paths import MountRefused, open_checked
from dlc.scheduler.jobs.launch_spec import LaunchSpec, Volume

log = logging.getLogger(__name__)

_MS_BIND = 4096
_MNT_DETACH = 2

#: ``(source, target)``: bind-mount source onto target, raising OSError on failure
Mounter = Callable[[str, str], None]


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def bind(source: str, target: str) -> None:
    """``mount --bind source target`` through libc (``source`` may be ``/proc/self/fd/N``).

    Raises:
        OSError: the kernel's refusal (EPERM without CAP_SYS_ADMIN).
    """
    libc = _libc()
    if libc.mount(source.encode(), target.encode(), None, _MS_BIND, None) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), target)


def unbind(target: str) -> None:
    """Lazily unmount ``target`` (MNT_DETACH); errors are logged, never raised."""
    libc = _libc()
    if libc.umount2(target.encode(), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):  # not mounted (any more): nothing to do
            log.warning("could not unmount %s: %s", target, os.strerror(code))


def pin_volumes(
    spec: LaunchSpec, staging: str | Path, mount: Mounter = bind, unmount=unbind
) -> tuple[LaunchSpec, Callable[[], None]]:
    """``spec`` with each volume's host path replaced by a pinned staging mount.

    Args:
        spec: a spec whose volumes :func:`~dlc.executor.host_paths.checked_spec` accepted.
        staging: a directory only the executor writes (created 0700).
        mount, unmount: the bind operations (tests pass fakes).

    Returns:
        The new spec and a cleanup function that unmounts and removes the staging points
        (call it after the container is removed).

    Raises:
        MountRefused: a path changed since the check, or the pin could not be made.
    """
    if not spec.volumes:
        return spec, lambda: None
    root = Path(staging)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    pinned: list[Volume] = []
    made: list[Path] = []

    def cleanup() -> None:
        for target in reversed(made):
            unmount(str(target))
            # a busy mount point stays; the sandbox is removed with the executor
            with contextlib.suppress(OSError):
                target.rmdir() if target.is_dir() else target.unlink()

    try:
        for number, volume in enumerate(spec.volumes):
            fd, info = open_checked(volume)
            try:
                target = root / f"v{number}"
                if stat.S_ISDIR(info.st_mode):
                    target.mkdir(mode=0o700, exist_ok=True)
                else:
                    target.touch(mode=0o600, exist_ok=True)
                made.append(target)
                mount(f"/proc/self/fd/{fd}", str(target))
            except OSError as exc:
                raise MountRefused(
                    f"volume {volume.host_path}:{volume.container_path}: cannot pin the checked "
                    f"directory ({exc.strerror}); the executor must run as root in the host "
                    "mount namespace to mount volumes safely"
                ) from None
            finally:
                os.close(fd)
            pinned.append(replace(volume, host_path=str(target)))
    except BaseException:
        cleanup()
        raise
    return replace(spec, volumes=tuple(pinned)), cleanup
