"""The small framing ``dlc shell`` speaks between the API and the executor's exec endpoint.

A frame is one kind byte, a 4-byte big-endian length and the payload. In: ``i`` keystrokes,
``r`` a resize (JSON ``{"rows", "cols"}``). Out: ``o`` terminal output, ``x`` the exit
(JSON ``{"exit_code"}``), always the last frame.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
from typing import BinaryIO

log = logging.getLogger(__name__)
HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 20
INPUT, RESIZE, OUTPUT, EXIT = b"i", b"r", b"o", b"x"


def pack(kind: bytes, payload: bytes) -> bytes:
    """One frame."""
    return HEADER.pack(kind, len(payload)) + payload


def read_frame(stream: BinaryIO) -> tuple[bytes, bytes] | None:
    """The next ``(kind, payload)`` from a blocking stream; ``None`` at its end."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    kind, length = HEADER.unpack(head)
    if length > MAX_FRAME:
        raise ValueError(f"shell frame of {length} bytes, at most {MAX_FRAME}")
    payload = stream.read(length)
    return (kind, payload) if len(payload) == length else None


def relay_session(session, rfile: BinaryIO, wfile: BinaryIO) -> None:
    """Carry frames from ``rfile`` into ``session`` and its output back to ``wfile`` until
    the command ends; then send its exit code. (The executor side of ``dlc shell``.)"""

    def inbound() -> None:
        try:
            while (frame := read_frame(rfile)) is not None:
                kind, payload = frame
                if kind == INPUT:
                    session.send(payload)
                elif kind == RESIZE:
                    size = json.loads(payload)
                    session.resize(int(size["rows"]), int(size["cols"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.debug("shell input ended: %s", exc)
        # the API went away: end the session (its shell gets EOF/hang-up)
        session.close()

    threading.Thread(target=inbound, name="dlc-shell-in", daemon=True).start()
    try:
        while data := session.recv():
            wfile.write(pack(OUTPUT, data))
        code = session.exit_code()
        wfile.write(pack(EXIT, json.dumps({"exit_code": code}).encode()))
    except OSError as exc:
        log.debug("shell output ended: %s", exc)
    finally:
        session.close()
