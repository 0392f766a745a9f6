"""Unit tests of the emulated master's logic with a fake agent runtime and a fake clock.

These cover behaviour that the contract tests cannot provoke on the real master quickly or at
all: update ordering and retries, RESCIND on resource changes, failover timeouts, GPU filtering.
"""

from __future__ import annotations

from typing import Any

import pytest

from dlc.mesos.emulator.master import CallError, Master
from dlc.mesos.emulator.model import make_status
from dlc.mesos.emulator.streams import EventStream
from dlc.mesos.resources import Resources


class FakeRuntime:
    """Records what the master asks the agents to do."""

    def __init__(self) -> None:
        self.launched: list[Any] = []
        self.killed: list[str] = []
        self.acked: list[str] = []
        self.shut_down: list[str] = []

    def executor_resources(self, agent_id: str) -> Resources:
        return Resources()

    def has_executor(self, *ids: str) -> bool:
        return False

    def launch(self, agent, framework, task, executor) -> None:
        self.launched.append(task)

    def kill(self, task) -> None:
        self.killed.append(task.task_id)

    def acknowledged(self, task, status) -> None:
        self.acked.append(status["uuid"])

    def shutdown_framework(self, framework_id: str) -> None:
        self.shut_down.append(framework_id)

    def message_to_executor(self, *args: Any) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drain(stream: EventStream) -> list[dict[str, Any]]:
    events = []
    while (event := stream.next_event(0)) is not None and event:
        events.append(event)
    return events


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def master(clock: Clock) -> Master:
    master = Master("m1", FakeRuntime(), lambda: "127.0.0.1:5050", clock=clock)
    master.add_agent(
        "host-a",
        Resources.parse("cpus:4;mem:4096;gpus:4;gpu_ids:{0,1,2,3}"),
        [{"name": "gpu_model", "type": "TEXT", "text": {"value": "V100"}}],
    )
    return master


def subscribe(master: Master, gpu: bool = True, **info: Any) -> tuple[str, EventStream]:
    framework_info = {"user": "u", "name": "n", **info}
    if gpu:
        framework_info["capabilities"] = [{"type": "GPU_RESOURCES"}]
    stream = master.subscribe(
        {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info}}
    )
    subscribed = drain(stream)[0]
    assert subscribed["type"] == "SUBSCRIBED"
    return subscribed["subscribed"]["framework_id"]["value"], stream


def call(master: Master, framework_id: str, stream: EventStream, kind: str, **payload: Any):
    body = {"type": kind, "framework_id": {"value": framework_id}}
    if payload:
        body[kind.lower()] = payload
    master.call(body, stream.stream_id)


def launch_one(master: Master, framework_id: str, stream: EventStream) -> Any:
    master.tick()
    offer = of_type(drain(stream), "OFFERS")[0]["offers"]["offers"][0]
    task = {
        "task_id": {"value": "t1"},
        "agent_id": offer["agent_id"],
        "name": "t1",
        "resources": Resources.parse("cpus:1;gpus:1;gpu_ids:{2}").to_json(),
        "command": {"value": "true"},
    }
    operation = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
    call(master, framework_id, stream, "ACCEPT", offer_ids=[offer["id"]], operations=[operation])
    return master.runtime.launched[-1]


def test_updates_wait_for_the_previous_ack_and_are_retried(master: Master, clock: Clock) -> None:
    framework_id, stream = subscribe(master)
    task = launch_one(master, framework_id, stream)
    running = make_status("t1", "TASK_RUNNING", "SOURCE_EXECUTOR")
    finished = make_status("t1", "TASK_FINISHED", "SOURCE_EXECUTOR")
    master.status_update(task, running)
    master.status_update(task, finished)
    sent = of_type(drain(stream), "UPDATE")
    assert [e["update"]["status"]["state"] for e in sent] == ["TASK_RUNNING"]

    clock.now += 11
    master.tick()
    resent = of_type(drain(stream), "UPDATE")
    assert [e["update"]["status"]["uuid"] for e in resent] == [running["uuid"]]

    ack = {"agent_id": {"value": task.agent_id}, "task_id": {"value": "t1"}}
    call(master, framework_id, stream, "ACKNOWLEDGE", **ack, uuid=running["uuid"])
    assert [e["update"]["status"]["state"] for e in of_type(drain(stream), "UPDATE")] == [
        "TASK_FINISHED"
    ]
    call(master, framework_id, stream, "ACKNOWLEDGE", **ack, uuid=finished["uuid"])
    assert master.runtime.acked == [running["uuid"], finished["uuid"]]
    assert (framework_id, "t1") not in master.tasks


