"""Where a directory lives in its filesystem, whatever mount it is reached through.

A bind mount gives a folder a second name. The inode check of :mod:`dlc.executor.state_paths`
catches a second name of a state folder or of a folder above one, but not of a folder *below*
one: ``mount --bind /run/dlc-mps/gpu0 /data/alias`` makes ``/data/alias`` the MPS pipes of
GPU 0, and none of its inodes is a state path's (red-team finding 63, docs/security.md).

The kernel knows the truth: every mount in ``/proc/self/mountinfo`` names its filesystem
(``major:minor``) and the folder of that filesystem it shows (the ``root`` field, ``/gpu0``
for the bind above). A directory's :class:`Place` is that device and its path inside the
filesystem: the mount's root joined with the path below the mount point. Two names of the same
folder have the same place; a folder below a state folder has a place below the state's.

:func:`parse_mountinfo` and :func:`place_in` are pure (text in, values out); :func:`place_of`
reads the mount ID of an open descriptor from ``/proc/self/fdinfo`` (the mount it was opened
through, so no guess among stacked mounts) and the table from ``/proc/self/mountinfo``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: ``\NNN`` octal escapes the kernel writes for space, tab, newline and backslash
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/self/mountinfo`` (the fields the place needs)."""

    mount_id: int
    device: tuple[int, int]  # (major, minor) of the filesystem
    root: str  # the folder of the filesystem this mount shows
    mount_point: str  # where it is mounted, relative to this process's root


@dataclass(frozen=True)
class Place:
    """A folder's place: its filesystem and its path inside that filesystem."""

    device: tuple[int, int]
    path: str

    def relation(self, other: Place) -> str | None:
        """``"is"``, ``"lies inside"`` or ``"contains"`` ``other``, or ``None`` when the two
        are on different filesystems or neither holds the other."""
        if self.device != other.device:
            return None
        if self.path == other.path:
            return "is"
        if _below(self.path, other.path):
            return "lies inside"
        if _below(other.path, self.path):
            return "contains"
        return None


def _below(path: str, top: str) -> bool:
    return top == "/" or path.startswith(top.rstrip("/") + "/")


def unescape(field: str) -> str:
    """A mountinfo path field as the path it names (``/data\\040x`` is ``/data x``)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> dict[int, MountEntry]:
    """The mounts of a ``/proc/PID/mountinfo`` text, by mount ID; malformed lines are skipped.

    A line reads ``36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw``: mount
    ID, parent ID, ``major:minor``, root, mount point, then options.
    """
    table: dict[int, MountEntry] = {}
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        try:
            mount_id = int(fields[0])
            major, minor = (int(n) for n in fields[2].split(":"))
        except ValueError:
            continue
        table[mount_id] = MountEntry(mount_id, (major, minor), unescape(fields[3]),
                                     unescape(fields[4]))  # fmt: skip
    return table


def place_in(entry: MountEntry, path: str) -> Place | None:
    """The place of ``path`` (absolute, symlink-free) reached through mount ``entry``, or
    ``None`` when ``path`` is not at or below the entry's mount point."""
    point = entry.mount_point.rstrip("/") or "/"
    if path != point and not _below(path, point):
        return None
    rest = path[len(point) :].strip("/") if point != "/" else path.strip("/")
    root = entry.root.rstrip("/")
    return Place(entry.device, f"{root}/{rest}" if rest else (root or "/"))


def mount_id(fd: int, fdinfo: str = "/proc/self/fdinfo") -> int | None:
    """The ID of the mount ``fd`` was opened through (``mnt_id`` in its fdinfo), or ``None``."""
    try:
        with open(f"{fdinfo}/{fd}", encoding="ascii") as info:
            for line in info:
                if line.startswith("mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def read_mounts(source: str = "/proc/self/mountinfo") -> dict[int, MountEntry]:
    """This process's mount table (empty when it cannot be read)."""
    try:
        with open(source, encoding="utf-8", errors="surrogateescape") as text:
            return parse_mountinfo(text.read())
    except OSError:
        return {}


def place_of(fd: int, path: str, mounts: Mapping[int, MountEntry] | None = None) -> Place | None:
    """The place of the folder open at ``fd``, whose symlink-free path is ``path``, or
    ``None`` when the kernel does not say (no ``/proc``, a mount made since ``mounts``)."""
    found = mount_id(fd)
    if found is None:
        return None
    entry = (read_mounts() if mounts is None else mounts).get(found)
    if entry is None and mounts is not None:
        entry = read_mounts().get(found)  # mounted after the table was read
    return None if entry is None else place_in(entry, path)
