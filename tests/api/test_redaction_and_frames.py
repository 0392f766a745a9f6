"""Red-team finding 5 (docs/security.md), through the real API on loopback:

* ``/v1/queue`` and ``/v1/tenancy`` showed non-admins other users' job ids, user names and
  reasons (which ``GET /v1/jobs/ID`` then called "no job"): now a non-admin sees their own
  jobs in full and others' as anonymous rows with a position;
* a first shell websocket message ``[1,2]`` raised an uncaught ``AttributeError`` with a
  traceback in the scheduler log: now it is refused in one line and the socket closed.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from click.testing import CliRunner
from websockets.sync.client import connect

from dlc.api import env_routes
from dlc.api.client import ApiClient
from dlc.api.env_routes import EnvContext
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.api.shell_relay import relay
from dlc.cli import queue_cmd
from dlc.errors import ApiError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.blobs import BlobStore
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer


@pytest.fixture
def api(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda s: (s.image, None))  # fmt: skip
    server = ApiServer(core, LogReader(lambda: core.framework_id), lambda a: None)
    server.env = EnvContext(BlobStore(tmp_path / "db.blobs"), "key")  # as dlc/app/service.py
    server.start()
    tokens = {"alice": store.add_token("alice"), "bob": store.add_token("bob"),
              "admin": store.add_token("root", admin=True)}  # fmt: skip
    yield server, core, tokens
    server.stop()


def queued_pair(server, tokens) -> tuple[dict, dict]:
    """One waiting job of alice and one of bob (no agent: both queued)."""
    mine = ApiClient(server.url, tokens["alice"]).submit({"image": "busybox", "gpus": 1})
    theirs = ApiClient(server.url, tokens["bob"]).submit({"image": "busybox", "gpus": 1})
    return mine, theirs


@pytest.mark.parametrize("path", ["/v1/queue", "/v1/tenancy"])
def test_a_user_sees_their_own_jobs_in_full_and_others_by_position_only(api, path):
    server, _, tokens = api
    mine, theirs = queued_pair(server, tokens)
    body = ApiClient(server.url, tokens["alice"])._call("GET", path)
    rows = body["queue"]
    assert rows[0]["id"] == mine["id"] and rows[0]["user"] == "alice"
    assert rows[1] == {"position": 2, "hidden": True}
    assert theirs["id"] not in json.dumps(body) and "bob" not in json.dumps(body)
    # an admin sees everyone's
    every = ApiClient(server.url, tokens["admin"])._call("GET", path)["queue"]
    assert [(r["id"], r["user"]) for r in every] == [(mine["id"], "alice"), (theirs["id"], "bob")]


def test_dlc_queue_prints_other_users_jobs_as_positions(api):
    server, _, tokens = api
    mine, theirs = queued_pair(server, tokens)
    out = CliRunner().invoke(queue_cmd.command, ["--api", server.url, "--token", tokens["alice"]])
    assert out.exit_code == 0, out.output
    assert mine["id"] in out.output and "(another user)" in out.output
    assert theirs["id"] not in out.output and "bob" not in out.output


@pytest.mark.parametrize("opening", ["[1,2]", "not json", '"rows"', "7"])
def test_a_bad_first_shell_message_is_one_line_and_no_traceback(api, monkeypatch, caplog, opening):
    server, core, tokens = api
    job = ApiClient(server.url, tokens["alice"]).submit({"image": "busybox", "gpus": 1})
    core.on_offers([offer("o1", "a1", [0])])
    task = f"{job['id']}.0.0"
    core.on_status({"task_id": {"value": task}, "agent_id": {"value": "a1"},
                    "state": "TASK_RUNNING"})  # fmt: skip
    # the executor's exec port from its sandbox: the relay refuses before it connects
    monkeypatch.setattr(env_routes, "_exec_port", lambda api, task: 9)
    url = server.url.replace("http://", "ws://") + f"/v1/jobs/{job['id']}/shell"
    caplog.set_level(logging.DEBUG)
    with connect(url, additional_headers={"Authorization": f"Bearer {tokens['alice']}"}) as ws:
        ws.send(opening)
        reply = json.loads(ws.recv(timeout=10))
        with pytest.raises(Exception):  # noqa: B017  (closed by the server)
            ws.recv(timeout=10)
        code = ws.close_code
    assert reply["error"].startswith("shell: the first message is not a JSON object")
    assert "\n" not in reply["error"] and code == 4400
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_an_unknown_token_still_gets_one_line(api):
    server, _, _ = api
    url = server.url.replace("http://", "ws://") + "/v1/jobs/nope/shell"
    with connect(url, additional_headers={"Authorization": "Bearer nope"}) as ws:
        reply = json.loads(ws.recv(timeout=10))
    assert reply["error"].startswith("missing or unknown API token")
    with pytest.raises(ApiError):
        ApiClient(server.url, "nope").jobs()


def test_a_bad_resize_mid_session_is_dropped_and_the_shell_goes_on():
    """Later text frames that are not a JSON object (``[1,2]``) used to kill the relay's
    inbound task with an ``AttributeError``; now they are dropped and a good one still
    reaches the executor as a resize."""
    from dlc.executor import shell_frames as frames
    from tests.api.test_shell_sessions import FakeSocket

    async def run() -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        done = asyncio.get_running_loop().create_future()

        async def handle(reader, writer):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
            while True:
                try:
                    kind, size = frames.HEADER.unpack(await reader.readexactly(frames.HEADER.size))
                    got.append((kind, await reader.readexactly(size)))
                except asyncio.IncompleteReadError:
                    break
            writer.write(frames.pack(frames.EXIT, b'{"exit_code": 0}'))
            await writer.drain()
            done.set_result(True)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ws = FakeSocket()
        for text in ("[1,2]", "nope", '{"rows": 5, "cols": 9}'):
            ws.inbox.put_nowait({"type": "websocket.receive", "text": text})
        ws.inbox.put_nowait({"type": "websocket.disconnect"})
        async with server:
            port = server.sockets[0].getsockname()[1]
            await asyncio.wait_for(relay(ws, "127.0.0.1", port, "s", {}), 10)
            await asyncio.wait_for(done, 10)
        return got

    got = asyncio.run(run())
    assert got == [(frames.RESIZE, b'{"rows": 5, "cols": 9}')]
