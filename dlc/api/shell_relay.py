"""``dlc shell``: relay a websocket to the executor's exec endpoint (``POST /shell``).

The API opens a plain TCP connection to the executor, sends the request with the job's
secret, and after the ``200`` carries :mod:`dlc.executor.shell_frames` both ways.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.websockets import WebSocketDisconnect

from dlc.executor import shell_frames as frames

#: the shell when the client names none: bash where the image has it
DEFAULT_ARGV = ["sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"]


async def relay(websocket: Any, host: str, port: int, secret: str, first: dict) -> None:
    """Run the session; ``first`` is the client's opening ``{"rows", "cols", "argv"?}``."""
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
        inbound = asyncio.create_task(_inbound(websocket, writer))
        try:
            await _outbound(websocket, reader)
        finally:
            inbound.cancel()
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


async def _inbound(websocket: Any, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            if message.get("bytes"):
                writer.write(frames.pack(frames.INPUT, message["bytes"]))
            elif message.get("text"):
                size = json.loads(message["text"])
                resize = {"rows": _int(size, "rows"), "cols": _int(size, "cols")}
                writer.write(frames.pack(frames.RESIZE, json.dumps(resize).encode()))
            await writer.drain()
    except (WebSocketDisconnect, ValueError, OSError):
        pass
    writer.close()  # the user left: the executor ends the session


async def _outbound(websocket: Any, reader: asyncio.StreamReader) -> None:
    while True:
        try:
            head = await reader.readexactly(frames.HEADER.size)
            kind, length = frames.HEADER.unpack(head)
            payload = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, OSError):
            await websocket.send_json({"error": "the job's executor closed the session"})
            await websocket.close(code=4502)
            return
        if kind == frames.OUTPUT:
            await websocket.send_bytes(payload)
        elif kind == frames.EXIT:
            await websocket.send_json(json.loads(payload))
            await websocket.close()
            return
