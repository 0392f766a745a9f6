"""``dlc shell``: relay a websocket to the executor's exec endpoint (``POST /shell``).

The API opens a plain TCP connection to the executor, sends the request with the job's
secret, and after the ``200`` carries :mod:`dlc.executor.shell_frames` both ways.

:class:`SessionGate` caps the shell and exec sessions that run at once (per user and in all:
each one holds a connection to an executor and, for a shell, a process in a container), and
:func:`relay` ends a shell that saw no traffic for ``idle_s`` or ran ``max_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.websockets import WebSocketDisconnect

from dlc.executor import shell_frames as frames

#: what the client's opening message must be (its one-line refusal names it)
OPENING = 'send a JSON object {"rows": N, "cols": N, "argv": ["cmd", ...]} first'

#: the shell when the client names none: bash where the image has it
DEFAULT_ARGV = ["sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"]


@dataclass(frozen=True)
class SessionLimits:
    """Caps on ``dlc shell``/``dlc exec`` sessions (``dlc scheduler --max-sessions ...``).

    Attributes:
        per_user: sessions one user may have open at once (admins too).
        total: sessions open at once on this scheduler, all users together.
        idle_s: a shell with no keystroke and no output for this long is closed.
        max_s: the longest a shell may stay open (and an exec may run), idle or not.
    """

    per_user: int = 4
    total: int = 64
    idle_s: float = 3600.0
    max_s: float = 8 * 3600.0


class SessionGate:
    """Counts open sessions; :meth:`enter` refuses one past a cap in one line (429)."""

    def __init__(self, limits: SessionLimits | None = None):
        self.limits = limits or SessionLimits()
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()  # exec routes run in worker threads, shells in the loop

    def open_sessions(self, user: str | None = None) -> int:
        """Sessions open now: of ``user``, or of everyone."""
        with self._lock:
            return self._open.get(user, 0) if user is not None else sum(self._open.values())

    def enter(self, user: str) -> None:
        """Count one more session of ``user``.

        Raises:
            HTTPException: 429, with which cap was hit and what to do.
        """
        limits = self.limits
        with self._lock:
            mine, everyone = self._open.get(user, 0), sum(self._open.values())
            if mine >= limits.per_user:
                raise HTTPException(
                    429,
                    (
                        f"user {user} has {mine} shell/exec sessions open, the most this scheduler "
                        f"allows (--max-sessions-per-user {limits.per_user}); close one and retry"
                    ),
                )
            if everyone >= limits.total:
                raise HTTPException(
                    429,
                    (
                        f"the scheduler has {everyone} shell/exec sessions open, its limit "
                        f"(--max-sessions {limits.total}); retry when one ends"
                    ),
                )
            self._open[user] = mine + 1

    def leave(self, user: str) -> None:
        """One session of ``user`` ended."""
        with self._lock:
            left = self._open.get(user, 0) - 1
            if left > 0:
                self._open[user] = left
            else:
                self._open.pop(user, None)

    @contextlib.contextmanager
    def session(self, user: str):
        """``with gate.session(user):`` counts the session while the block runs."""
        self.enter(user)
        try:
            yield
        finally:
            self.leave(user)


class _Activity:
    """When the session started and last carried a byte either way."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()

    def touch(self) -> None:
        self.last = time.monotonic()


async def _watch(activity: _Activity, limits: SessionLimits) -> str:
    """Return why the session must end (idle or too long); runs until then."""
    step = max(0.05, min(1.0, limits.idle_s / 4, limits.max_s / 4))
    while True:
        await asyncio.sleep(step)
        now = time.monotonic()
        if now - activity.start >= limits.max_s:
            return (f"session closed: open for {now - activity.start:.0f} s, the scheduler's "
                    f"maximum (--session-max-time {limits.max_s:g})")  # fmt: skip
        if now - activity.last >= limits.idle_s:
            return (f"session closed: idle for {now - activity.last:.0f} s "
                    f"(--session-idle-timeout {limits.idle_s:g})")  # fmt: skip


