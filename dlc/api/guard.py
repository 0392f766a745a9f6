"""The API's outer guard: a pure ASGI middleware that runs before any route.

In order, for every HTTP request:

1. bounded concurrency: past ``max_in_flight`` requests a 503 with ``Retry-After``;
2. ``Content-Length`` checked (a whole number, at most the body limit) from the headers;
3. authentication of ``/v1`` from the headers (bearer token or the dashboard's
   HttpOnly cookie), *before* a single body byte is received: a stranger cannot
   make the scheduler buffer anything;
4. the body read with a byte cap (chunked bodies too), its JSON nesting depth
   bounded, then replayed to the app;
5. anything a route raises by mistake becomes a logged 500 without a traceback.

Every refusal is JSON ``{"error": "<one line>", "field": ...}``; refusals made
before the body was read close the connection, so an unread body is never drained.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any

import anyio

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
#: token -> (user, admin), or None for an unknown token (runs in a worker thread)
#: token -> ``(user, is_admin, max_priority)`` or ``None`` (unknown, expired, revoked)
Authenticate = Callable[[str], "tuple[str, bool, int | None] | None"]

#: the dashboard's session cookie (HttpOnly, SameSite=Strict; holds the API token)
SESSION_COOKIE = "dlc_session"
#: header the dashboard sends with cookie-authenticated writes (a cross-site form cannot)
CSRF_HEADER = b"x-requested-with"
#: ``/v1`` routes anyone may call (the sign-in exchanges a token for the cookie)
PUBLIC_V1 = {("GET", "/v1/session"), ("POST", "/v1/session"), ("DELETE", "/v1/session")}
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@dataclass(frozen=True)
class Limits:
    """What one request may cost.

    Attributes:
        max_body: bytes of an authenticated request body.
        max_public_body: bytes of a body without a token (the sign-in form).
        max_depth: JSON nesting levels.
        max_in_flight: requests handled at once; more get 503 + Retry-After.
        max_in_flight_per_user: requests one user may have in flight; more get 429, so
            one token holding slow bodies open cannot take every slot (red-team finding).
        body_timeout_s: seconds a client has to send the whole body (408 after).
    """

    max_body: int = 1 << 20
    max_public_body: int = 4096
    max_depth: int = 32
    max_in_flight: int = 1024
    max_in_flight_per_user: int = 64
    body_timeout_s: float = 30.0


class Refusal(Exception):
    """A request refused with a status and a one-line message."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.field = status, field


class ApiGuard:
    """Wraps the ASGI ``app`` (see the module docstring).

    Args:
        app: the ASGI application.
        authenticate: token lookup (blocking; run in a worker thread).
        limits: the bounds.
    """

    def __init__(self, app: Any, authenticate: Authenticate, limits: Limits = Limits()):
        self.app, self.authenticate, self.limits = app, authenticate, limits
        self.in_flight = 0
        self.per_user: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limits.max_in_flight:
            busy = "too many requests in flight; retry in a second"
            await respond(send, 503, busy, close=True, extra=[(b"retry-after", b"1")])
            return
        self.in_flight += 1
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._guarded(scope, receive, tracking_send)
        except Refusal as exc:
            if not started:
                await respond(send, exc.status, str(exc), exc.field, close=True)
        except Exception:  # a bug: log it for the operator, answer without a traceback
            log.exception("API request %s %s failed", scope["method"], scope["path"])
            if not started:
                await respond(send, 500, "internal error; see the scheduler log", close=True)
        finally:
            self.in_flight -= 1

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        headers = scope["headers"]
        declared = content_length(headers)
        public = not path.startswith("/v1/") or (method, path) in PUBLIC_V1
        cap = self.limits.max_public_body if public else self.limits.max_body
        if not public:  # a stranger learns nothing, not even the body limit
            scope["dlc.auth"] = await self._auth(method, headers)
            user = scope["dlc.auth"][0]
            if self.per_user.get(user, 0) >= self.limits.max_in_flight_per_user:
                raise Refusal(429, f"{user} has too many requests in flight; retry in a second")
            self.per_user[user] = self.per_user.get(user, 0) + 1
            try:
                await self._bounded(scope, receive, send, declared, cap, method, headers)
            finally:
                self.per_user[user] -= 1
                if not self.per_user[user]:
                    del self.per_user[user]
            return
        await self._bounded(scope, receive, send, declared, cap, method, headers)

    async def _bounded(self, scope, receive, send, declared, cap, method, headers) -> None:
        if declared is not None and declared > cap:
            too_big = f"request body too large: {declared} bytes, at most {cap}"
            raise Refusal(413, too_big, "Content-Length")
        if method in _BODY_METHODS:
            body = await read_body(receive, cap, self.limits.body_timeout_s)
            check_depth(body, self.limits.max_depth)
            # what the client declared, for routes that must tell a form from a script
            scope["dlc.content_type"] = (_header(headers, b"content-type") or b"").decode("latin-1")
            scope["headers"] = _as_json(headers)
            scope["dlc.body"] = body  # for a route's error handler (lenient re-parse)
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    async def _auth(self, method: str, headers: list) -> tuple[str, bool, int | None]:
        token, via_cookie = request_token(headers)
        found = await anyio.to_thread.run_sync(self.authenticate, token) if token else None
        if found is None:
            raise Refusal(401, "missing or unknown API token: pass --token or set DLC_TOKEN")
        if via_cookie and method != "GET" and _header(headers, CSRF_HEADER) is None:
            csrf = "a signed-in browser must send X-Requested-With on writes"
            raise Refusal(403, csrf, "X-Requested-With")
        return found


