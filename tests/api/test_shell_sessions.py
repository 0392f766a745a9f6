"""Caps and time limits on `dlc shell`/`dlc exec` sessions (dlc/api/shell_relay.py).

The gate counts sessions per user and in all and refuses one past a cap in one line; the
relay closes a shell that stays idle or stays open too long, telling the user why and
closing the executor's connection (which ends the shell in the container). The executor here
is a small asyncio server speaking the real frames (dlc/executor/shell_frames.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.exceptions import HTTPException

from dlc.api.shell_relay import SessionGate, SessionLimits, relay
from dlc.executor import shell_frames as frames


def test_the_gate_caps_sessions_per_user_and_in_all():
    gate = SessionGate(SessionLimits(per_user=2, total=3))
    gate.enter("alice")
    gate.enter("alice")
    with pytest.raises(HTTPException) as mine:
        gate.enter("alice")
    assert mine.value.status_code == 429
    assert "--max-sessions-per-user 2" in mine.value.detail and "\n" not in mine.value.detail
    gate.enter("bob")
    with pytest.raises(HTTPException) as everyone:
        gate.enter("carol")  # carol has none, but the scheduler is full
    assert "--max-sessions 3" in everyone.value.detail
    assert gate.open_sessions() == 3 and gate.open_sessions("alice") == 2
    gate.leave("alice")
    gate.enter("carol")  # a session ended: room again
    assert gate.open_sessions("carol") == 1


def test_a_session_is_counted_only_while_it_runs_even_when_it_fails():
    gate = SessionGate(SessionLimits(per_user=1, total=8))
    with pytest.raises(RuntimeError), gate.session("alice"):
        assert gate.open_sessions("alice") == 1
        raise RuntimeError("the executor went away")
    assert gate.open_sessions() == 0
    with gate.session("alice"):  # the failed one does not hold the user's only slot
        pass


class FakeSocket:
    """The client's side of the websocket, as the relay sees it."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.sent: list = []
        self.closed: int | None = None

    async def receive(self) -> dict:
        return await self.inbox.get()

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def send_json(self, data: dict) -> None:
        self.sent.append(data)

    async def close(self, code: int = 1000) -> None:
        self.closed = code


async def _executor(chatty: bool):
    """An exec endpoint: answers ``200``, then prints every 50 ms (``chatty``) or nothing.

    Returns the server and a future that resolves when the relay closes its connection.
    """
    ended = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        ticker = None
        if chatty:

            async def tick() -> None:
                while True:
                    writer.write(frames.pack(frames.OUTPUT, b"."))
                    await asyncio.sleep(0.05)

            ticker = asyncio.create_task(tick())
        await reader.read()  # until the relay closes the connection
        if ticker:
            ticker.cancel()
        ended.set_result(True)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, ended


async def _session(chatty: bool, limits: SessionLimits) -> tuple[FakeSocket, bool]:
    server, ended = await _executor(chatty)
    port = server.sockets[0].getsockname()[1]
    ws = FakeSocket()
    async with server:
        await asyncio.wait_for(relay(ws, "127.0.0.1", port, "secret", {}, limits), 10)
        closed = await asyncio.wait_for(ended, 10)
    return ws, closed


def test_an_idle_shell_is_closed_with_the_reason():
    ws, executor_closed = asyncio.run(_session(False, SessionLimits(idle_s=0.3, max_s=60)))
    (message,) = ws.sent
    assert message["error"].startswith("session closed: idle for")
    assert "--session-idle-timeout 0.3" in message["error"]
    assert ws.closed == 4408 and executor_closed


def test_a_busy_shell_is_closed_at_the_maximum_time():
    ws, executor_closed = asyncio.run(_session(True, SessionLimits(idle_s=0.3, max_s=0.8)))
    output = [m for m in ws.sent if isinstance(m, bytes)]
    assert len(output) > 5  # the output kept it from being idle ...
    assert "--session-max-time 0.8" in ws.sent[-1]["error"]  # ... but not from the maximum
    assert ws.closed == 4408 and executor_closed


def test_the_shell_ends_normally_with_its_exit_code_before_any_limit():
    async def run() -> FakeSocket:
        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            body = json.loads(await reader.readexactly(length))
            writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
            writer.write(frames.pack(frames.OUTPUT, " ".join(body["argv"]).encode()))
            writer.write(frames.pack(frames.EXIT, b'{"exit_code": 7}'))
            await writer.drain()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ws = FakeSocket()
        async with server:
            port = server.sockets[0].getsockname()[1]
            limits = SessionLimits(idle_s=5, max_s=5)
            await asyncio.wait_for(relay(ws, "127.0.0.1", port, "s", {"argv": ["id"]}, limits), 5)
        return ws

    ws = asyncio.run(run())
    assert ws.sent == [b"id", {"exit_code": 7}] and ws.closed == 1000
