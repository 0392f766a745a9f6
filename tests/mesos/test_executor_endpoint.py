"""Tests for dlc.mesos.executor_endpoint: pymesos's executor driver on the agent's real path."""

from __future__ import annotations

import json
import os
import time

import pytest

from dlc.errors import DlcError
from dlc.mesos import executor_endpoint
from dlc.mesos.executor_endpoint import executor_api_path, make_executor_driver


@pytest.mark.parametrize(
    ("environ", "path"),
    [
        pytest.param(
            {"MESOS_SLAVE_PID": "slave(1)@127.0.0.1:5051"},
            "/slave(1)/api/v1/executor",
            id="local-cluster",
        ),
        pytest.param(
            {"MESOS_SLAVE_PID": "slave(12)@10.0.0.3:5051"},
            "/slave(12)/api/v1/executor",
            id="other-id",
        ),
        pytest.param({}, "/api/v1/executor", id="no-pid"),
        pytest.param({"MESOS_SLAVE_PID": "  "}, "/api/v1/executor", id="blank-pid"),
    ],
)
def test_executor_api_path(environ: dict[str, str], path: str) -> None:
    assert executor_api_path(environ) == path


@pytest.mark.parametrize("pid", ["slave(1)", "sla ve@h:1", "@127.0.0.1:5051"])
def test_malformed_pid_is_a_one_line_error_naming_the_variable(pid: str) -> None:
    with pytest.raises(DlcError, match="MESOS_SLAVE_PID") as raised:
        executor_api_path({"MESOS_SLAVE_PID": pid})
    assert "\n" not in str(raised.value)


@pytest.fixture
def executor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESOS_AGENT_ENDPOINT", "127.0.0.1:5051")
    monkeypatch.setenv("MESOS_FRAMEWORK_ID", "fw-1")
    monkeypatch.setenv("MESOS_EXECUTOR_ID", "ex-1")
    monkeypatch.setenv("MESOS_SLAVE_PID", "slave(1)@127.0.0.1:5051")


def test_driver_subscribes_on_the_agent_path(executor_env: None) -> None:
    driver = make_executor_driver(object())
    request = driver.gen_request()
    assert request.startswith(b"POST /slave(1)/api/v1/executor HTTP/1.1\r\n")
    assert b'"executor_id": {"value": "ex-1"}' in request


def test_explicit_path_wins(executor_env: None) -> None:
    driver = make_executor_driver(object(), api_path="/api/v1/executor")
    assert driver.gen_request().startswith(b"POST /api/v1/executor ")


