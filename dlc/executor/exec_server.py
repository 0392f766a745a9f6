"""``dlc exec``: run a command in a running job's container, through DLC's own path.

The user never reaches Docker, the agent or SSH: ``dlc exec`` asks the scheduler's API (user
token, own jobs only), the API asks this endpoint, which the task's executor serves while the
container runs, and the executor runs the command with the engine's exec API as the container's
own user. The endpoint checks the job's secret (``X-DLC-Job-Secret``: the same HMAC the launch
spec carries, recomputed by the API), so only the scheduler can use it. It listens on an
ephemeral port of the agent host and writes that port to ``<sandbox>/dlc-exec.json``, which
the API reads like ``stdout``.

``dlc shell`` uses the same endpoint and secret (``POST /shell``): after a ``200`` the
connection carries :mod:`frames <dlc.executor.shell_frames>` both ways (keystrokes and resizes
in, the terminal's output and finally the exit code out) to a ``docker exec -it`` session.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import http.server
import json
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from dlc.executor import shell_frames as frames

log = logging.getLogger(__name__)
EXEC_FILE = "dlc-exec.json"
MAX_OUTPUT = 512 << 10
MAX_REQUEST = 64 << 10

#: the endpoint listens on every interface of the agent, where other jobs' containers reach it
#: too (through their bridge's gateway): without a token they can still open connections, and
#: each one held a thread forever (300 idle connections: 300 threads, red-team 2026-11-23).
#: So: seconds to send a whole request, and open connections per client address and in all.
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS_PER_IP = 16
MAX_CONNECTIONS = 64

#: runs argv in the container; returns (exit code, combined output)
Runner = Callable[[list[str]], tuple[int, bytes]]


class DockerExec:
    """A :data:`Runner` over the docker SDK's low-level exec API, plus TTY sessions."""

    def __init__(self, client, container_id: str):
        self.client, self.container_id = client, container_id

    def __call__(self, argv: list[str]) -> tuple[int, bytes]:
        api = self.client.api
        exec_id = api.exec_create(self.container_id, argv, stdout=True, stderr=True)["Id"]
        output = api.exec_start(exec_id)
        return int(api.exec_inspect(exec_id)["ExitCode"] or 0), output[-MAX_OUTPUT:]

    def open_shell(self, argv: list[str], rows: int, cols: int) -> TtySession:
        """``docker exec -it``: a session on the engine's hijacked exec socket."""
        api = self.client.api
        exec_id = api.exec_create(self.container_id, argv, stdin=True, tty=True,
                                  environment={"TERM": "xterm-256color"})["Id"]  # fmt: skip
        sock = api.exec_start(exec_id, socket=True, tty=True)
        session = TtySession(api, exec_id, getattr(sock, "_sock", sock))
        if rows and cols:
            session.resize(rows, cols)
        return session


class TtySession:
    """One ``docker exec -it`` session: raw bytes both ways (a TTY stream is not multiplexed)."""

    def __init__(self, api, exec_id: str, sock):
        self.api, self.exec_id, self.sock = api, exec_id, sock

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> bytes:
        """The next output bytes; ``b""`` once the command has ended."""
        return self.sock.recv(65536)

    def resize(self, rows: int, cols: int) -> None:
        try:
            self.api.exec_resize(self.exec_id, height=rows, width=cols)
        except Exception as exc:  # the process may be gone already; a resize is optional
            log.debug("exec resize failed: %s", exc)

    def exit_code(self) -> int:
        return int(self.api.exec_inspect(self.exec_id).get("ExitCode") or 0)

    def close(self) -> None:
        self.sock.close()


def docker_exec(client, container_id: str) -> DockerExec:
    """The engine-backed runner (and shell opener) for ``container_id``."""
    return DockerExec(client, container_id)


