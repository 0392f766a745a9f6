"""Points pymesos's executor driver at the agent's real v1 executor API path.

pymesos 0.3.15 hard-codes ``POST /api/v1/executor``. That path only reaches the agent when the
agent is its process's libprocess delegate; in ``mesos-local`` (one process holding master and
agent) the delegate is the master, so the executor API lives at ``/slave(1)/api/v1/executor``.
The agent always answers on ``/<id>/api/v1/executor`` where ``<id>`` is the part of
``MESOS_SLAVE_PID`` (``slave(1)@127.0.0.1:5051``) before the ``@``, so DLC always uses that path
when the agent provides ``MESOS_SLAVE_PID``. DLC's emulator serves both paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from dlc.errors import DlcError

DEFAULT_EXECUTOR_API_PATH = "/api/v1/executor"
_PID_ID = re.compile(r"^[A-Za-z0-9_.()-]+$")


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


def make_executor_driver(
    executor: Any,
    *,
    api_path: str | None = None,
    use_addict: bool = False,
    **kwargs: Any,
) -> Any:
    """Creates a pymesos ``MesosExecutorDriver`` that talks to ``api_path``.

    The returned driver is a subclass of ``pymesos.MesosExecutorDriver`` that sends its
    SUBSCRIBE and every later call (UPDATE, MESSAGE) to the agent's real path, and that does not
    share header dicts between calls (pymesos's ``_send`` has a mutable default argument).

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
    return cls(executor, api_path=path, use_addict=use_addict, **kwargs)


_DRIVER_CLASS: type | None = None


def _driver_class() -> type:
    """Builds the driver subclass on first use, so importing this module imports no pymesos."""
    global _DRIVER_CLASS
    if _DRIVER_CLASS is not None:
        return _DRIVER_CLASS
    from dlc.mesos import import_pymesos

    pymesos = import_pymesos()

    class AgentPathExecutorDriver(pymesos.MesosExecutorDriver):
        """``MesosExecutorDriver`` using a configurable executor API path."""

        def __init__(self, executor: Any, api_path: str, **kwargs: Any) -> None:
            super().__init__(executor, **kwargs)
            self.api_path = api_path

        def gen_request(self) -> bytes:
            request = super().gen_request()
            old = f"POST {DEFAULT_EXECUTOR_API_PATH} ".encode()
            return request.replace(old, f"POST {self.api_path} ".encode(), 1)

        def _send(
            self,
            body: Any,
            path: str | None = None,
            method: str = "POST",
            headers: dict[str, str] | None = None,
        ) -> Any:
            return super()._send(
                body, path=path or self.api_path, method=method, headers=headers or {}
            )

    _DRIVER_CLASS = AgentPathExecutorDriver
    return _DRIVER_CLASS