def test_resource_change_rescinds_outstanding_offer(master: Master) -> None:
    framework_id, stream = subscribe(master)
    master.tick()
    offer = of_type(drain(stream), "OFFERS")[0]["offers"]["offers"][0]
    agent_id = offer["agent_id"]["value"]
    master.set_agent_resources(agent_id, Resources.parse("cpus:2;mem:1024;gpus:2;gpu_ids:{0,1}"))
    master.tick()
    events = drain(stream)
    assert of_type(events, "RESCIND")[0]["rescind"]["offer_id"] == offer["id"]
    new = of_type(events, "OFFERS")[0]["offers"]["offers"][0]
    items = [r for r in new["resources"] if r["name"] == "gpu_ids"][0]["set"]["item"]
    assert items == ["0", "1"]


def test_gpu_agent_is_not_offered_without_capability(master: Master) -> None:
    _, stream = subscribe(master, gpu=False)
    master.add_agent("cpu-only", Resources.parse("cpus:2;mem:1024"), [])
    master.tick()
    offers = [o for e in of_type(drain(stream), "OFFERS") for o in e["offers"]["offers"]]
    assert [o["hostname"] for o in offers] == ["cpu-only"]


def test_failover_timeout_removes_framework_and_its_tasks(master: Master, clock: Clock) -> None:
    framework_id, stream = subscribe(master, failover_timeout=30)
    launch_one(master, framework_id, stream)
    master.disconnected(stream)
    clock.now += 29
    master.tick()
    assert framework_id in master.frameworks
    clock.now += 2
    master.tick()
    assert framework_id not in master.frameworks
    assert master.runtime.shut_down == [framework_id]
    again = master.subscribe(
        {
            "type": "SUBSCRIBE",
            "framework_id": {"value": framework_id},
            "subscribe": {"framework_info": {"user": "u", "name": "n"}},
        }
    )
    assert drain(again) == [{"type": "ERROR", "error": {"message": "Framework has been removed"}}]


def test_second_subscription_fails_over_the_first(master: Master) -> None:
    framework_id, first = subscribe(master)
    second = master.subscribe(
        {
            "type": "SUBSCRIBE",
            "framework_id": {"value": framework_id},
            "subscribe": {"framework_info": {"user": "u", "name": "n"}},
        }
    )
    assert of_type(drain(first), "ERROR")[0]["error"]["message"] == "Framework failed over"
    assert first.closed
    assert drain(second)[0]["subscribed"]["framework_id"]["value"] == framework_id


@pytest.mark.parametrize(
    ("body", "stream_id", "message"),
    [
        pytest.param({"type": "REVIVE"}, "x", "not found", id="no-framework-id"),
        pytest.param(None, None, "Mesos-Stream-Id", id="no-stream-id"),
        pytest.param(None, "wrong", "does not match", id="wrong-stream-id"),
        pytest.param({"type": "FROB"}, "ok", "not supported", id="unknown-call"),
    ],
)
def test_bad_calls_are_refused(master: Master, body, stream_id, message) -> None:
    framework_id, stream = subscribe(master)
    body = dict(body or {"type": "REVIVE"})
    if body["type"] != "REVIVE" or stream_id != "x":
        body["framework_id"] = {"value": framework_id}
    with pytest.raises(CallError, match=message):
        master.call(body, stream.stream_id if stream_id == "ok" else stream_id)


def test_subscribe_needs_user_and_name(master: Master) -> None:
    with pytest.raises(CallError, match="user"):
        master.subscribe({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "n"}}})