class ExecServer:
    """The executor's exec endpoint for one task (``POST /exec`` ``{"argv": [...]}``)."""

    def __init__(self, secret: str, runner: Runner, host: str = "0.0.0.0"):  # noqa: S104
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                outer._handle(self)

            def log_message(self, *args):
                pass

        self.secret, self.runner = secret, runner
        self.server = _BoundedServer((host, 0), Handler)
        self.port = self.server.server_address[1]

    def start(self, sandbox: Path) -> ExecServer:
        threading.Thread(target=self.server.serve_forever, name="dlc-exec", daemon=True).start()
        (sandbox / EXEC_FILE).write_text(json.dumps({"port": self.port}))
        return self

    def close(self, sandbox: Path) -> None:
        (sandbox / EXEC_FILE).unlink(missing_ok=True)
        self.server.shutdown()
        self.server.server_close()

    def _handle(self, req) -> None:
        given = req.headers.get("X-DLC-Job-Secret", "")
        if req.path not in ("/exec", "/shell") or not hmac.compare_digest(given, self.secret):
            return _reply(req, 403, {"error": "wrong or missing job secret"})
        try:
            length = int(req.headers.get("Content-Length", "0"))
            if length > MAX_REQUEST:
                raise ValueError("request too large")
            body = json.loads(req.rfile.read(length))
            req.server.request_read(req.request)
            argv = body["argv"]
            if not argv or not all(isinstance(a, str) for a in argv):
                raise ValueError("argv must be a non-empty list of strings")
        except (ValueError, KeyError, TypeError) as exc:
            return _reply(req, 400, {"error": f"bad exec request: {exc}"})
        if req.path == "/shell":
            return self._shell(req, argv, body)
        try:
            code, output = self.runner(argv)
        except Exception as exc:  # the engine's refusal, one line back to the user
            log.warning("exec %s failed: %s", argv[:1], exc)
            return _reply(req, 409, {"error": f"exec failed: {str(exc)[:300]}"})
        _reply(req, 200, {"exit_code": code, "output": base64.b64encode(output).decode()})

    def _shell(self, req, argv: list[str], body: dict) -> None:
        opener = getattr(self.runner, "open_shell", None)
        if opener is None:
            return _reply(req, 409, {"error": "this executor cannot open a terminal"})
        try:
            size = (int(body.get("rows") or 0), int(body.get("cols") or 0))
            session = opener(argv, *size)
        except Exception as exc:
            log.warning("shell %s failed: %s", argv[:1], exc)
            return _reply(req, 409, {"error": f"shell failed: {str(exc)[:300]}"})
        req.send_response(200)
        req.send_header("Content-Type", "application/x-dlc-shell")
        req.end_headers()
        req.wfile.flush()
        req.close_connection = True
        frames.relay_session(session, req.rfile, req.wfile)


class _BoundedServer(http.server.ThreadingHTTPServer):
    """A threading HTTP server with connection caps and a deadline to read each request.

    A connection past a cap is closed at accept; one that has not sent its whole request
    within :data:`REQUEST_TIMEOUT_S` of connecting is shut down (a slow client trickling bytes
    included); a ``/shell`` session lives on after its request is read.
    """

    daemon_threads = True
    request_queue_size = 128  # the listen backlog (5 by default: a burst waited on SYN retries)

    def __init__(
        self, address: tuple[str, int], handler: type[http.server.BaseHTTPRequestHandler]
    ) -> None:
        super().__init__(address, handler)
        self._lock = threading.Lock()
        self._open: dict[int, tuple[str, threading.Timer]] = {}  # id(socket) -> (ip, deadline)

    def verify_request(self, request, client_address) -> bool:
        ip = str(client_address[0])
        with self._lock:
            mine = sum(1 for owner, _ in self._open.values() if owner == ip)
            if len(self._open) >= MAX_CONNECTIONS or mine >= MAX_CONNECTIONS_PER_IP:
                return False  # socketserver closes it
            timer = threading.Timer(REQUEST_TIMEOUT_S, _cut, (request,))
            timer.daemon = True
            self._open[id(request)] = (ip, timer)
        timer.start()
        return True

    def request_read(self, request) -> None:
        """The whole request arrived: its deadline no longer applies (a shell lives on)."""
        with self._lock:
            _, timer = self._open.get(id(request), ("", None))
        if timer is not None:
            timer.cancel()

    def handle_error(self, request, client_address) -> None:
        # a connection cut at its deadline or dropped by its client; no traceback in the log
        log.debug("exec connection from %s ended early", client_address[0])

    def shutdown_request(self, request) -> None:
        with self._lock:
            _, timer = self._open.pop(id(request), ("", None))
        if timer is not None:
            timer.cancel()
        super().shutdown_request(request)


def _cut(request) -> None:
    with contextlib.suppress(OSError):
        request.shutdown(socket.SHUT_RDWR)  # the handler's read ends, and its thread with it


def _reply(req, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(data)))
    req.end_headers()
    req.wfile.write(data)
