"""``dlc exec``: run a command in a running job's container, through DLC's own path.

The user never reaches Docker, the agent or SSH: ``dlc exec`` asks the scheduler's API (user
token, own jobs only), the API asks this endpoint, which the task's executor serves while the
container runs, and the executor runs the command with the engine's exec API as the container's
own user. The endpoint checks the job's secret (``X-DLC-Job-Secret``: the same HMAC the launch
spec carries, recomputed by the API), so only the scheduler can use it. It listens on an
ephemeral port of the agent host and writes that port to ``<sandbox>/dlc-exec.json``, which
the API reads like ``stdout``.
"""

from __future__ import annotations

import base64
import hmac
import http.server
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
EXEC_FILE = "dlc-exec.json"
MAX_OUTPUT = 512 << 10
MAX_REQUEST = 64 << 10

#: runs argv in the container; returns (exit code, combined output)
Runner = Callable[[list[str]], tuple[int, bytes]]


def docker_exec(client, container_id: str) -> Runner:
    """A :data:`Runner` over the docker SDK's low-level exec API."""

    def run(argv: list[str]) -> tuple[int, bytes]:
        exec_id = client.api.exec_create(container_id, argv, stdout=True, stderr=True)["Id"]
        output = client.api.exec_start(exec_id)
        return int(client.api.exec_inspect(exec_id)["ExitCode"] or 0), output[-MAX_OUTPUT:]

    return run


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
        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
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
        if req.path != "/exec" or not hmac.compare_digest(given, self.secret):
            return _reply(req, 403, {"error": "wrong or missing job secret"})
        try:
            length = int(req.headers.get("Content-Length", "0"))
            if length > MAX_REQUEST:
                raise ValueError("request too large")
            argv = json.loads(req.rfile.read(length))["argv"]
            if not argv or not all(isinstance(a, str) for a in argv):
                raise ValueError("argv must be a non-empty list of strings")
        except (ValueError, KeyError, TypeError) as exc:
            return _reply(req, 400, {"error": f"bad exec request: {exc}"})
        try:
            code, output = self.runner(argv)
        except Exception as exc:  # the engine's refusal, one line back to the user
            log.warning("exec %s failed: %s", argv[:1], exc)
            return _reply(req, 409, {"error": f"exec failed: {str(exc)[:300]}"})
        _reply(req, 200, {"exit_code": code, "output": base64.b64encode(output).decode()})


def _reply(req, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(data)))
    req.end_headers()
    req.wfile.write(data)
