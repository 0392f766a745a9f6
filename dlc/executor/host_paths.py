"""Host paths of a task's volumes, decided on the agent where the filesystem is.

The scheduler's submit-time check compares strings; Docker follows symlinks on the host. A job
with a read-write mount could plant ``hostroot -> /`` inside it and a second job mounting
``.../hostroot`` would get the host's root. So, before the container is created, the executor
walks every host path component by component from ``/``, each opened with
``O_PATH | O_NOFOLLOW`` relative to its parent's descriptor, and refuses when:

* a component is a symbolic link (anywhere: in the allowed prefix or below it);
* a component is ``..`` or ``.`` (no lexical tricks either);
* the path does not exist (Docker must never create host paths: volumes become
  ``type=bind`` mounts, which the engine refuses for a missing source);
* the path is not a directory or a regular file (no device nodes, sockets, FIFOs);
* the path is on a kernel filesystem (proc, sysfs, cgroup, ...: :mod:`dlc.executor.kernel_fs`),
  a view of the host and of other tenants' processes, never data;
* the path is not under an allowed prefix, or that prefix itself is not a real directory
  (a prefix with a symlink in it is unusable until the operator lists its real path);
* the path is, contains or lies inside DLC's own state on this agent (MPS pipes, shim files,
  sandboxes, the engine's socket, DLC's settings and code: :mod:`dlc.executor.state_paths`),
  whatever the allow-list says, by name, by inode and by its place in its filesystem (so a
  bind mount of a state folder, of one above it or of one below it is refused too).

With no symlink anywhere, the walked path *is* the resolved path, so the string that reaches the
engine names the same directory the walk checked.

The walk alone leaves a race: Docker mounts by path at container start, and a job with a
read-write mount of a parent directory can swap a checked component for a symlink in between
(a red-team run won 11 of 40 tries). :mod:`dlc.executor.volume_pins` closes it: the executor
re-opens each checked path with :func:`open_checked` and bind-mounts the descriptor itself onto
a private staging point, which is what Docker then mounts.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace

from dlc.errors import ContainerError
from dlc.executor.kernel_fs import kernel_filesystem
from dlc.executor.state_paths import Inode, ResolvedState, StatePath, default_state_paths, resolve
from dlc.images.reference import ImageReferenceError, registry_allowed
from dlc.scheduler.jobs.job import user_prefixes
from dlc.scheduler.jobs.launch_spec import LaunchSpec, Volume, parse_user
from dlc.scheduler.jobs.spec_rules import STATE_FIX, container_path_problem, duplicate_target

_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC


class MountRefused(ContainerError):
    """A volume's host path is unsafe or not allowed on this agent (the task fails)."""


class TaskRefused(ContainerError):
    """A task asks for something this agent's policy forbids (root, a registry)."""


@dataclass(frozen=True)
class _Problem:
    """Why a walk stopped: the offending path prefix and what it is."""

    at: str
    what: str  # "symlink", "missing", "not a directory", "unreadable"


def split_path(path: str) -> list[str]:
    """The components of an absolute path; ``//`` and a trailing ``/`` are tolerated.

    Raises:
        ValueError: not absolute, a NUL byte, or a ``.``/``..`` component.
    """
    if not path.startswith("/") or "\0" in path:
        raise ValueError("must be an absolute path without NUL bytes")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError("must not contain '.' or '..' components")
    return parts


def _join(parts: Iterable[str]) -> str:
    return "/" + "/".join(parts)


def walk(
    path: str, seen: list[Inode] | None = None
) -> tuple[os.stat_result | None, _Problem | None]:
    """Open ``path`` component by component without following any symlink.

    Args:
        seen: when given, receives the inode of ``/`` and of each component opened.

    Returns:
        ``(stat of the last component, None)``, or ``(None, problem)`` naming the first
        component that is a symlink, missing, not a directory, or unreadable.
    """
    fd, info, problem = _walk(path, seen)
    if fd is not None:
        os.close(fd)
    return info, problem


