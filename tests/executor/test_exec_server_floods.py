"""The executor's exec endpoint against connection floods (red-team 2026-11-23).

It listens on every interface of the agent, so another user's container can reach it through
its bridge's gateway without knowing the job's secret. Each idle connection held a thread
forever (300 connections: 300 threads). Now a client address may hold 16 connections, all
clients 64, and a request must be whole within 10 s of connecting.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time

import pytest

from dlc.executor import exec_server
from dlc.executor.exec_server import ExecServer

WAIT_S = 20


@pytest.fixture
def server(tmp_path):
    srv = ExecServer("s3cret", lambda argv: (0, b"ok"), host="0.0.0.0").start(tmp_path)  # noqa: S104
    yield srv
    srv.close(tmp_path)


def _exec(port: int, source: str) -> dict:
    body = json.dumps({"argv": ["true"]}).encode()
    with socket.create_connection(("127.0.0.1", port), WAIT_S, (source, 0)) as sock:
        sock.sendall(
            b"POST /exec HTTP/1.1\r\nHost: x\r\nX-DLC-Job-Secret: s3cret\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return json.loads(raw.partition(b"\r\n\r\n")[2])


def test_idle_connections_from_one_address_are_capped_and_others_still_served(server):
    before = threading.active_count()
    flood = []
    for _ in range(100):
        sock = socket.create_connection(("127.0.0.1", server.port), WAIT_S, ("127.0.0.3", 0))
        sock.sendall(b"POST /exec HTTP/1.1\r\nX-Pad: ")  # never finished
        flood.append(sock)
    try:
        time.sleep(0.5)
        assert (
            threading.active_count() - before <= 40
        )  # 16 held: a handler and a deadline timer each
        answer = _exec(server.port, "127.0.0.1")  # the scheduler, from its own address
        assert answer["exit_code"] == 0 and base64.b64decode(answer["output"]) == b"ok"
    finally:
        for sock in flood:
            sock.close()


def test_a_trickling_client_is_cut_at_the_request_deadline(server, monkeypatch):
    monkeypatch.setattr(exec_server, "REQUEST_TIMEOUT_S", 1.0, raising=False)
    with socket.create_connection(("127.0.0.1", server.port), WAIT_S) as sock:
        sock.sendall(b"POST /exec HTTP/1.1\r\nX-Pad: ")
        sock.settimeout(0.2)
        cut = False
        for _ in range(40):  # 8 s of one byte every 0.2 s, far past the 1 s deadline
            try:
                sock.sendall(b"a")
                if sock.recv(1) == b"":
                    cut = True
                    break
            except TimeoutError:
                continue
            except OSError:
                cut = True
                break
        assert cut, "the trickling client was never cut off"
