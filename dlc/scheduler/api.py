"""The scheduler's HTTP JSON API (stdlib ``http.server`` in a thread).

Endpoints (described by ``GET /openapi.json``):

* ``POST /v1/jobs`` submit a job spec; ``GET /v1/jobs`` list;
  ``GET /v1/jobs/{id}`` show with history; ``POST /v1/jobs/{id}/kill``;
  ``GET /v1/jobs/{id}/logs?stream=stdout&offset=0&length=65536``.
* ``GET /`` a small status page (the framework's ``webui_url`` in the Mesos UI),
  ``GET /healthz``.

Every ``/v1`` request needs ``Authorization: Bearer <token>``. A user sees and
kills only their own jobs; an admin token sees and kills all. Errors are JSON
``{"error": "<one line>", "field": ...}`` with a fitting status code.

The stdlib server is enough here: a handful of clients, short requests, JSON
only; it avoids a web framework dependency on every agent host.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlparse

from dlc import __version__
from dlc.errors import DlcError, ImageNotFound, JobNotFound, JobSpecError
from dlc.scheduler.core import Actions, SchedulerCore
from dlc.scheduler.jobs import Job, JobSpec, JobState
from dlc.scheduler.logs import LogReader

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20


class _HttpError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.field = status, field


def job_to_dict(job: Job, history: list | None = None) -> dict[str, Any]:
    """The API's JSON view of a job."""
    spec = job.spec
    body: dict[str, Any] = {
        "id": job.job_id,
        "user": job.user,
        "state": job.state.value,
        "name": spec.name or spec.label,
        "framework": spec.framework,
        "image": spec.image,
        "gpus": spec.gpus,
        "nodes": spec.nodes,
        "gpu_model": spec.gpu_model,
        "cpus": spec.cpus,
        "mem_mib": spec.mem_mib,
        "priority": spec.priority,
        "retries": spec.retries,
        "command": list(spec.command),
        "attempt": job.attempt,
        "failures": job.failures,
        "submitted_at": job.submitted_at,
        "message": job.message,
        "kill_requested": job.kill_requested,
        "tasks": [t.to_dict() for t in job.tasks],
    }
    if history is not None:
        body["history"] = [{"at": at, "state": st, "message": msg} for at, st, msg in history]
    return body