async def first_message(websocket: Any) -> dict:
    """The client's opening message: a JSON object, else a one-line ``HTTPException(400)``
    (a red-team ``[1, 2]`` once raised an uncaught ``AttributeError`` with a traceback).

    Raises:
        WebSocketDisconnect: the client left before sending it.
    """
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    first = _json_object(message.get("text"))
    if first is None:
        raise HTTPException(400, f"shell: the first message is not a JSON object; {OPENING}")
    return first


def _json_object(text: str | None) -> dict | None:
    """``text`` parsed when it is a JSON object (``None`` otherwise: binary, not JSON, a list)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def relay(
    websocket: Any, host: str, port: int, secret: str, first: dict,
    limits: SessionLimits | None = None,
) -> None:  # fmt: skip
    """Run the session; ``first`` is the client's opening ``{"rows", "cols", "argv"?}``.

    The session ends when the shell does, when the user leaves, or (``limits``) when it was
    idle for ``idle_s`` or open for ``max_s``: then the user gets ``{"error"}`` in one line.
    """
    limits = limits or SessionLimits()
    if not isinstance(first, dict):
        raise HTTPException(400, f"shell: the first message is not a JSON object; {OPENING}")
    argv = first.get("argv") or DEFAULT_ARGV
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise HTTPException(400, "argv: give the shell as a list of strings")
    body = json.dumps({"argv": argv, "rows": _int(first, "rows"), "cols": _int(first, "cols")})
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        where = f"{host}:{port}"
        raise HTTPException(502, f"cannot reach the job's executor at {where}: {exc}") from None
    try:
        writer.write(
            f"POST /shell HTTP/1.1\r\nHost: {host}:{port}\r\nX-DLC-Job-Secret: {secret}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        await writer.drain()
        await _expect_ok(reader)
        activity = _Activity()
        inbound = asyncio.create_task(_inbound(websocket, writer, activity))
        outbound = asyncio.create_task(_outbound(websocket, reader, activity))
        watch = asyncio.create_task(_watch(activity, limits))
        try:
            done, _ = await asyncio.wait({outbound, watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:  # idle or too long: the executor's end closes the shell
                outbound.cancel()
                await websocket.send_json({"error": watch.result()})
                await websocket.close(code=4408)
            else:
                outbound.result()
        finally:
            for task in (inbound, outbound, watch):
                task.cancel()
    finally:
        writer.close()


def _int(first: dict, key: str) -> int:
    value = first.get(key) or 0
    return value if isinstance(value, int) and 0 <= value < 10000 else 0


async def _expect_ok(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if status == 200:
        return
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
    try:
        message = json.loads(await reader.readexactly(length)).get("error", "")
    except (ValueError, asyncio.IncompleteReadError):
        message = f"status {status}"
    raise HTTPException(409, f"the job's executor refused: {message}")


async def _inbound(websocket: Any, writer: asyncio.StreamWriter, activity: _Activity) -> None:
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            activity.touch()
            if message.get("bytes"):
                writer.write(frames.pack(frames.INPUT, message["bytes"]))
            elif message.get("text"):
                size = _json_object(message["text"])
                if size is None:  # not a resize: dropped (the shell goes on, no traceback)
                    continue
                resize = {"rows": _int(size, "rows"), "cols": _int(size, "cols")}
                writer.write(frames.pack(frames.RESIZE, json.dumps(resize).encode()))
            await writer.drain()
    except (WebSocketDisconnect, ValueError, OSError):
        pass
    writer.close()  # the user left: the executor ends the session


async def _outbound(websocket: Any, reader: asyncio.StreamReader, activity: _Activity) -> None:
    while True:
        try:
            head = await reader.readexactly(frames.HEADER.size)
            kind, length = frames.HEADER.unpack(head)
            payload = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, OSError):
            await websocket.send_json({"error": "the job's executor closed the session"})
            await websocket.close(code=4502)
            return
        activity.touch()
        if kind == frames.OUTPUT:
            await websocket.send_bytes(payload)
        elif kind == frames.EXIT:
            await websocket.send_json(json.loads(payload))
            await websocket.close()
            return
