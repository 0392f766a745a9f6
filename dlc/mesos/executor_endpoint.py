"""Points pymesos's executor driver at the agent's real v1 executor API path.

pymesos 0.3.15 hard-codes ``POST /api/v1/executor``. That path only reaches the agent when the
agent is its process's libprocess delegate; in ``mesos-local`` (one process holding master and
agent) the delegate is the master, so the executor API lives at ``/slave(1)/api/v1/executor``.
The agent always answers on ``/<id>/api/v1/executor`` where ``<id>`` is the part of
``MESOS_SLAVE_PID`` (``slave(1)@127.0.0.1:5051``) before the ``@``, so DLC always uses that path
when the agent provides ``MESOS_SLAVE_PID``. DLC's emulator serves both paths.

The subclass also fixes what pymesos 0.3.15 gets wrong for an executor that must end:

* ``MESOS_CHECKPOINT`` is ``"0"`` or ``"1"`` (the agent always sets it); pymesos tests the
  string's truth, so a non-checkpointing executor never noticed its agent was gone and retried
  it for a day. Here only ``"1"`` means checkpointing.
* pymesos never records sent updates, so a re-SUBSCRIBE carries no unacknowledged updates and
  an update sent while the agent was away was lost. Here every update is kept until the agent
  acknowledges it and is re-sent with the next SUBSCRIBE.
* pymesos raises when an UPDATE call cannot be delivered (a connection reset: 128 executors
  starting at once on a loaded machine saw it) and the update was then never sent again while
  the subscription stayed up: the task stayed ``TASK_STAGING`` for good. Here such an update
  (and every later one, to keep their order) is queued and tried again with a backoff
  (:data:`RESEND_FIRST_S` .. :data:`RESEND_MAX_S`) until delivered; an agent that acknowledges
  it twice (the re-SUBSCRIBE carried it too) is harmless, updates are told apart by uuid.
* the executor hears of acknowledgements and of the connection ending (``acknowledged`` and
  ``connection_lost`` hooks, called when the executor object has them).
* :meth:`stop_quietly` ends the driver without pymesos's ``on_close`` shutdown path (which
  would SIGKILL the executor's process group).
* pymesos backs off 2, 4, 8, 15 s between connection attempts. A restarted agent waits only
  ``executor_reregistration_timeout`` (Mesos default 2 s) for its executors to re-subscribe
  and then destroys them, so an executor that sleeps 4 s misses its agent's recovery and its
  tasks end ``TASK_LOST``. The agent is on the same host: retry every
  :data:`RECONNECT_S` instead.
* pymesos aborts on any answer to SUBSCRIBE but 200, 307 and 503. A restarting agent's port
  answers ``404`` until the agent's HTTP routes are installed (in ``mesos-local`` the master
  comes up first), which is not a refusal: it is retried like a refused connection. A ``400``
  (``Executor cannot be found``: the agent did not recover this executor) still aborts the
  driver, and the executor then removes its containers at once
  (:func:`dlc.executor.executor.serve`).
* pymesos never authenticates. An agent started with ``--authenticate_http_executors`` (and DLC's
  emulator, by default) gives the executor a token in ``MESOS_EXECUTOR_AUTHENTICATION_TOKEN`` and
  answers ``401`` to any executor call without it; here SUBSCRIBE, UPDATE and MESSAGE carry it
  as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from dlc.errors import DlcError

log = logging.getLogger(__name__)

DEFAULT_EXECUTOR_API_PATH = "/api/v1/executor"
#: seconds between attempts to reach the (local) agent; well inside its 2 s re-registration window
RECONNECT_S = 0.5
#: an update whose UPDATE call could not be delivered is tried again after these many seconds,
#: doubling up to RESEND_MAX_S, for RESEND_FOR_S at most (then it waits for the next SUBSCRIBE)
RESEND_FIRST_S = 0.2
RESEND_MAX_S = 5.0
RESEND_FOR_S = 600.0
#: what a failed UPDATE call may raise: a connection error, pymesos's RuntimeError("Not
#: connected yet") before its first connection, or its RuntimeError for a non-2xx answer
_SEND_ERRORS = (OSError, http.client.HTTPException, RuntimeError)


def _undelivered(exc: BaseException) -> bool:
    """Whether a failed UPDATE never reached the agent (worth sending again), as opposed to
    an answer refusing it (pymesos's RuntimeError naming the code)."""
    return not isinstance(exc, RuntimeError) or "Not connected" in str(exc)


_PID_ID = re.compile(r"^[A-Za-z0-9_.()-]+$")
#: where a Mesos agent (or DLC's emulator) hands the executor its token
TOKEN_VARIABLE = "MESOS_EXECUTOR_AUTHENTICATION_TOKEN"
#: a JWT: base64url parts and dots, nothing that could end or add an HTTP header
_TOKEN = re.compile(r"^[A-Za-z0-9_.=-]+$")


def executor_api_path(environ: Mapping[str, str] | None = None) -> str:
    """Returns the agent's executor API path for this executor's environment.

    Args:
        environ: the executor's environment (default ``os.environ``).

    Returns:
        ``/<id>/api/v1/executor`` from ``MESOS_SLAVE_PID``, or ``/api/v1/executor`` when the
        variable is absent.

    Raises:
        DlcError: ``MESOS_SLAVE_PID`` is set but is not ``ID@HOST:PORT``.
    """
    env = os.environ if environ is None else environ
    pid = env.get("MESOS_SLAVE_PID", "").strip()
    if not pid:
        return DEFAULT_EXECUTOR_API_PATH
    process_id, at, _ = pid.partition("@")
    if not at or not _PID_ID.match(process_id):
        raise DlcError(
            f"MESOS_SLAVE_PID={pid!r} is not ID@HOST:PORT (e.g. slave(1)@127.0.0.1:5051); "
            "unset it to use /api/v1/executor"
        )
    return f"/{process_id}{DEFAULT_EXECUTOR_API_PATH}"


def executor_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The executor's authentication token, or ``None`` when the agent gave none.

    Raises:
        DlcError: the variable holds something that is not a token (it would break the
            request's headers).
    """
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_VARIABLE, "").strip()
    if not token:
        return None
    if not _TOKEN.match(token):
        raise DlcError(f"{TOKEN_VARIABLE} is not a JWT (base64url parts joined by dots)")
    return token


def make_executor_driver(
    executor: Any,
    *,
    api_path: str | None = None,
    use_addict: bool = False,
    **kwargs: Any,
) -> Any:
    """Creates a pymesos ``MesosExecutorDriver`` that talks to ``api_path``.

    The returned driver is a subclass of ``pymesos.MesosExecutorDriver`` that sends its
    SUBSCRIBE and every later call (UPDATE, MESSAGE) to the agent's real path, with the agent's
    executor token (:func:`executor_token`, then removed from ``os.environ``) as a ``Bearer``
    header, and that does not share header dicts between calls (pymesos's ``_send`` has a
    mutable default argument).

    Args:
        executor: a ``pymesos.Executor`` implementation.
        api_path: the executor API path; default :func:`executor_api_path` of ``os.environ``.
        use_addict: passed to pymesos (``True`` gives attribute-style dicts).
        **kwargs: other ``MesosExecutorDriver`` arguments (``timeout``, ``http_timeout``).

    Returns:
        The driver; call ``run()`` or ``start()`` on it as with pymesos.

    Raises:
        DlcError: the path cannot be derived (see :func:`executor_api_path`), or pymesos is
            missing.
    """
    path = api_path or executor_api_path()
    cls = _driver_class()
    token = executor_token()
    # the executor's children (tools it runs, containers) have no use for the token
    os.environ.pop(TOKEN_VARIABLE, None)
    return cls(executor, api_path=path, token=token, use_addict=use_addict, **kwargs)


_DRIVER_CLASS: type | None = None


def _driver_class() -> type:
    """Builds the driver subclass on first use, so importing this module imports no pymesos."""
    global _DRIVER_CLASS
    if _DRIVER_CLASS is not None:
        return _DRIVER_CLASS
    from dlc.mesos import import_pymesos

    pymesos: Any = import_pymesos()  # untyped: its classes are bases here

    class AgentStartingConnection(pymesos.process.Connection):
        """A SUBSCRIBE answered ``404`` (agent routes not up yet) is retried, not fatal."""

        def read(self) -> bool:
            try:
                return super().read()
            except (RuntimeError, TypeError):
                # TypeError: pymesos's own error path fails (bytes + str) when the error's
                # body came in a later packet than its headers
                code = self._answer_code()
                if code == 404:
                    log.info("agent not serving its executor API yet (404); retrying")
                    time.sleep(RECONNECT_S)
                    return False
                if code is not None and code >= 400:
                    raise RuntimeError(f"Failed with HTTP {code}") from None
                raise

        def _answer_code(self) -> int | None:
            parser = self._parser
            if self._stream_id is not None or parser is None:
                return None
            if not parser.is_headers_complete():
                return None
            return parser.get_status_code()

    # pymesos's I/O loop creates its connections by this module-level name; only executor
    # processes build this class, so the scheduler's driver is untouched.
    pymesos.process.Connection = AgentStartingConnection

    class AgentPathExecutorDriver(pymesos.MesosExecutorDriver):
        """``MesosExecutorDriver`` using a configurable executor API path."""

        _conn: Any  # pymesos's connection (None while not connected)

        def __init__(
            self, executor: Any, api_path: str, token: str | None = None, **kwargs: Any
        ) -> None:
            super().__init__(executor, **kwargs)
            self.api_path = api_path
            self._auth = {"Authorization": f"Bearer {token}"} if token else {}
            self.checkpoint = os.environ.get("MESOS_CHECKPOINT", "").strip() == "1"
            self._quiet_stop = False
            #: updates whose UPDATE call was not delivered, oldest first, and their sender
            self._unsent: list[dict[str, Any]] = []
            self._unsent_lock = threading.Lock()
            self._resender: threading.Thread | None = None

        def stop_quietly(self) -> None:
            """Stop the driver for an orderly executor exit (no shutdown callback, no kill)."""
            self._quiet_stop = True
            self.stop()

        def on_close(self) -> None:
            hook = getattr(self.executor, "connection_lost", None)
            if hook is not None:
                hook()
            if self._quiet_stop:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                return
            super().on_close()

        def _backoff(self, num_conn_retry: int) -> float:
            return RECONNECT_S

        def on_acknowledged(self, event: Any) -> None:
            super().on_acknowledged(event)
            raw = base64.b64decode(event["uuid"])
            self.updates.pop(raw, None)
            hook = getattr(self.executor, "acknowledged", None)
            if hook is not None:
                hook(event["task_id"]["value"], raw)

        def sendStatusUpdate(self, status: dict[str, Any]) -> None:  # noqa: N802 (pymesos)
            """Send an update and keep it until acknowledged (re-sent on re-SUBSCRIBE)."""
            status.setdefault("timestamp", time.time())
            status.setdefault("uuid", base64.b64encode(uuid.uuid4().bytes).decode())
            status.setdefault("source", "SOURCE_EXECUTOR")
            self.updates[base64.b64decode(status["uuid"])] = {"status": status}
            with self._unsent_lock:
                if self._unsent:  # earlier updates wait: this one goes after them
                    self._unsent.append(status)
                    return
                try:
                    super().sendStatusUpdate(status)
                    return
                except _SEND_ERRORS as exc:
                    if not _undelivered(exc):
                        raise  # the agent answered and refused: sending again will not help
                    log.warning("status update not delivered (%s); trying again", exc)
                    self._unsent.append(status)
                    if self._resender is None:
                        self._resender = threading.Thread(
                            target=self._resend, name="dlc-executor-resend", daemon=True
                        )
                        self._resender.start()

        def _resend(self) -> None:
            """Deliver the queued updates in order, backing off while the agent is away."""
            delay, deadline = RESEND_FIRST_S, time.monotonic() + RESEND_FOR_S
            while time.monotonic() < deadline and not self._quiet_stop:
                time.sleep(delay)
                with self._unsent_lock:
                    if self._send_unsent():
                        self._resender = None
                        return
                delay = min(delay * 2, RESEND_MAX_S)
            with self._unsent_lock:  # given up: they are re-sent with the next SUBSCRIBE
                self._unsent.clear()
                self._resender = None

        def _send_unsent(self) -> bool:
            """Sends queued updates, oldest first; whether none is left (under the lock)."""
            while self._unsent:
                status = self._unsent[0]
                if base64.b64decode(status["uuid"]) in self.updates:  # not acknowledged yet
                    try:
                        pymesos.MesosExecutorDriver.sendStatusUpdate(self, status)
                    except _SEND_ERRORS as exc:
                        if _undelivered(exc):
                            return False
                        log.warning("status update refused by the agent: %s", exc)
                self._unsent.pop(0)
            return True

        def gen_request(self) -> bytes:
            request = super().gen_request()
            old = f"POST {DEFAULT_EXECUTOR_API_PATH} HTTP/1.1\r\n".encode()
            new = f"POST {self.api_path} HTTP/1.1\r\n"
            for name, value in self._auth.items():
                new += f"{name}: {value}\r\n"
            return request.replace(old, new.encode(), 1)

        def _send(
            self,
            body: Any,
            path: str | None = None,
            method: str = "POST",
            headers: dict[str, str] | None = None,
        ) -> Any:
            return super()._send(
                body,
                path=path or self.api_path,
                method=method,
                headers={**(headers or {}), **self._auth},
            )

    _DRIVER_CLASS = AgentPathExecutorDriver
    return _DRIVER_CLASS