class ApiServer:
    """Serves the API for one :class:`SchedulerCore`.

    Args:
        core: the scheduler core (jobs, kill, visibility).
        logs: sandbox reader for ``/logs``.
        dispatch: carries out :class:`Actions` (revive on submit, kills) on the driver.
        host, port: where to listen (port 0: any free port).
        framework_url: Mesos UI URL of the framework (callable; known after registration).
        master_kind: ``"emulator"``/``"mesos"`` (callable; ``None`` before registration),
            so clients can say which UI ``framework_url`` opens.
        web: the dashboard (:class:`dlc.web.dashboard.Dashboard`): serves ``/``, ``/static``,
            ``/metrics`` and ``/v1/dashboard``; without it ``/`` is a small status page.
    """

    def __init__(
        self,
        core: SchedulerCore,
        logs: LogReader,
        dispatch: Callable[[Actions], None],
        host: str = "127.0.0.1",
        port: int = 0,
        framework_url: Callable[[], str | None] = lambda: None,
        web: Any = None,
        master_kind: Callable[[], str | None] = lambda: None,
    ):
        self.core, self.logs, self.dispatch = core, logs, dispatch
        self.framework_url = framework_url
        self.master_kind = master_kind
        self.web = web
        handler = type("Handler", (_Handler,), {"api": self})
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise DlcError(
                f"--api-port {port}: cannot listen on {host}:{port} "
                f"({exc.strerror or exc}); pick another port, or 0 for any"
            ) from None
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` the API answers on."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        """Serve in a daemon thread; returns :attr:`url`."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="dlc-api", daemon=True
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and close the socket (also when :meth:`start` never ran)."""
        if self._thread is not None:  # shutdown() waits for serve_forever: only if it runs
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    # -- request handling (called by the handler) ----------------------------

    def route(self, method: str, path: str, query: dict, body: Any, token: str | None):
        if method == "GET" and path == "/openapi.json":
            return 200, openapi_document()
        if method == "GET" and path == "/healthz":
            return 200, {"ok": True, "version": __version__}
        if not path.startswith("/v1/"):
            raise _HttpError(404, f"no endpoint {method} {path}; see /openapi.json")
        user, admin = self._auth(token)
        if self.web is not None and self.web.handles(path):
            return self.web.route(method, path, user, admin)
        match = re.fullmatch(r"/v1/jobs(?:/([A-Za-z0-9_.-]+)(?:/(kill|logs))?)?", path)
        if not match:
            raise _HttpError(404, f"no endpoint {method} {path}; see /openapi.json")
        job_id, action = match.groups()
        if job_id is None:
            if method == "POST":
                return 201, self._submit(user, body)
            if method == "GET":
                jobs = self.core.store.list_jobs(user=None if admin else user)
                return 200, {"jobs": [job_to_dict(j) for j in jobs]}
        elif action is None and method == "GET":
            job = self.core.visible_job(job_id, user, admin)
            return 200, job_to_dict(job, self.core.store.history(job_id))
        elif action == "kill" and method == "POST":
            job, actions = self.core.kill(job_id, user, admin)
            self.dispatch(actions)
            return 200, job_to_dict(job)
        elif action == "logs" and method == "GET":
            return 200, self._logs(self.core.visible_job(job_id, user, admin), query)
        raise _HttpError(405, f"{method} is not allowed on {path}")

    def _auth(self, token: str | None) -> tuple[str, bool]:
        found = self.core.store.user_for_token(token) if token else None
        if found is None:
            raise _HttpError(401, "missing or unknown API token: pass --token or set DLC_TOKEN")
        return found

    def _submit(self, user: str, body: Any) -> dict:
        job = self.core.submit(user, JobSpec.from_dict(body))
        self.dispatch(Actions(revive=True))
        out = job_to_dict(job)
        out["framework_url"] = self.framework_url()
        out["master_kind"] = self.master_kind()
        return out

    def _logs(self, job: Job, query: dict) -> dict:
        def arg(name: str, default: int) -> int:
            try:
                return int(query.get(name, [default])[0])
            except ValueError:
                raise _HttpError(400, f"{name} must be a whole number", name) from None

        stream = query.get("stream", ["stdout"])[0]
        out = self.logs.read(job, stream, arg("offset", 0), arg("length", 65536), arg("rank", 0))
        out["state"] = job.state.value
        out["done"] = job.state.terminal
        return out

    def status_page(self) -> str:
        counts: dict[str, int] = {s.value: 0 for s in JobState}
        for job in self.core.store.list_jobs():
            counts[job.state.value] += 1
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in counts.items())
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>DLC scheduler</title></head>"
            f"<body><h1>DLC scheduler {__version__}</h1><table>{rows}</table>"
            "<p>Use <code>dlc jobs</code>; API description: <a href='/openapi.json'>"
            "/openapi.json</a></p></body></html>"
        )


class _Handler(BaseHTTPRequestHandler):
    api: ApiServer
    server_version = f"dlc/{__version__}"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        url = urlparse(self.path)
        web = self.api.web
        page = web.page(url.path) if web is not None and method == "GET" else None
        if page is not None:
            self._send(*page)
            return
        if method == "GET" and url.path == "/":
            self._send(200, self.api.status_page().encode(), "text/html; charset=utf-8")
            return
        try:
            status, body = self.api.route(
                method, url.path, parse_qs(url.query), self._body(method), self._token()
            )
        except _HttpError as exc:
            status, body = exc.status, {"error": str(exc), "field": exc.field}
        except (JobSpecError, ImageNotFound) as exc:
            status, body = 400, {"error": str(exc), "field": getattr(exc, "field", None)}
        except JobNotFound as exc:
            status, body = 404, {"error": str(exc), "field": None}
        except DlcError as exc:
            status, body = 409, {"error": str(exc), "field": None}
        except Exception:  # a bug must not kill the server thread; log it for the operator
            log.exception("API request %s %s failed", method, self.path)
            status, body = 500, {"error": "internal error; see the scheduler log", "field": None}
        self._send(status, json.dumps(body).encode(), "application/json")

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _body(self, method: str) -> Any:
        if method != "POST":
            return None
        size = int(self.headers.get("Content-Length") or 0)
        if size > MAX_BODY:
            raise _HttpError(413, "request body too large")
        raw = self.rfile.read(size) if size else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise _HttpError(400, "request body is not JSON") from None

    def _send(self, status: int, payload: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("api: " + fmt, *args)


def openapi_document() -> dict:
    """The OpenAPI 3.0 description of this API."""
    text = resources.files("dlc.scheduler").joinpath("openapi.json").read_text()
    doc = json.loads(text)
    doc["info"]["version"] = __version__
    return doc
