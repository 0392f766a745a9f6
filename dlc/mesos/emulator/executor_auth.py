"""Executor authentication of the emulated agents, the way a Mesos agent does it.

A Mesos agent started with ``--authenticate_http_executors`` and ``--jwt_secret_key`` hands each
executor it launches a JWT (HS256; claims ``fid``, ``eid``, ``cid``: framework, executor and
container id) in ``MESOS_EXECUTOR_AUTHENTICATION_TOKEN``, refuses executor API calls without a
valid ``Authorization: Bearer <token>`` (``401``), and refuses calls whose framework or executor
the token does not name (``403`` here; see :func:`check_call`). The emulator does the same with a
key drawn when it starts, so that a process that merely reaches the port (any container on
the host, a host-network gang) can no longer send ``UPDATE`` calls for other executors' tasks
(red-team finding 2026-11-26: forged status updates).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlc.mesos.emulator.master import CallError

#: the environment variable a Mesos agent puts the executor's token in
TOKEN_VARIABLE = "MESOS_EXECUTOR_AUTHENTICATION_TOKEN"
_HEADER = {"alg": "HS256", "typ": "JWT"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ExecutorPrincipal:
    """Who a valid token names: one executor of one framework, in one container."""

    framework_id: str
    executor_id: str
    container_id: str


class ExecutorTokens:
    """Issues and checks executor tokens signed with one secret key.

    Args:
        key: the HMAC-SHA256 key (default: 32 random bytes, so tokens die with the emulator).
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else os.urandom(32)

    def issue(self, framework_id: str, executor_id: str, container_id: str) -> str:
        """A token for one executor run (``header.claims.signature``, base64url)."""
        claims = {"fid": framework_id, "eid": executor_id, "cid": container_id}
        signed = f"{_b64(json.dumps(_HEADER).encode())}.{_b64(json.dumps(claims).encode())}"
        return f"{signed}.{_b64(self._sign(signed))}"

    def principal(self, authorization: str | None) -> ExecutorPrincipal:
        """The executor an ``Authorization`` header value proves to be.

        Raises:
            CallError: ``401``: no ``Bearer`` token, or not one this emulator signed.
        """
        scheme, _, token = (authorization or "").partition(" ")
        if scheme != "Bearer" or not token.strip():
            raise CallError("Unauthorized: executor calls need 'Authorization: Bearer'", 401)
        parts = token.strip().split(".")
        if len(parts) != 3:
            raise CallError("Unauthorized: malformed executor token", 401)
        signed = f"{parts[0]}.{parts[1]}"
        try:
            signature = _unb64(parts[2])
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, TypeError):
            raise CallError("Unauthorized: malformed executor token", 401) from None
        if header != _HEADER or not hmac.compare_digest(signature, self._sign(signed)):
            raise CallError("Unauthorized: executor token signature is invalid", 401)
        if not isinstance(claims, dict):
            raise CallError("Unauthorized: malformed executor token", 401)
        return ExecutorPrincipal(
            str(claims.get("fid", "")), str(claims.get("eid", "")), str(claims.get("cid", ""))
        )

    def _sign(self, signed: str) -> bytes:
        return hmac.new(self._key, signed.encode(), hashlib.sha256).digest()


def check_call(principal: ExecutorPrincipal, call: Mapping[str, Any]) -> None:
    """Refuses a call for another framework or executor than the token names.

    Raises:
        CallError: ``403`` naming what does not match.
    """
    framework_id = (call.get("framework_id") or {}).get("value")
    executor_id = (call.get("executor_id") or {}).get("value")
    if framework_id != principal.framework_id or executor_id != principal.executor_id:
        raise CallError(
            f"Forbidden: the token of executor '{principal.executor_id}' does not cover "
            f"executor '{executor_id}' of framework '{framework_id}'",
            403,
        )


def basic_authorization(principal: str, secret: str) -> str:
    """The HTTP Basic ``Authorization`` value a framework with this credential sends."""
    return "Basic " + base64.b64encode(f"{principal}:{secret}".encode()).decode()


def check_framework(expected: str | None, authorization: str | None) -> None:
    """Refuses a scheduler API call without the framework credential (when one is set).

    Raises:
        CallError: ``401``.
    """
    if expected is not None and not hmac.compare_digest(
        (authorization or "").encode(), expected.encode()
    ):
        raise CallError("Unauthorized: scheduler calls need the framework's credential", 401)
