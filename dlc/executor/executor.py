"""The pymesos Executor adapter: the only place with pymesos's camelCase callbacks.

Each callback hands the work to :class:`~dlc.executor.task_runner.TaskRunner` and returns; every
callback body is guarded, because an exception escaping a pymesos callback aborts the driver.

Environment read by :func:`run_executor` (set by the Mesos agent):

* ``MESOS_AGENT_ENDPOINT``, ``MESOS_FRAMEWORK_ID``, ``MESOS_EXECUTOR_ID`` (required);
* ``MESOS_SLAVE_PID`` (its id part names the agent's executor API path, ``/<id>/api/v1/executor``);
* ``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`` (e.g. ``5secs``): the default container stop grace;
* ``MESOS_DIRECTORY`` / ``MESOS_SANDBOX``: the sandbox receiving container ``stdout``/``stderr``;
* ``MESOS_LOCAL``: stops pymesos from killing its own process group on SHUTDOWN (tests).
"""

from __future__ import annotations

import logging
import os
import threading

from dlc.errors import DlcError
from dlc.executor.task_runner import CONTAINER_ID_LABEL, TaskRunner, encode_labels, status_data

log = logging.getLogger(__name__)

#: grace period when neither the flag nor MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD gives one
DEFAULT_GRACE_S = 10.0
#: time kept back from the agent's shutdown grace period for removing containers
_SHUTDOWN_MARGIN_S = 1.0


class DriverSink:
    """A :class:`~dlc.executor.task_runner.StatusSink` that sends through the pymesos driver."""

    def __init__(self):
        self.driver = None

    def update(self, task_id, state, message=None, reason=None, labels=None) -> None:
        """Send one TaskStatus; a failure to send is logged (the agent retries nothing)."""
        status = {"task_id": {"value": task_id}, "state": state}
        if message:
            status["message"] = message
        if reason:
            status["reason"] = reason
        if labels:
            status["labels"] = encode_labels(labels)
            status["data"] = status_data(labels)
        log.info("task %s: %s %s", task_id, state, message or "")
        try:
            self.driver.sendStatusUpdate(status)
        except Exception:
            log.exception("could not send %s for task %s", state, task_id)


def grace_from_env(env: dict | None = None, default: float = DEFAULT_GRACE_S) -> float:
    """Container stop grace from ``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`` (minus a margin).

    Raises:
        DlcError: the variable is not a Mesos duration.
    """
    env = os.environ if env is None else env
    text = env.get("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD")
    if not text:
        return default
    seconds = parse_mesos_duration(text)
    return max(0.0, seconds - _SHUTDOWN_MARGIN_S)


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
    "secs": 1.0,
    "mins": 60.0,
    "hrs": 3600.0,
    "days": 86400.0,
    "weeks": 604800.0,
}


def parse_mesos_duration(text: str) -> float:
    """Seconds in a Mesos duration string (``5secs``, ``500ms``, ``1mins``).

    Raises:
        DlcError: not a number followed by one of Mesos's units.
    """
    text = text.strip()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * _UNITS[unit]
            except ValueError:
                break
    raise DlcError(
        f"MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD: {text!r} is not a Mesos duration (e.g. 5secs)"
    )


def make_executor_class():
    """The pymesos ``Executor`` subclass (built lazily so that importing this module is cheap)."""
    from dlc.mesos import import_pymesos

    pymesos = import_pymesos()

    class DlcExecutor(pymesos.Executor):
        """pymesos callbacks -> :class:`TaskRunner`."""

        def __init__(self, runner: TaskRunner, sink: DriverSink):
            self.runner = runner
            self.sink = sink
            self._shutdown_done = threading.Event()

        def registered(self, driver, executorInfo, frameworkInfo, agentInfo):  # noqa: N802, N803
            self.sink.driver = driver
            self._guard("registered", self._sweep)

        def reregistered(self, driver, agentInfo):  # noqa: N802, N803
            self.sink.driver = driver

        def launchTask(self, driver, task):  # noqa: N802
            self.sink.driver = driver
            self._guard(
                "launchTask", self.runner.launch, task["task_id"]["value"], task.get("data", "")
            )

        def killTask(self, driver, taskId):  # noqa: N802, N803
            self._guard("killTask", self.runner.kill, taskId["value"])

        def shutdown(self, driver):
            # pymesos calls this twice (the SHUTDOWN event, then the stream closing).
            if self._shutdown_done.is_set():
                return
            self._shutdown_done.set()
            self._guard("shutdown", self.runner.shutdown)

        def error(self, driver, message):
            log.error("agent reported an error: %s", message)

        def _sweep(self):
            removed = self.runner.remove_orphans()
            if removed:
                log.info("removed %d orphan container(s) of this executor", len(removed))

        @staticmethod
        def _guard(name, func, *args):
            try:
                func(*args)
            except Exception:
                log.exception("executor callback %s failed", name)

    return DlcExecutor


def make_driver(executor):
    """A pymesos executor driver pointed at the agent's real executor API path."""
    from dlc.mesos.executor_endpoint import make_executor_driver

    return make_executor_driver(executor)


__all__ = [
    "CONTAINER_ID_LABEL",
    "DriverSink",
    "grace_from_env",
    "make_driver",
    "make_executor_class",
    "parse_mesos_duration",
]
