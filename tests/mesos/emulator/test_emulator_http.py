"""Tests of the emulator over HTTP: endpoints, errors, process handling, lifecycle."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from http_parser.http import HttpParser

from dlc.errors import EmulatorError, ResourceSyntaxError
from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

GPU_AGENT = AgentSpec(
    resources="cpus:4;mem:4096;gpus:2;gpu_ids:{0,1}",
    attributes="gpu_model:Tesla_V100;rack:r7",
    hostname="gpu-host",
)


class Subscriber:
    """A bare v1 scheduler: one socket, DLC's http_parser, RecordIO decoding."""

    def __init__(self, address: str, framework_info: dict[str, Any]) -> None:
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info}})
        self.sock.sendall(
            (
                f"POST /api/v1/scheduler HTTP/1.1\r\nHost: {address}\r\n"
                "Content-Type: application/json\r\nConnection: close\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}"
            ).encode()
        )
        self.parser = HttpParser()
        self.buffer = b""
        self.address = address

    def event(self, kind: str, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self.buffer:
                length, rest = self.buffer.split(b"\n", 1)
                if len(rest) < int(length):
                    break
                record, self.buffer = rest[: int(length)], rest[int(length) :]
                event = json.loads(record)
                if event["type"] == kind:
                    return event
            data = self.sock.recv(4096)
            assert data, "stream ended"
            assert self.parser.execute(data, len(data)) == len(data)
            self.buffer += self.parser.recv_body()
        raise AssertionError(f"no {kind} event")

    @property
    def stream_id(self) -> str:
        return self.parser.get_headers()["Mesos-Stream-Id"]

    def call(self, framework_id: str, kind: str, payload: dict[str, Any]) -> int:
        body = {"type": kind, "framework_id": {"value": framework_id}, kind.lower(): payload}
        return post(
            self.address,
            "/api/v1/scheduler",
            json.dumps(body),
            {"Mesos-Stream-Id": self.stream_id},
        )[0]


def post(address: str, path: str, body: str, headers: dict[str, str] | None = None):
    connection = http.client.HTTPConnection(address, timeout=10)
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    connection.request("POST", path, body=body.encode(), headers=all_headers)
    response = connection.getresponse()
    return response.status, response.read().decode()


def get(address: str, path: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection(address, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    data = response.read()
    return response.status, json.loads(data) if data else None


@pytest.fixture
def emulator(tmp_path: Path):
    with MesosEmulator(agents=[GPU_AGENT], work_dir=tmp_path, allocation_interval=0.2) as mesos:
        yield mesos


def test_bad_agent_spec_fails_at_construction() -> None:
    with pytest.raises(ResourceSyntaxError, match="gpu_ids"):
        MesosEmulator(agents=[AgentSpec(resources="cpus:1;gpu_ids:{0,1")])


def test_address_needs_start() -> None:
    with pytest.raises(EmulatorError, match="start"):
        _ = MesosEmulator().address


def test_version_and_state(emulator: MesosEmulator) -> None:
    status, version = get(emulator.address, "/version")
    assert (status, version["version"]) == (200, "1.11.0")
    status, state = get(emulator.address, "/master/state")
    assert status == 200
    (agent,) = state["slaves"]
    assert agent["hostname"] == "gpu-host"
    assert agent["attributes"] == {"gpu_model": "Tesla_V100", "rack": "r7"}
    assert agent["resources"]["gpu_ids"] == "{0, 1}"
    assert agent["pid"] == f"slave(1)@{emulator.address}"
    assert get(emulator.address, "/state")[1]["slaves"] == state["slaves"]
    status, agent_state = get(emulator.address, "/slave(1)/state")
    assert (status, agent_state["id"], agent_state["frameworks"]) == (200, agent["id"], [])


@pytest.mark.parametrize(
    ("path", "body", "headers", "code", "text"),
    [
        pytest.param("/api/v1/nothing", "{}", None, 404, "Not found", id="unknown-path"),
        pytest.param(
            "/api/v1/scheduler",
            "{}",
            {"Content-Type": "application/x-protobuf"},
            415,
            "application/json",
            id="protobuf",
        ),
        pytest.param("/api/v1/scheduler", "{nope", None, 400, "Failed to parse", id="bad-json"),
        pytest.param("/api/v1/scheduler", '{"a": 1}', None, 400, "'type'", id="no-type"),
        pytest.param(
            "/api/v1/scheduler",
            '{"type": "SUBSCRIBE", "subscribe": {"framework_info": {}}}',
            None,
            400,
            "'user' and 'name'",
            id="no-framework-info",
        ),
        pytest.param(
            "/api/v1/executor",
            '{"type": "SUBSCRIBE", "framework_id": {"value": "f"}, "executor_id": {"value": "e"}}',
            None,
            401,
            "Unauthorized",
            id="executor-without-token",
        ),
    ],
)
def test_refused_requests(emulator: MesosEmulator, path, body, headers, code, text) -> None:
    status, reply = post(emulator.address, path, body, headers)
    assert status == code
    assert text in reply


def _launch(emulator: MesosEmulator, command: str) -> tuple[Subscriber, str]:
    framework_info = {
        "user": "u",
        "name": "n",
        "capabilities": [{"type": "GPU_RESOURCES"}],
        "failover_timeout": 60,
    }
    subscriber = Subscriber(emulator.address, framework_info)
    framework_id = subscriber.event("SUBSCRIBED")["subscribed"]["framework_id"]["value"]
    offer = subscriber.event("OFFERS")["offers"]["offers"][0]
    task = {
        "task_id": {"value": "t1"},
        "agent_id": offer["agent_id"],
        "name": "t1",
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
        "command": {"value": command},
    }
    accept = {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [task]}}],
    }
    assert subscriber.call(framework_id, "ACCEPT", accept) == 202
    return subscriber, framework_id


