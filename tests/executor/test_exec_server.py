"""The executor's exec endpoint: the job's secret is required; the command's code comes back."""

from __future__ import annotations

import base64
import json
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