def open_checked(volume: Volume) -> tuple[int, os.stat_result]:
    """An ``O_PATH`` descriptor of the volume's host path, opened without following symlinks.

    The caller owns (and closes) the descriptor: it names the inode the walk checked, however
    the path changes afterwards (see :mod:`dlc.executor.volume_pins`).

    Raises:
        MountRefused: the path is no longer safe (it changed since :func:`check_volume`).
    """
    fd, info, problem = _walk(volume.host_path)
    if problem is not None:
        name = f"volume {volume.host_path}:{volume.container_path}"
        raise MountRefused(f"{name}: {_explain(problem)} (it changed after it was checked)")
    assert fd is not None and info is not None  # _walk gives both when it finds no problem
    try:
        _refuse_kernel_view(fd, f"volume {volume.host_path}:{volume.container_path}")
    except MountRefused:
        os.close(fd)
        raise
    return fd, info


def _refuse_kernel_view(fd: int, name: str) -> None:
    """Refuse a volume on a kernel filesystem (the descriptor is the walked path's)."""
    kind = kernel_filesystem(fd)
    if kind:
        raise MountRefused(
            f"{name}: the host path is on the host's {kind} filesystem, a view of the host's "
            "kernel and of every process on it (other tenants' included), not data; mount a "
            "data directory"
        )