def test_command_task_gets_mesos_environment_in_its_sandbox(emulator: MesosEmulator) -> None:
    subscriber, framework_id = _launch(emulator, "env > env.txt")
    states = []
    while not states or states[-1] != "TASK_FINISHED":
        status = subscriber.event("UPDATE")["update"]["status"]
        states.append(status["state"])
        ack = {"agent_id": status["agent_id"], "task_id": status["task_id"], "uuid": status["uuid"]}
        subscriber.call(framework_id, "ACKNOWLEDGE", ack)
    assert states == ["TASK_RUNNING", "TASK_FINISHED"]
    (env_file,) = Path(emulator.work_dir).rglob("env.txt")
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    assert env["MESOS_SANDBOX"] == str(env_file.parent)
    assert env["MESOS_FRAMEWORK_ID"] == framework_id
    assert env["MESOS_SLAVE_PID"] == f"slave(1)@{emulator.address}"
    assert env["MESOS_AGENT_ENDPOINT"] == emulator.address


def test_teardown_kills_running_tasks(emulator: MesosEmulator) -> None:
    subscriber, framework_id = _launch(emulator, "sleep 60")
    assert subscriber.event("UPDATE")["update"]["status"]["state"] == "TASK_RUNNING"
    assert not emulator.wait_idle(0.3)
    assert subscriber.call(framework_id, "TEARDOWN", {}) == 202
    assert emulator.wait_idle(5)
    state = emulator.state()
    assert state["frameworks"] == []
    assert [f["id"] for f in state["completed_frameworks"]] == [framework_id]


def test_stop_kills_processes_and_frees_the_port(tmp_path: Path) -> None:
    emulator = MesosEmulator(agents=[GPU_AGENT], work_dir=tmp_path).start()
    address = emulator.address
    subscriber, _ = _launch(emulator, "echo $$ > pid.txt; exec sleep 60")
    assert subscriber.event("UPDATE")["update"]["status"]["state"] == "TASK_RUNNING"
    deadline = time.monotonic() + 5
    while not list(tmp_path.rglob("pid.txt")) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(next(tmp_path.rglob("pid.txt")).read_text())
    emulator.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    host, port = address.split(":")
    subscriber.sock.close()
    with socket.socket() as probe:
        # Connections may linger in TIME_WAIT; SO_REUSEADDR (as servers use) only fails on a
        # listener that is still open.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, int(port)))
        probe.listen()


def get_page(address: str, path: str) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection(address, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.getheader("Content-Type"), response.read().decode()


def test_index_page_says_it_is_the_emulator_and_links_framework_ui(emulator: MesosEmulator):
    status, ctype, page = get_page(emulator.address, "/")
    assert (status, ctype) == (200, "text/html; charset=utf-8")
    assert "DLC's Mesos emulator" in page and "no Mesos web UI" in page
    assert "gpu-host" in page and "no frameworks yet" in page and "no tasks" in page
    info = {"user": "u", "name": "dlc<&>", "webui_url": "http://127.0.0.1:8642/?a=1&b=2"}
    subscriber = Subscriber(emulator.address, info)
    framework_id = subscriber.event("SUBSCRIBED")["subscribed"]["framework_id"]["value"]
    page = get_page(emulator.address, "/index.html")[2]
    assert f'id="framework-{framework_id}"' in page
    assert '<a href="http://127.0.0.1:8642/?a=1&amp;b=2">' in page
    assert "dlc&lt;&amp;&gt;" in page and "dlc<&>" not in page
    subscriber.sock.close()


def test_version_names_the_emulator(emulator: MesosEmulator) -> None:
    assert get(emulator.address, "/version")[1]["build_user"] == "dlc-emulator"


def test_killing_the_only_task_of_an_unsubscribed_executor_ends_the_executor(
    emulator: MesosEmulator,
) -> None:
    """As on a Mesos agent: the executor would otherwise subscribe later and wait for ever
    (the fault suite found such executors left after a job was killed during its launch)."""
    framework_info = {"user": "u", "name": "n", "capabilities": [{"type": "GPU_RESOURCES"}]}
    subscriber = Subscriber(emulator.address, framework_info)
    framework_id = subscriber.event("SUBSCRIBED")["subscribed"]["framework_id"]["value"]
    offer = subscriber.event("OFFERS")["offers"]["offers"][0]
    task = {
        "task_id": {"value": "t1"},
        "agent_id": offer["agent_id"],
        "name": "t1",
        "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
        # an executor that never subscribes: its task stays queued at the agent
        "executor": {"executor_id": {"value": "e1"},
                     "command": {"value": "echo $$ > pid.txt; exec sleep 60"}},
    }  # fmt: skip
    accept = {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [task]}}],
    }
    assert subscriber.call(framework_id, "ACCEPT", accept) == 202
    deadline = time.monotonic() + 30
    while not list(Path(emulator.work_dir).rglob("pid.txt")):
        assert time.monotonic() < deadline, "the executor did not start"
        time.sleep(0.05)
    pid_file = next(Path(emulator.work_dir).rglob("pid.txt"))
    while not pid_file.read_text().strip():
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    kill = {"task_id": {"value": "t1"}, "agent_id": offer["agent_id"]}
    assert subscriber.call(framework_id, "KILL", kill) == 202
    status = subscriber.event("UPDATE")["update"]["status"]
    assert status["state"] == "TASK_KILLED", status
    assert "before the executor subscribed" in status["message"]
    deadline = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < deadline, "the unsubscribed executor still runs"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")
