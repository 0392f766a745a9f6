"""The scheduler's HTTP JSON API: FastAPI on uvicorn, in a thread of the scheduler.

Endpoints (``GET /openapi.json`` is generated from :mod:`dlc.api.models`):

* ``POST /v1/jobs`` submit a job spec; ``GET /v1/jobs?limit=&cursor=`` list, newest
  first, with a ``next`` link; ``GET /v1/jobs/{id}`` show with history;
  ``POST /v1/jobs/{id}/kill``; ``GET /v1/jobs/{id}/logs?stream=stdout&offset=0&length=65536``.
* ``POST``/``DELETE /v1/session`` the dashboard's sign-in (HttpOnly cookie) and sign-out.
* ``GET /`` the dashboard (or a small status page), ``/static/*``, ``/metrics``,
  ``/v1/dashboard``, ``GET /healthz``.

Every other ``/v1`` request needs ``Authorization: Bearer <token>`` (or the session
cookie). A user sees and kills only their own jobs; an admin token sees and kills all.
Errors are JSON ``{"error": "<one line>", "field": ...}`` with a fitting status code.

Abuse bounds (see :mod:`dlc.api.guard`): auth before any body byte is read,
1 MiB bodies, 32 JSON levels, 1024 requests in flight (503 + Retry-After), a listen
backlog of 2048, 10 s from connect to send the request headers (however slowly the bytes
trickle), 5 s keep-alive idle, and at most 64 open connections per client address and
4096 in all: a connection past either cap gets a canned 429/503 and is closed at accept,
before any parsing (a red-team run held 4,200 unauthenticated connections from one
address and made the API answer 503 to everyone). No access log: request lines (and any
query string) are never logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from dlc.api.app import build_app, job_to_dict
from dlc.api.guard import ApiGuard, Limits
from dlc.api.leadership import LeaderRedirect, RoleOf
from dlc.api.logs import LogReader
from dlc.errors import DlcError
from dlc.scheduler.core.facade import Actions, SchedulerCore

if TYPE_CHECKING:
    from dlc.api.env_routes import EnvContext

__all__ = ["ApiServer", "ServerLimits", "job_to_dict", "openapi_document"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerLimits(Limits):
    """:class:`~dlc.api.guard.Limits` plus the connection-level bounds.

    Attributes:
        backlog: the listen queue (connections waiting to be accepted).
        max_connections: open connections in all; more are refused at accept (503).
        max_connections_per_ip: open connections from one client address; more are
            refused at accept (429). 0: no per-address cap (behind a proxy that already
            limits, every client has the proxy's address).
        header_timeout_s: seconds from connect (or from the previous response) a client
            has to send a request's whole headers (slowloris).
        keep_alive_s: seconds an idle keep-alive connection stays open.
    """

    backlog: int = 2048
    max_connections: int = 4096
    max_connections_per_ip: int = 64
    header_timeout_s: float = 10.0
    keep_alive_s: int = 5


class ApiServer:
    """Serves the API for one :class:`SchedulerCore`.

    Args:
        core: the scheduler core (jobs, kill, visibility).
        logs: sandbox reader for ``/logs``.
        dispatch: carries out :class:`Actions` (revive on submit, kills) on the driver.
        host, port: where to listen (port 0: any free port).
        framework_url: Mesos UI URL of the framework (callable; known after registration).
        web: the dashboard (:class:`dlc.web.dashboard.Dashboard`): serves ``/``, ``/static``,
            ``/metrics`` and ``/v1/dashboard``; without it ``/`` is a small status page.
        master_kind: ``"emulator"``/``"mesos"`` (callable; ``None`` before registration),
            so clients can say which UI ``framework_url`` opens.
        limits: the abuse bounds.

    Raises:
        DlcError: the address cannot be bound (names ``--api-port``).
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
        limits: ServerLimits | None = None,
    ):
        self.core, self.logs, self.dispatch = core, logs, dispatch
        self.framework_url = framework_url
        self.master_kind = master_kind
        self.web = web
        self.limits = limits or ServerLimits()
        self.app = build_app(self)
        #: HA role callable (dlc.api.leadership.RoleOf), set by the service with --zk
        self.leadership: RoleOf | None = None
        #: environments' context (keys, blobs, sessions), set by the service
        self.env: EnvContext | None = None
        self._socket = _listen(host, port, self.limits.backlog)
        self._server: _ThreadServer | None = None
        #: open connections per client address (set by :meth:`start`)
        self.connections: ConnectionLimiter | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` the API answers on."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> str:
        """Serve in a daemon thread; returns :attr:`url` once the server accepts."""
        guard: ApiGuard | LeaderRedirect = ApiGuard(self.app, self.core.authenticate, self.limits)
        limiter = ConnectionLimiter(self.limits.max_connections, self.limits.max_connections_per_ip)
        self.connections = limiter
        if self.leadership is not None:  # HA (--zk): standbys redirect to the leader
            guard = LeaderRedirect(guard, self.leadership)
        config = uvicorn.Config(
            guard,
            http=_protocol(self.limits.header_timeout_s, limiter),
            ws=_ws_protocol(limiter),
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_keep_alive=self.limits.keep_alive_s,
            timeout_graceful_shutdown=3,
            limit_concurrency=self.limits.max_connections,
            backlog=self.limits.backlog,
        )
        self._server = _ThreadServer(config)
        self._thread = threading.Thread(target=self._serve, name="dlc-api", daemon=True)
        self._thread.start()
        self._server.ready.wait(timeout_s)
        if not self._server.started:
            raise DlcError(f"the API server did not start in {timeout_s:g} s; see the log")
        return self.url

    def _serve(self) -> None:
        server = self._server
        assert server is not None  # start() makes it before this thread
        try:
            asyncio.run(server.serve(sockets=[self._socket]))
        except Exception:  # startup failed: start() reports it, the log says why
            log.exception("the API server stopped")
        finally:
            server.ready.set()

    def stop(self) -> None:
        """Stop serving and close the socket (also when :meth:`start` never ran)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._thread = None
        self._socket.close()


class _ThreadServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the scheduler and says when it listens."""

    def __init__(self, config: uvicorn.Config):
        super().__init__(config)
        self.ready = threading.Event()

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass

    def capture_signals(self):  # uvicorn >= 0.29: the scheduler's main thread owns signals
        from contextlib import nullcontext

        return nullcontext()

    async def startup(self, sockets: list | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family = infos[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(backlog)  # connections queue up even before the server thread runs
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise DlcError(
            f"--api-port {port}: cannot listen on {host}:{port} "
            f"({exc.strerror or exc}); pick another port, or 0 for any"
        ) from None
    sock.setblocking(False)
    return sock


def _refusal(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message, "field": None}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


#: the canned answers of :class:`ConnectionLimiter` (written once, no parsing, then closed)
_TOO_MANY_FROM_YOU = _refusal(
    429, "Too Many Requests", "too many open connections from your address; close some and retry"
)
_TOO_MANY = _refusal(503, "Service Unavailable", "too many open connections; retry in a second")


class ConnectionLimiter:
    """Open connections per client address and in all, counted from accept to close.

    Lives on the event loop thread (no lock). A websocket upgrade keeps the connection's
    slot: the h11 protocol hands the transport to the websocket protocol, which releases it.
    """

    def __init__(self, total: int, per_ip: int):
        self.total, self.per_ip = total, per_ip
        self.owner: dict[int, str] = {}  # id(transport) -> client address
        self.by_ip: dict[str, int] = {}

    def admit(self, transport: Any) -> bytes | None:
        """Count ``transport`` in, or return the canned refusal to write before closing."""
        peer = transport.get_extra_info("peername")
        ip = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if self.total and len(self.owner) >= self.total:
            return _TOO_MANY
        if self.per_ip and self.by_ip.get(ip, 0) >= self.per_ip:
            return _TOO_MANY_FROM_YOU
        self.owner[id(transport)] = ip
        self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
        return None

    def release(self, transport: Any) -> None:
        """Count ``transport`` out (idempotent: an unknown or released one is ignored)."""
        ip = self.owner.pop(id(transport), None)
        if ip is not None:
            left = self.by_ip[ip] - 1
            if left:
                self.by_ip[ip] = left
            else:
                del self.by_ip[ip]


def _ws_protocol(limiter: ConnectionLimiter) -> type:
    """uvicorn's websocket protocol, giving the connection's slot back when it closes."""
    from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

    class DlcWebSocketProtocol(AutoWebSocketsProtocol):  # type: ignore[misc, valid-type]
        def connection_lost(self, exc: Exception | None) -> None:
            limiter.release(self.transport)
            super().connection_lost(exc)

    return DlcWebSocketProtocol


def _protocol(header_timeout_s: float, limiter: ConnectionLimiter) -> type[H11Protocol]:
    """uvicorn's h11 protocol with connection caps (:class:`ConnectionLimiter`), a deadline
    for each request's headers (slowloris) and JSON for the 400 it sends on malformed HTTP
    (bad request line, headers, Content-Length)."""

    class DlcH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            # Never an access log: request lines may carry tokens in query strings. (uvicorn
            # decides from the "uvicorn.access" logger's handlers, which others may add.)
            self.access_log = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            refusal = limiter.admit(transport)
            if refusal is not None:  # refused before a byte is parsed: one write, then close
                transport.write(refusal)
                transport.close()
                return
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self._header_timer is not None:
                self._header_timer.cancel()  # this request's headers are in
                self._header_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_header_timer()  # the next request on this connection gets its own

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            limiter.release(self.transport)
            super().connection_lost(exc)

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            payload = json.dumps(
                {
                    "error": "malformed HTTP request (request line, a header or "
                    "Content-Length); send HTTP/1.1 with a whole-number Content-Length",
                    "field": None,
                }
            ).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            try:
                for event in (
                    h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                    h11.Data(data=payload),
                    h11.EndOfMessage(),
                ):
                    self.transport.write(self.conn.send(event))
            except h11.LocalProtocolError:  # a response had already begun: just close
                pass
            self.transport.close()

    return DlcH11Protocol


def openapi_document() -> dict:
    """The OpenAPI 3 description of this API (generated from the wire models)."""
    return build_app(SimpleNamespace(core=None, web=None)).openapi()