def content_length(headers: list) -> int | None:
    """The declared body size, or ``None`` when there is none.

    Raises:
        Refusal: a negative, non-numeric or repeated-and-different ``Content-Length``.
    """
    values = {v.strip() for k, v in headers if k == b"content-length"}
    if not values:
        return None
    if len(values) > 1 or not all(v.isdigit() for v in values):
        shown = b", ".join(sorted(values)).decode("latin-1")[:40]
        bad = f"Content-Length must be one whole number of bytes, not {shown!r}"
        raise Refusal(400, bad, "Content-Length")
    return int(values.pop())


def request_token(headers: list) -> tuple[str | None, bool]:
    """``(token, came from the session cookie)`` from the bearer header or the cookie."""
    auth = (_header(headers, b"authorization") or b"").decode("latin-1")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None, False
    raw = _header(headers, b"cookie")
    if raw:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw.decode("latin-1"))
        except CookieError:
            return None, False
        if SESSION_COOKIE in jar:
            return jar[SESSION_COOKIE].value or None, True
    return None, False


async def read_body(receive: Receive, cap: int, timeout_s: float) -> bytes:
    """The whole request body, refusing it (413) as soon as it passes ``cap`` bytes and
    (408) when it takes longer than ``timeout_s``."""
    with anyio.move_on_after(timeout_s):
        return await _read_capped(receive, cap)
    raise Refusal(408, f"request body not received within {timeout_s:g} s", "body")


async def _read_capped(receive: Receive, cap: int) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refusal(400, "the client went away before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise Refusal(413, f"request body too large: more than {cap} bytes", "body")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def check_depth(body: bytes, max_depth: int) -> None:
    """Refuse JSON nested deeper than ``max_depth`` (before any parser recurses into it)."""
    depth = 0
    for match in _JSON_TOKENS.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                deep = f"request body: JSON nested deeper than {max_depth} levels"
                raise Refusal(400, deep + "; send a flatter document", "body")
        elif token in (b"]", b"}"):
            depth -= 1


async def respond(
    send: Send,
    status: int,
    message: str,
    field: str | None = None,
    close: bool = False,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send a JSON error response."""
    payload = json.dumps({"error": message, "field": field}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *(extra or []),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _header(headers: list, name: bytes) -> bytes | None:
    return next((v for k, v in headers if k == name), None)


def _as_json(headers: list) -> list:
    # The API speaks JSON only: a body is parsed as JSON whatever Content-Type it came with.
    kept = [(k, v) for k, v in headers if k not in (b"content-type", b"transfer-encoding")]
    return [*kept, (b"content-type", b"application/json")]


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
