"""Opening and creating paths beneath a directory descriptor without ever following a link.

Paths that come from users or containers (a ``--workdir`` snapshot's entries, a ``dlc cp`` path
into ``/outputs``) must not reach outside their folder, whatever links the folder holds and
however it changes meanwhile. Checking a path's string and then opening it by name leaves both
holes open: the kernel follows links the string check never saw (red-team 2026-11-23 and
2026-11-26). So every component is opened relative to its parent's descriptor with
``O_NOFOLLOW``: a link anywhere fails the open (``ELOOP``, or ``ENOTDIR`` for a link where a
directory is wanted) instead of being followed, and ``..`` is never a component.

The functions raise :class:`OSError` as the kernel reports it; callers turn it into their own
one-line error.
"""

from __future__ import annotations

import errno
import os

#: flags of every open here: never follow a link, never leak the descriptor to a child
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
#: errnos that mean "a component is a link (or not a directory)": the path goes through one
THROUGH_LINK = (errno.ELOOP, errno.ENOTDIR)


def split_relative(path: str) -> list[str]:
    """The components of a relative path; ``.`` and empty components are dropped.

    Raises:
        ValueError: an absolute path, a NUL byte or a ``..`` component.
    """
    if path.startswith("/") or "\0" in path:
        raise ValueError("absolute or holds a NUL byte")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("has a '..' component")
    return parts


def open_dir(parent_fd: int, names: list[str], create_mode: int | None = None) -> int:
    """A descriptor of the directory ``names`` beneath ``parent_fd`` (``[]``: a duplicate).

    Each component is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to the one before.
    With ``create_mode``, missing components are made (``mkdirat``) with that mode, set with
    ``fchmod`` so that the umask does not narrow it. The caller closes the descriptor.

    Raises:
        OSError: ``ELOOP``/``ENOTDIR`` (see :data:`THROUGH_LINK`) for a component that is a
            link or not a directory, ``ENOENT`` for a missing one without ``create_mode``.
    """
    fd = os.dup(parent_fd)
    try:
        for name in names:
            child = _open_child_dir(fd, name, create_mode)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child_dir(fd: int, name: str, create_mode: int | None) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if create_mode is None:
            raise
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
    except FileExistsError:  # made meanwhile: open whatever is there, still without following
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    child = os.open(name, DIR_FLAGS, dir_fd=fd)
    os.fchmod(child, create_mode)
    return child


def open_file(parent_fd: int, name: str, flags: int, mode: int = 0o600) -> int:
    """Open ``name`` in the directory ``parent_fd`` with ``flags | O_NOFOLLOW | O_CLOEXEC``.

    Raises:
        OSError: ``ELOOP`` when ``name`` is a link, or whatever else the open reports.
    """
    if not name or "/" in name or name in (".", ".."):
        raise OSError(errno.EINVAL, f"not a single path component: {name[:80]!r}")
    return os.open(name, flags | NOFOLLOW, mode, dir_fd=parent_fd)


def open_beneath(root_fd: int, names: list[str], flags: int) -> int:
    """Open the file ``names`` beneath ``root_fd`` without following any link on the way.

    Raises:
        OSError: as :func:`open_dir` and :func:`open_file`; ``ENOENT`` for an empty path.
    """
    if not names:
        raise OSError(errno.ENOENT, "empty path")
    parent = open_dir(root_fd, names[:-1])
    try:
        return open_file(parent, names[-1], flags)
    finally:
        os.close(parent)
