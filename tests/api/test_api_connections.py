"""Connection floods against the real API server, over raw loopback sockets (red-team #7).

A stranger without a token held 4,200 connections from one address and made the API answer
503 to everyone. Now each client address may hold at most ``max_connections_per_ip`` open
connections and the server ``max_connections`` in all; extra connections get a canned
JSON 429/503 at accept and are closed. Loopback has the whole of 127/8, so a test can be
"another client" by binding its socket to 127.0.0.2.
"""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.parse

import pytest

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer, ServerLimits
from dlc.scheduler.core.facade import SchedulerCore
from dlc.store.sqlite import JobStore

#: socket timeout: a broken server fails the test instead of hanging it
WAIT_S = 20
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.fixture
def make_server(tmp_path):
    made = []

    def make(**limits):
        core = SchedulerCore(JobStore(tmp_path / f"db{len(made)}"),
                             resolver=lambda s: (s.image, "12.1"))  # fmt: skip
        server = ApiServer(core, LogReader(lambda: None), lambda a: None,
                           limits=ServerLimits(**limits))  # fmt: skip
        server.start()
        made.append((server, core))
        return server

    yield make
    for server, core in made:
        server.stop()
        core.store.close()


def _connect(server, source: str = "127.0.0.1") -> socket.socket:
    host, port = urllib.parse.urlsplit(server.url).netloc.split(":")
    return socket.create_connection((host, int(port)), timeout=WAIT_S, source_address=(source, 0))


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:  # refused while our request was unread: what came is kept
        pass
    return b"".join(chunks)


def _status(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body) if body else {}


def _get(server, source: str = "127.0.0.1") -> tuple[int, dict]:
    with _connect(server, source) as sock:
        sock.sendall(HEALTHZ)
        return _status(_read_all(sock))


def _wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_200_idle_connections_from_one_address_do_not_lock_out_another(make_server):
    """The red-team flood, bounded: 200 connections that never send a header, from one
    address, under the default caps (64 per address)."""
    server = make_server(header_timeout_s=60)  # the held ones stay silent for the test
    flood = [_connect(server) for _ in range(200)]
    try:
        for sock in flood:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Pad: ")  # headers never finished
        refused = _answered(flood, 136)
        assert len(refused) == 136  # 200 - 64: the rest are held, unanswered
        status, body = _status(_read_all(refused[0]))
        assert status == 429 and "too many open connections from your address" in body["error"]
        assert _get(server, "127.0.0.2") == (200, {"ok": True, "version": _version()})
        assert _get(server)[0] == 429  # the flooding address itself is still capped
    finally:
        for sock in flood:
            sock.close()
    _wait_for(lambda: not server.connections.owner, "the closed connections to be released")
    assert _get(server)[0] == 200  # slots come back when the connections close


def _answered(socks: list[socket.socket], expected: int) -> list[socket.socket]:
    """The sockets the server has written to, once ``expected`` have been (or 5 s passed)."""
    answered: set[socket.socket] = set()
    deadline = time.monotonic() + 5
    while len(answered) < expected and time.monotonic() < deadline:
        readable, _, _ = select.select([s for s in socks if s not in answered], [], [], 0.2)
        answered.update(readable)
    time.sleep(0.3)  # one more look: a held socket answered late would show up here
    readable, _, _ = select.select([s for s in socks if s not in answered], [], [], 0)
    return [s for s in socks if s in answered or s in readable]


def _version() -> str:
    from dlc import __version__

    return __version__


def test_the_total_cap_refuses_with_503(make_server):
    server = make_server(max_connections=5, max_connections_per_ip=0)
    held = [_connect(server, f"127.0.0.{i + 1}") for i in range(5)]
    try:
        _wait_for(lambda: len(server.connections.owner) == 5, "5 connections accepted")
        status, body = _get(server, "127.0.0.9")
        assert status == 503 and "too many open connections" in body["error"]
    finally:
        for sock in held:
            sock.close()


def test_zero_means_no_per_address_cap(make_server):
    server = make_server(max_connections_per_ip=0)
    held = [_connect(server) for _ in range(100)]
    try:
        _wait_for(lambda: len(server.connections.owner) == 100, "100 connections accepted")
        assert _get(server)[0] == 200
    finally:
        for sock in held:
            sock.close()


def test_header_deadline_counts_from_connect_not_per_byte(make_server):
    """A client trickling one header byte at a time is cut at the deadline (1 s here)."""
    server = make_server(header_timeout_s=1.0)
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nX-Pad: ")
        closed_after = None
        started = time.monotonic()
        for _ in range(40):  # 8 s of trickling, far past the 1 s deadline
            try:
                sock.sendall(b"a")
            except OSError:
                closed_after = time.monotonic() - started
                break
            sock.settimeout(0.2)
            try:
                if sock.recv(1) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                pass
        assert closed_after is not None, "the trickling client was never cut off"


def test_a_websocket_gives_its_slot_back(make_server):
    """An upgraded connection is counted by the websocket protocol and released on close."""
    server = make_server(max_connections_per_ip=2)
    with _connect(server) as sock:
        sock.sendall(
            b"GET /v1/nowhere HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        assert sock.recv(12).startswith(b"HTTP/1.1")  # the app refuses the unknown route
    _wait_for(lambda: not server.connections.owner, "the websocket's slot to be released")
    assert [_get(server)[0] for _ in range(3)] == [200, 200, 200]
