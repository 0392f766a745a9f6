"""``dlc submit --workdir DIR``: a tar.gz snapshot of a local directory, ignore files honoured.

Files matched by ``DIR/.dlcignore`` or ``DIR/.gitignore`` (gitignore syntax, through
``pathspec``) and ``.git/`` itself stay home. Symbolic links are kept only when they point inside
``DIR`` by a relative path (the executor refuses anything else anyway); the snapshot is refused,
with the biggest files named, when it passes the cap.
"""

from __future__ import annotations

import base64
import io
import os
import tarfile
from pathlib import Path

from dlc.errors import DlcError

#: the most a snapshot may hold before compression, and its most entries
MAX_SNAPSHOT_BYTES = 64 << 20
MAX_SNAPSHOT_ENTRIES = 20000
IGNORE_FILES = (".dlcignore", ".gitignore")


def _ignore_spec(root: Path):
    import pathspec

    lines = [".git/"]
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            lines += path.read_text(errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def snapshot_files(root: Path) -> list[str]:
    """Relative paths (``/``-separated, sorted) of what a snapshot of ``root`` holds."""
    spec = _ignore_spec(root)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        keep = []
        for name in sorted(dirnames):
            rel = (rel_dir / name).as_posix()
            if (Path(dirpath) / name).is_symlink():
                filenames.append(name)  # a link to a directory is a link, never followed
            elif not spec.match_file(rel + "/"):
                keep.append(name)
                out.append(rel + "/")
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = (rel_dir / name).as_posix()
            if not spec.match_file(rel):
                out.append(rel)
    return sorted(out)


def make_snapshot(directory: str | Path, max_bytes: int = MAX_SNAPSHOT_BYTES) -> bytes:
    """The tar.gz of ``directory`` without ignored files.

    Raises:
        DlcError: ``directory`` is not a directory, or the snapshot is too big.
    """
    root = Path(directory)
    if not root.is_dir():
        raise DlcError(f"--workdir: {directory} is not a directory; pass your code's directory")
    names = snapshot_files(root)
    if len(names) > MAX_SNAPSHOT_ENTRIES:
        raise DlcError(
            f"--workdir: {directory} holds {len(names)} files after {'/'.join(IGNORE_FILES)}; "
            f"the limit is {MAX_SNAPSHOT_ENTRIES}: ignore generated files in .dlcignore"
        )
    sizes = {n: (root / n).lstat().st_size for n in names if not n.endswith("/")}
    total = sum(sizes.values())
    if total > max_bytes:
        biggest = ", ".join(f"{n} ({s >> 20} MiB)" for n, s in sorted(sizes.items(),
                            key=lambda kv: -kv[1])[:3])  # fmt: skip
        raise DlcError(
            f"--workdir: {directory} holds {total >> 20} MiB after .dlcignore/.gitignore, over "
            f"the {max_bytes >> 20} MiB limit (biggest: {biggest}); add them to .dlcignore and "
            "mount data with -v"
        )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in names:
            path = root / name.rstrip("/")
            if path.is_symlink() and not _link_inside(root, name, os.readlink(path)):
                continue
            info = tar.gettarinfo(str(path), arcname=name.rstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def _link_inside(root: Path, name: str, target: str) -> bool:
    if os.path.isabs(target):
        return False
    resolved = os.path.normpath(os.path.join(os.path.dirname(name), target))
    return not (resolved == ".." or resolved.startswith("../"))


#: raw bytes per upload request (base64 grows them by a third; the API takes 1 MiB a request)
UPLOAD_CHUNK = 512 << 10


def upload_snapshot(client, data: bytes) -> str:
    """Send a snapshot in chunks; returns its id for the job spec's ``workdir``."""
    blob = ""  # the first chunk starts a blob; the next ones name it
    for start in range(0, max(len(data), 1), UPLOAD_CHUNK):
        body = {"data": base64.b64encode(data[start : start + UPLOAD_CHUNK]).decode()}
        if blob:
            body["blob"] = blob
        blob = client._call("POST", "/v1/workdirs", body)["blob"]
    return blob