class _Connection:
    """Records requests the way http.client.HTTPConnection receives them."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        self.requests.append((method, path, dict(headers)))
        headers["X-Leak"] = "yes"  # a later call must not see this

    def getresponse(self):
        class Response:
            status = 202

            def read(self) -> bytes:
                return b""

        return Response()


def test_calls_use_the_agent_path_and_fresh_headers(executor_env: None) -> None:
    driver = make_executor_driver(object())
    connection = _Connection()
    driver._conn = connection  # what pymesos's _get_conn returns once connected
    driver.stream_id = "stream-1"
    driver.sendStatusUpdate({"task_id": {"value": "t1"}, "state": "TASK_RUNNING"})
    driver.sendFrameworkMessage("aGk=")
    assert [r[1] for r in connection.requests] == ["/slave(1)/api/v1/executor"] * 2
    assert all("X-Leak" not in r[2] for r in connection.requests)


class _RestartingAgent:
    """An HTTP server answering SUBSCRIBE like an agent that is coming back up: ``404``
    (routes not installed yet) a few times, then ``400 Executor cannot be found`` (it did
    not recover this executor)."""

    def __init__(self, not_yet: int):
        import http.server
        import threading

        answers = [404] * not_yet + [400]
        self.seen: list[int] = []
        agent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                code = answers[min(len(agent.seen), len(answers) - 1)]
                agent.seen.append(code)
                body = b"Executor cannot be found" if code == 400 else b"404 Not Found."
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


def test_a_restarting_agent_is_retried_until_it_refuses_the_executor(monkeypatch) -> None:
    import signal
    import time

    agent = _RestartingAgent(not_yet=3)
    monkeypatch.setenv("MESOS_AGENT_ENDPOINT", agent.endpoint)
    monkeypatch.setenv("MESOS_FRAMEWORK_ID", "fw-1")
    monkeypatch.setenv("MESOS_EXECUTOR_ID", "ex-1")
    monkeypatch.setenv("MESOS_SLAVE_PID", f"slave(1)@{agent.endpoint}")
    monkeypatch.setenv("MESOS_CHECKPOINT", "1")
    monkeypatch.setenv("MESOS_LOCAL", "1")
    interrupted = []  # pymesos ends an aborted driver with interrupt_main()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    from dlc.mesos import import_pymesos

    driver = make_executor_driver(import_pymesos().Executor())
    try:
        driver.start()
        deadline = time.monotonic() + 20
        while not driver.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.join()
    finally:
        signal.signal(signal.SIGINT, previous)
        agent.server.shutdown()
    assert agent.seen == [404, 404, 404, 400]  # 404s were retried, the 400 was final
    # pymesos also calls interrupt_main() when it aborts; whether that reaches this test's
    # handler depends on other tests in the process (the scheduler adapter silences it), so
    # only the abort itself is asserted.
    assert driver.aborted


def test_the_agents_token_goes_with_every_call(executor_env: None, monkeypatch) -> None:
    """An agent with --authenticate_http_executors answers 401 to calls without it."""
    monkeypatch.setenv("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "aGVhZA.Y2xhaW1z.c2ln")
    driver = make_executor_driver(object())
    assert "MESOS_EXECUTOR_AUTHENTICATION_TOKEN" not in os.environ  # children do not inherit it
    request = driver.gen_request()
    assert request.startswith(
        b"POST /slave(1)/api/v1/executor HTTP/1.1\r\nAuthorization: Bearer aGVhZA.Y2xhaW1z.c2ln\r\n"
    )
    connection = _Connection()
    driver._conn = connection
    driver.stream_id = "stream-1"
    driver.sendStatusUpdate({"task_id": {"value": "t1"}, "state": "TASK_RUNNING"})
    driver.sendFrameworkMessage("aGk=")
    assert [r[2]["Authorization"] for r in connection.requests] == [
        "Bearer aGVhZA.Y2xhaW1z.c2ln"
    ] * 2


def test_no_token_no_header_and_a_malformed_one_is_refused(executor_env, monkeypatch) -> None:
    monkeypatch.delenv("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", raising=False)
    assert b"Authorization" not in make_executor_driver(object()).gen_request()
    monkeypatch.setenv("MESOS_EXECUTOR_AUTHENTICATION_TOKEN", "a.b\r\nX-Evil: 1")
    with pytest.raises(DlcError, match="MESOS_EXECUTOR_AUTHENTICATION_TOKEN is not a JWT"):
        make_executor_driver(object())


class _ResettingConnection(_Connection):
    """Resets the first ``resets`` requests, as an agent whose backlog overflowed does."""

    def __init__(self, resets: int) -> None:
        super().__init__()
        self.resets = resets
        self.states: list[str] = []

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        if self.resets:
            self.resets -= 1
            raise ConnectionResetError(104, "Connection reset by peer")
        super().request(method, path, body, headers)
        self.states.append(json.loads(body)["update"]["status"]["state"])

    def close(self) -> None:
        pass


def test_an_undelivered_update_is_sent_again_and_keeps_its_order(executor_env, monkeypatch):
    monkeypatch.setattr(executor_endpoint, "RESEND_FIRST_S", 0.01)
    driver = make_executor_driver(object())
    connection = _ResettingConnection(resets=3)

    def get_conn():  # as pymesos's: (re)connects and keeps the connection in _conn
        driver._conn = connection
        return connection

    monkeypatch.setattr(driver, "_get_conn", get_conn)
    driver.stream_id = "stream-1"
    driver.sendStatusUpdate({"task_id": {"value": "t1"}, "state": "TASK_RUNNING"})  # no raise
    driver.sendStatusUpdate({"task_id": {"value": "t1"}, "state": "TASK_FINISHED"})
    deadline = time.monotonic() + 30
    while len(connection.states) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert connection.states == ["TASK_RUNNING", "TASK_FINISHED"]  # once each, in order
    assert connection.resets == 0


def test_an_update_the_agent_refuses_is_not_sent_again(executor_env) -> None:
    class Refusing(_Connection):
        def getresponse(self):
            class Response:
                status = 403

                def read(self) -> bytes:
                    return b"Task 't1' is unknown to executor"

            return Response()

    driver = make_executor_driver(object())
    connection = Refusing()
    driver._conn = connection
    driver.stream_id = "stream-1"
    with pytest.raises(RuntimeError, match="code=403"):
        driver.sendStatusUpdate({"task_id": {"value": "t1"}, "state": "TASK_RUNNING"})
    assert len(connection.requests) == 1 and driver._resender is None
