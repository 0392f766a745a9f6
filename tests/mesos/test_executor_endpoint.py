"""Tests for dlc.mesos.executor_endpoint: pymesos's executor driver on the agent's real path."""

from __future__ import annotations

import pytest

from dlc.errors import DlcError
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
