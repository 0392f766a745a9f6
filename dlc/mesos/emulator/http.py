"""HTTP front of the Mesos emulator: the v1 scheduler and executor APIs and read-only state.

Routes: ``GET /`` (an HTML page: what the emulator is and holds), ``/version``,
``/master/state`` (also ``/state``, ``/master/state.json``),
``/master/slaves``, ``/slave(N)/state``; ``POST /api/v1/scheduler``, ``/api/v1/executor`` and
``/slave(N)/api/v1/executor``. Subscriptions answer ``200`` with a chunked RecordIO body (and a
``Mesos-Stream-Id`` header); other calls ``202 Accepted`` with an empty body; refused calls
``400`` (or ``415`` for a non-JSON body) with a one-line text reason, as the real master does;
executor calls without a valid token ``401``, with another executor's token ``403``
(:mod:`~dlc.mesos.emulator.executor_auth`).
"""

from __future__ import annotations

import json
import logging
import re
import select
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dlc.mesos.emulator.executor_auth import check_framework
from dlc.mesos.emulator.master import HEARTBEAT_INTERVAL_SECONDS, CallError
from dlc.mesos.emulator.model import EMULATOR_BUILD_USER
from dlc.mesos.emulator.page import render_index
from dlc.mesos.emulator.state import agent_state, master_state, slaves_state
from dlc.mesos.emulator.streams import EventStream, http_chunk, recordio

logger = logging.getLogger(__name__)

_AGENT_PATH = re.compile(r"^/slave\((\d+)\)(/.*)$")
_POLL_SECONDS = 0.2


class EmulatorHTTPServer(ThreadingHTTPServer):
    """Threaded server bound to loopback, holding a reference to the emulator."""

    daemon_threads = True
    allow_reuse_address = True
    #: socketserver listens with a backlog of 5; `dlc local` starts 128 executors at once (and
    #: each holds a stream and posts updates), which overflowed it on a loaded machine
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], emulator: Any) -> None:
        self.emulator = emulator
        super().__init__(address, EmulatorHandler)


class EmulatorHandler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the emulator."""

    protocol_version = "HTTP/1.1"
    server: EmulatorHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s %s", self.address_string(), format % args)

    # -- plumbing ------------------------------------------------------------------------------

    def _reply(self, status: int, body: bytes = b"", content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, obj: Any) -> None:
        self._reply(200, json.dumps(obj).encode(), "application/json")

    def _split_agent(self) -> tuple[int | None, str]:
        path = self.path.split("?", 1)[0]
        match = _AGENT_PATH.match(path)
        if match:
            return int(match.group(1)), match.group(2)
        return None, path

    # -- GET -----------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        emulator = self.server.emulator
        agent_index, path = self._split_agent()
        page: bytes | None = None
        with emulator.lock:
            if path in ("/", "/index.html") and agent_index is None:
                page = render_index(master_state(emulator.master)).encode()
            elif path == "/version":
                body: Any = {
                    "version": "1.11.0",
                    "git_tag": "1.11.0",
                    "build_user": EMULATOR_BUILD_USER,
                }
            elif agent_index is not None and path in ("/state", "/state.json"):
                body = agent_state(emulator.master, agent_index)
            elif path in ("/master/state", "/master/state.json", "/state", "/state.json"):
                body = master_state(emulator.master)
            elif path in ("/master/slaves", "/slaves"):
                body = slaves_state(emulator.master)
            elif path == "/health":
                body = None
            else:
                body = KeyError
        if page is not None:
            self._reply(200, page, "text/html; charset=utf-8")
        elif body is KeyError:
            self._reply(404, b"Not found\n")
        elif body is None:
            self._reply(200)
        else:
            self._json(body)

    # -- POST ----------------------------------------------------------------------------------

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        agent_index, path = self._split_agent()
        if path == "/api/v1/scheduler" and agent_index is None:
            api = "scheduler"
        elif path == "/api/v1/executor":
            api = "executor"
        else:
            self._reply(404, b"Not found\n")
            return
        if "json" not in (self.headers.get("Content-Type") or "application/json"):
            self._reply(415, b"Expecting 'Content-Type' of application/json\n")
            return
        try:
            call = json.loads(raw.decode() or "null")
            if not isinstance(call, dict) or "type" not in call:
                raise ValueError("the body must be a JSON object with a 'type'")
        except ValueError as exc:
            self._reply(400, f"Failed to parse body into Call: {exc}\n".encode())
            return
        try:
            stream = self._dispatch(api, call, agent_index)
        except CallError as exc:
            self._reply(exc.status, f"{exc}\n".encode())
            return
        if stream is None:
            self._reply(202)
        else:
            self._stream(stream, api)

    def _dispatch(self, api: str, call: dict[str, Any], agent_index: int | None):
        emulator = self.server.emulator
        with emulator.lock:
            if api == "scheduler":
                check_framework(emulator.framework_authorization, self.headers.get("Authorization"))
                if call["type"] == "SUBSCRIBE":
                    return emulator.master.subscribe(call)
                emulator.master.call(call, self.headers.get("Mesos-Stream-Id"))
                return None
            authorization = self.headers.get("Authorization")
            if call["type"] == "SUBSCRIBE":
                return emulator.runtime.executor_subscribe(call, agent_index, authorization)
            emulator.runtime.executor_call(call, agent_index, authorization)
            return None

    def _stream(self, stream: EventStream, api: str) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Mesos-Stream-Id", stream.stream_id)
        self.end_headers()
        try:
            self._pump(stream)
            self.wfile.write(http_chunk(b""))
            self.wfile.flush()
        except OSError:
            logger.debug("%s stream %s broke", api, stream.stream_id)
        finally:
            stream.close()
            with self.server.emulator.lock:
                if api == "scheduler":
                    self.server.emulator.master.disconnected(stream)
                else:
                    self.server.emulator.runtime.executor_disconnected(stream)

    def _pump(self, stream: EventStream) -> None:
        """Writes events until the stream ends or the peer hangs up; heartbeats when idle."""
        last_write = time.monotonic()
        while True:
            event = stream.next_event(_POLL_SECONDS)
            if event is None:
                return
            if not event:
                if self._peer_closed():
                    return
                if time.monotonic() - last_write < HEARTBEAT_INTERVAL_SECONDS:
                    continue
                event = {"type": "HEARTBEAT"}
            self.wfile.write(http_chunk(recordio(event)))
            self.wfile.flush()
            last_write = time.monotonic()

    def _peer_closed(self) -> bool:
        connection: socket.socket = self.connection
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        try:
            return connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True
