"""HA: every instance answers; only the leader acts (``dlc scheduler --zk``, docs/ha.md).

:class:`LeaderRedirect` wraps the API app. ``GET /v1/health`` is answered on every
instance and says which instance leads. On a standby, every other ``/v1/...`` request and
``/metrics`` is redirected with ``307`` (method and body kept) to the same path on the
leader's API URL, published in ZooKeeper; with no leader elected yet it answers ``503``
with a one-line reason. The dashboard page itself is served everywhere (it shows the role).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: ``() -> {"leading": bool, "leader_url": str | None, "instance": str, ...}``
RoleOf = Callable[[], dict[str, Any]]


class LeaderRedirect:
    """ASGI middleware: health everywhere, everything else of the API on the leader."""

    def __init__(self, app, role: RoleOf):
        self.app = app
        self.role = role

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == "/v1/health":
            await _json(send, 200, {"ok": True, **self.role()})
            return
        if not (path.startswith("/v1/") or path == "/metrics"):
            await self.app(scope, receive, send)
            return
        role = self.role()
        if role.get("leading"):
            await self.app(scope, receive, send)
            return
        leader = role.get("leader_url")
        if not leader:
            await _json(
                send,
                503,
                {"detail": "no DLC scheduler leads yet (election under way); retry shortly"},
                [(b"retry-after", b"2")],
            )
            return
        query = scope.get("query_string", b"").decode("latin-1")
        location = leader.rstrip("/") + path + (f"?{query}" if query else "")
        await _json(
            send,
            307,
            {"detail": f"this instance stands by; the leader is {leader}"},
            [(b"location", location.encode("latin-1"))],
        )


async def _json(send, status: int, body: dict, headers=()) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
