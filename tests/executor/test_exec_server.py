"""The executor's exec endpoint: the job's secret is required; the command's code comes back."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import pytest

from dlc.executor.exec_server import EXEC_FILE, ExecServer


def _post(port: int, body, secret: str | None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-DLC-Job-Secret"] = secret
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/exec", data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def server(tmp_path):
    calls = []

    def runner(argv):
        calls.append(argv)
        if argv == ["boom"]:
            raise RuntimeError("container is not running")
        return 7, b"out\n"

    srv = ExecServer("s3cret", runner, host="127.0.0.1").start(tmp_path)
    yield srv, calls, tmp_path
    srv.close(tmp_path)


def test_exec_needs_the_secret_and_returns_code_and_output(server):
    srv, calls, sandbox = server
    assert json.loads((sandbox / EXEC_FILE).read_text()) == {"port": srv.port}
    assert _post(srv.port, {"argv": ["ls"]}, None)[0] == 403
    assert _post(srv.port, {"argv": ["ls"]}, "wrong")[0] == 403
    assert calls == []
    status, body = _post(srv.port, {"argv": ["ls", "-l"]}, "s3cret")
    assert status == 200 and body["exit_code"] == 7
    assert base64.b64decode(body["output"]) == b"out\n" and calls == [["ls", "-l"]]


def test_bad_requests_and_engine_refusals_are_one_line(server):
    srv, _, _ = server
    assert _post(srv.port, {"argv": []}, "s3cret")[0] == 400
    assert _post(srv.port, b"not json", "s3cret")[0] == 400
    assert _post(srv.port, {"argv": [1]}, "s3cret")[0] == 400
    status, body = _post(srv.port, {"argv": ["boom"]}, "s3cret")
    assert status == 409 and body["error"] == "exec failed: container is not running"


def test_closing_removes_the_port_file(tmp_path):
    srv = ExecServer("x", lambda argv: (0, b""), host="127.0.0.1").start(tmp_path)
    srv.close(tmp_path)
    assert not (tmp_path / EXEC_FILE).exists()


class _FakeSession:
    """A TTY session that echoes what it gets and ends on ``exit``."""

    def __init__(self):
        import queue

        self.inbox, self.resized, self.closed = queue.Queue(), [], False

    def send(self, data):
        self.inbox.put(data)

    def recv(self):
        data = self.inbox.get(timeout=10)
        return b"" if data.startswith(b"exit") else b"echo:" + data

    def resize(self, rows, cols):
        self.resized.append((rows, cols))

    def exit_code(self):
        return 3

    def close(self):
        self.closed = True


def _shell_request(port: int, secret: str, body: dict):
    """A raw socket (the connection outlives the HTTP response) and its reader past the head."""
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    data = json.dumps(body)
    sock.sendall(f"POST /shell HTTP/1.1\r\nX-DLC-Job-Secret: {secret}\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n{data}".encode())  # fmt: skip
    reader = sock.makefile("rb")
    status = int(reader.readline().split()[1])
    while reader.readline() not in (b"\r\n", b""):
        pass
    return sock, status, reader


def test_shell_relays_frames_and_ends_with_the_exit_code(tmp_path):
    from dlc.executor import shell_frames as frames

    session = _FakeSession()

    class Runner:
        def __call__(self, argv):
            return 0, b""

        def open_shell(self, argv, rows, cols):
            session.opened = (argv, rows, cols)
            return session

    srv = ExecServer("s3cret", Runner(), host="127.0.0.1").start(tmp_path)
    try:
        sock, status, _ = _shell_request(srv.port, "wrong", {"argv": ["sh"]})
        assert status == 403 and session.inbox.empty()
        sock.close()
        opening = {"argv": ["sh"], "rows": 24, "cols": 80}
        sock, status, resp = _shell_request(srv.port, "s3cret", opening)
        assert status == 200 and session.opened == (["sh"], 24, 80)
        sock.sendall(frames.pack(frames.RESIZE, b'{"rows": 30, "cols": 100}'))
        sock.sendall(frames.pack(frames.INPUT, b"ls\n"))
        assert frames.read_frame(resp) == (frames.OUTPUT, b"echo:ls\n")
        sock.sendall(frames.pack(frames.INPUT, b"exit 3\n"))
        assert frames.read_frame(resp) == (frames.EXIT, b'{"exit_code": 3}')
        assert session.resized == [(30, 100)]
        for _ in range(100):  # closed right after the exit frame is sent
            if session.closed:
                break
            time.sleep(0.05)
        assert session.closed
    finally:
        srv.close(tmp_path)


def test_shell_on_a_runner_without_terminals_is_refused(tmp_path):
    srv = ExecServer("s3cret", lambda argv: (0, b""), host="127.0.0.1").start(tmp_path)
    try:
        sock, status, resp = _shell_request(srv.port, "s3cret", {"argv": ["sh"]})
        assert status == 409 and "cannot open a terminal" in resp.read().decode()
        sock.close()
    finally:
        srv.close(tmp_path)
