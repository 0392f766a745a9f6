"""SQLite failures as one-line :class:`~dlc.errors.StoreError` messages: the file and the fix."""

from __future__ import annotations

from dlc.errors import StoreError

_CHECK = "stop DLC, run `sqlite3 {path} 'PRAGMA integrity_check'` and restore {path} from a backup"

#: (kind, SQLite result-code names, words of the message, what happened, the fix)
_KINDS = (
    ("full", ("SQLITE_FULL",), ("disk is full",), "the disk holding it is full",
     "free space there; nothing of this change was saved"),
    ("locked", ("SQLITE_BUSY", "SQLITE_LOCKED"), ("locked", "busy"),
     "it is locked by another process", "stop the other program using it or pass another --db"),
    ("read_only", ("SQLITE_READONLY",), ("readonly", "read-only"), "it is read-only",
     "make it and its directory writable by this user"),
    ("damaged", ("SQLITE_CORRUPT", "SQLITE_NOTADB"), ("malformed", "not a database"),
     "it is damaged or not a database", _CHECK),
    ("io", ("SQLITE_IOERR", "SQLITE_CANTOPEN"), ("disk i/o error", "unable to open"),
     "the disk failed to read or write it",
     "check the disk, then run `sqlite3 {path} 'PRAGMA integrity_check'`"),
)  # fmt: skip


def store_error(exc: BaseException, path: str, action: str) -> StoreError:
    """The one-line error for ``exc`` raised while ``action`` (e.g. ``"saving job j1"``)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    detail = " ".join(str(exc).split())  # integrity reports span lines: keep one
    detail = detail if len(detail) <= 160 else detail[:157] + "..."
    text = detail.lower()
    for kind, names, words, what, fix in _KINDS:
        if any(name.startswith(n) for n in names) or any(w in text for w in words):
            return StoreError(
                f"job database {path}: {action} failed: {what} ({detail}); {fix.format(path=path)}",
                path=path,
                kind=kind,
            )
    return StoreError(
        f"job database {path}: {action} failed ({detail}); {_CHECK.format(path=path)}",
        path=path,
        kind="other",
    )
