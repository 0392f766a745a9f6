"""What a ``--workdir`` snapshot may hold, decided from the archive's headers alone.

A snapshot is data from a user, unpacked on the agent. Checking each entry's name and link
target as a string is not enough when earlier entries are links: ``d1 -> .`` then
``d1/d2 -> ..`` looks inside on paper and is the workspace's parent on disk, and a chain of
directory links with a link at its end reaches as far up as the chain is deep (red-team
2026-11-26). So the rules remember every link and every path an earlier link target walks
through, and refuse:

* absolute names, NUL bytes and ``..`` components in names;
* anything but regular files, directories and symbolic links (hard links, devices, FIFOs);
* an entry whose path passes through an earlier link or file (``d1/d2`` when ``d1`` is a link);
* a link whose target is absolute, climbs out of the workspace at any step, or climbs back
  out of another link (``lib/../..`` when ``lib`` is a link: ``..`` after a link goes up from
  where the link leads, not from where the string stands); and a link placed where an earlier
  link's target climbs back out (the same trick, in the other order);
* an entry that replaces an earlier one (only a directory may appear twice);
* archives over the entry or unpacked-size caps, and names or link targets over 4,096
  characters or 128 components (checking and making a path costs in its depth: a
  500,000-deep name packs into a few hundred bytes of gzip).

Without a link on the way, the kernel resolves a target exactly as the string says, so every
link that passes resolves inside. The writer (:mod:`dlc.executor.workdir`) still opens every
component without following links, so a gap here fails an open instead of writing outside.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass

from dlc.errors import ContainerError
from dlc.executor.fd_paths import split_relative

Path_ = tuple[str, ...]
#: the longest name or link target (characters; Linux's PATH_MAX)
MAX_PATH_CHARS = 4096
#: the most components in a name or a link target
MAX_DEPTH = 128


@dataclass(frozen=True)
class Entry:
    """One accepted entry: what to make, where (components below the workspace), and how.

    Attributes:
        kind: ``"dir"``, ``"file"`` or ``"link"``.
        parts: the entry's path below the workspace, one component per item.
        target: a link's target (as written in the archive; it resolves inside).
        mode: a file's permission bits (readable and writable by all: see ``workdir``).
        mtime: a file's modification time.
    """

    kind: str
    parts: Path_
    target: str = ""
    mode: int = 0o666
    mtime: float = 0.0


def _show(parts: Path_ | list[str]) -> str:
    return "/".join(parts)[:120]


def _not_too_deep(path: str, depth: int, what: str) -> None:
    if len(path) > MAX_PATH_CHARS or depth > MAX_DEPTH:
        raise ContainerError(
            f"workdir: snapshot {what} {path[:80]}... is over {MAX_PATH_CHARS} characters "
            f"or {MAX_DEPTH} folders deep"
        )


class _Node:
    """One path of the archive's tree: what the archive made there, if anything yet."""

    __slots__ = ("kind", "children", "walked")

    def __init__(self, kind: str | None):
        self.kind = kind  # "dir", "file", "link"; None: nothing made here (yet)
        self.children: dict[str, _Node] = {}
        self.walked = False  # some link target climbs back out of this path


def _child(node: _Node, name: str) -> _Node:
    child = node.children.get(name)
    if child is None:
        child = node.children[name] = _Node(None)
    return child


class SnapshotRules:
    """Checks entries in archive order and remembers what they made; one per archive.

    The paths live in a tree of nodes, so each check costs in the entry's depth (a flat map
    of path prefixes cost in its square: 20,000 entries 128 deep took 19 s).
    """

    def __init__(self, max_bytes: int, max_entries: int):
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.count = self.total = 0
        self.root = _Node("dir")

    def check(self, member: tarfile.TarInfo) -> Entry | None:
        """The entry to make for ``member`` (``None``: nothing to make, e.g. ``./``).

        Raises:
            ContainerError: the entry breaks a rule above (one line, naming the entry).
        """
        self.count += 1
        if self.count > self.max_entries:
            raise ContainerError(f"workdir: the snapshot has over {self.max_entries} entries")
        parts = self._name(member.name)
        if not (member.isreg() or member.isdir() or member.issym()):
            raise ContainerError(
                f"workdir: snapshot entry {_show(parts)} is not a file, directory or link"
            )
        self.total += max(0, member.size)
        if self.total > self.max_bytes:
            raise ContainerError(
                f"workdir: the snapshot unpacks to over {self.max_bytes >> 20} MiB"
            )
        if not parts:
            if member.isdir():
                return None  # the workspace itself ("./")
            raise ContainerError("workdir: a snapshot entry names the workspace itself")
        # a refusal ends the whole archive, so the tree may change before the last check
        folders = self._folders(parts)
        node = _child(folders[-1], parts[-1])
        kind = "dir" if member.isdir() else "link" if member.issym() else "file"
        if node.kind is not None:
            if kind == "dir" == node.kind:
                return None
            raise ContainerError(
                f"workdir: snapshot entry {_show(parts)} appears twice; pack it again"
            )
        if kind == "link":
            self._link(parts, member.linkname, folders, node)
            return Entry("link", parts, target=member.linkname)
        node.kind = kind
        if kind == "dir":
            return Entry("dir", parts)
        mtime = member.mtime if 0 <= member.mtime < 2**33 else 0.0  # utime refuses wild ones
        return Entry("file", parts, mode=(member.mode & 0o755) | 0o666, mtime=mtime)

    @staticmethod
    def _name(name: str) -> Path_:
        try:
            parts = tuple(split_relative(name))
        except ValueError:
            raise ContainerError(
                f"workdir: snapshot entry {name[:80]!r} leaves the workspace"
            ) from None
        _not_too_deep(name, len(parts), "entry")
        return parts

    def _folders(self, parts: Path_) -> list[_Node]:
        """The nodes from the root to the entry's folder, made folders; refuses a link or file
        on the way."""
        nodes = [self.root]
        for depth, name in enumerate(parts[:-1], 1):
            node = _child(nodes[-1], name)
            if node.kind not in (None, "dir"):
                raise ContainerError(
                    f"workdir: snapshot entry {_show(parts)} goes through the {node.kind} "
                    f"{_show(parts[:depth])}; a snapshot may not write through links"
                )
            node.kind = "dir"
            nodes.append(node)
        return nodes

    def _link(self, parts: Path_, target: str, folders: list[_Node], node: _Node) -> None:
        where = f"workdir: snapshot link {_show(parts)} -> {target[:80]}"
        if node.walked:
            raise ContainerError(f"{where} stands where an earlier link's target walks through")
        if not target or target.startswith("/") or "\0" in target:
            raise ContainerError(f"{where} points outside")
        names = [c for c in target.split("/") if c not in ("", ".")]
        _not_too_deep(target, len(names), "link target")
        # Only a ".." after a link climbs elsewhere than the string says: the folders walked
        # before the target's last ".." must be real (now and later); past it, the target
        # only descends, and any link it meets resolves inside on its own.
        last_up = max((i for i, name in enumerate(names) if name == ".."), default=-1)
        here = list(folders)  # the link's folder: real directories only (checked above)
        for step, name in enumerate(names):
            if name == "..":
                if len(here) == 1:
                    raise ContainerError(f"{where} points outside")
                here.pop()
            elif step < last_up:  # climbed out of again: must be a real directory
                child = _child(here[-1], name)
                if child.kind not in (None, "dir") or child is node:
                    raise ContainerError(f"{where} climbs back out of a link or file")
                child.walked = True
                here.append(child)
            else:
                break  # only descends from here on
        node.kind = "link"