def _walk(
    path: str, seen: list[Inode] | None = None
) -> tuple[int | None, os.stat_result | None, _Problem | None]:
    parts = split_path(path)
    seen = [] if seen is None else seen
    fd = os.open("/", _FLAGS | os.O_DIRECTORY)
    try:
        info = os.fstat(fd)
        seen.append((info.st_dev, info.st_ino))
        for depth, name in enumerate(parts, 1):
            here = _join(parts[:depth])
            if not stat.S_ISDIR(info.st_mode):
                return None, None, _Problem(_join(parts[: depth - 1]), "not a directory")
            try:
                child = os.open(name, _FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None, None, _Problem(here, "missing")
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # O_NOFOLLOW without O_PATH reports a link so
                    return None, None, _Problem(here, "symlink")
                return None, None, _Problem(here, f"unreadable ({exc.strerror})")
            os.close(fd)
            fd = child
            info = os.fstat(fd)
            if stat.S_ISLNK(info.st_mode):
                return None, None, _Problem(here, "symlink")
            seen.append((info.st_dev, info.st_ino))
        kept, fd = fd, -1  # the caller's now: not closed below
        return kept, info, None
    finally:
        if fd >= 0:
            os.close(fd)


def _under(parts: list[str], prefix: list[str]) -> bool:
    return parts[: len(prefix)] == prefix


def check_volume(
    volume: Volume, allowed: tuple[str, ...], state: ResolvedState | None = None
) -> Volume:
    """The volume with its host path resolved, if it is safe to bind-mount here.

    Args:
        state: DLC's state on this agent, which no volume may reach (default: the state
            every agent has, :func:`~dlc.executor.state_paths.default_state_paths`).

    Raises:
        MountRefused: the reason, naming the volume and the fix.
    """
    name = f"volume {volume.host_path}:{volume.container_path}"
    problem = container_path_problem(volume.container_path)  # the rule submit applies too
    if problem:
        raise MountRefused(f"{name}: the container path {problem}")
    try:
        parts = split_path(volume.host_path)
    except ValueError as exc:
        raise MountRefused(f"{name}: the host path {exc}; give a plain absolute path") from None
    prefixes = []
    for prefix in allowed:
        try:
            prefixes.append((prefix, split_path(prefix)))
        except ValueError:
            continue  # a malformed operator entry allows nothing
    matching = [(text, p) for text, p in prefixes if _under(parts, p)]
    if not matching:
        shown = ", ".join(allowed) or "none"
        raise MountRefused(
            f"{name}: not under a host path this cluster allows ({shown}); mount a path under "
            "one of them (the scheduler's --allow-volume sets the list)"
        )
    problems = [(text, walk(_join(prefix))[1]) for text, prefix in matching]
    failed = [(text, bad) for text, bad in problems if bad is not None]
    if len(failed) == len(problems):
        text, bad = failed[0]
        raise MountRefused(
            f"{name}: the allowed prefix {text} is not a real directory on this agent "
            f"({bad.at} is {bad.what}); the operator must list the real, existing "
            "directory in --allow-volume"
        )
    walked: list[Inode] = []
    fd, info, found = _walk(volume.host_path, walked)
    if found is not None:
        raise MountRefused(f"{name}: {_explain(found)}")
    assert fd is not None and info is not None  # _walk gives both when it finds no problem
    try:
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            raise MountRefused(
                f"{name}: the host path is neither a directory nor a regular file; "
                "mount a directory or a file"
            )
        # no symlink anywhere in it (the walk): the joined path is the real one
        state = resolve(default_state_paths()) if state is None else state
        reason = state.problem(_join(parts), walked)
        if reason:  # the words submit gives too (/proc, /sys by name)
            raise MountRefused(f"{name}: {reason}; {STATE_FIX}")
        _refuse_kernel_view(fd, name)  # any other mount of them (a /proc/PID bound elsewhere)
        # then by place: a bind of a folder below state (#63); after the kernel view, whose
        # words say what a /proc/PID bound elsewhere is
        reason = state.place_problem(fd, _join(parts))
        if reason:
            raise MountRefused(f"{name}: {reason}; {STATE_FIX}")
    finally:
        os.close(fd)
    return replace(volume, host_path=_join(parts))


def _explain(problem: _Problem) -> str:
    if problem.what == "symlink":
        return (
            f"{problem.at} is a symbolic link on this agent and DLC mounts no path through "
            "a symlink; mount the real directory instead"
        )
    if problem.what == "missing":
        return (
            f"{problem.at} does not exist on this agent and DLC never creates host paths; "
            "create it first or fix the path"
        )
    return f"{problem.at} is {problem.what}; mount an existing directory you may read"


def check_user(spec: LaunchSpec) -> None:
    """Refuse a container user of uid or gid 0 unless the policy allows root.

    Raises:
        TaskRefused: malformed user, or root while the operator does not allow it.
    """
    try:
        uid, gid = parse_user(spec.policy.container_user)
    except ValueError as exc:
        raise TaskRefused(
            f"container user {exc}; the scheduler's --container-user takes e.g. 1000:1000"
        ) from None
    if 0 in (uid, gid) and not spec.policy.allow_root:
        raise TaskRefused(
            f"container user {spec.policy.container_user} is root, which this cluster does not "
            "allow; use a non-zero UID:GID (the operator may pass --allow-root)"
        )


def check_image(spec: LaunchSpec) -> None:
    """Refuse an image from a registry outside the allow-list (or a malformed reference).

    Raises:
        TaskRefused: the reason and the allowed registries.
    """
    try:
        reason = registry_allowed(spec.image, spec.policy.allowed_registries)
    except ImageReferenceError as exc:
        raise TaskRefused(f"image {spec.image[:300]!r}: {exc}") from None
    if reason:
        raise TaskRefused(reason)


def checked_spec(spec: LaunchSpec, state: Iterable[StatePath] | None = None) -> LaunchSpec:
    """``spec`` with every volume resolved, after the agent-side policy checks.

    The executor calls it just before creating the container (to keep the race window
    short); :func:`check_image` runs earlier, before the image is pulled.

    Args:
        state: DLC's state on this agent (the runner's own paths included), resolved here
            at each call; default :func:`~dlc.executor.state_paths.default_state_paths`.

    Raises:
        TaskRefused, MountRefused: one line naming what is refused and the fix.
    """
    check_user(spec)
    twice = duplicate_target(v.container_path for v in spec.volumes)
    if twice:
        raise MountRefused(f"two volumes are mounted at {twice[:200]}; give each its own path")
    allowed = user_prefixes(spec.policy.allowed_volumes, spec.user)
    if not spec.volumes:
        return spec
    resolved = resolve(default_state_paths() if state is None else state)
    return replace(spec, volumes=tuple(check_volume(v, allowed, resolved) for v in spec.volumes))
