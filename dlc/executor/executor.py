"""The pymesos Executor adapter: the only place with pymesos's camelCase callbacks.

Each callback hands the work to :class:`~dlc.executor.task_runner.TaskRunner` and returns; every
callback body is guarded, because an exception escaping a pymesos callback aborts the driver.

Environment read by :func:`run_executor` (set by the Mesos agent):

* ``MESOS_AGENT_ENDPOINT``, ``MESOS_FRAMEWORK_ID``, ``MESOS_EXECUTOR_ID`` (required);
* ``MESOS_SLAVE_PID`` (its id part names the agent's executor API path, ``/<id>/api/v1/executor``);
* ``MESOS_EXECUTOR_AUTHENTICATION_TOKEN``: set by an agent with ``--authenticate_http_executors``
  (and by DLC's emulator); the driver sends it with every executor call
  (:mod:`dlc.mesos.executor_endpoint`) and removes it from the environment first;
* ``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD`` (e.g. ``5secs``): the default container stop grace;
* ``MESOS_DIRECTORY`` / ``MESOS_SANDBOX``: the sandbox receiving container ``stdout``/``stderr``;
* ``MESOS_LOCAL``: stops pymesos from killing its own process group on SHUTDOWN (tests);
* ``MESOS_CHECKPOINT`` (``1``: the framework checkpoints, so the executor waits for a restarting
  agent) and then ``MESOS_RECOVERY_TIMEOUT`` (default 15mins): how long it waits before it kills
  its containers and exits. Without checkpointing it ends as soon as the connection ends.

The process ends once its last task is terminal and the agent acknowledged the terminal update
(:mod:`dlc.executor.lifecycle`), so the agent gets the executor's resources back.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from dlc.errors import DlcError
from dlc.executor.lifecycle import ExecutorLifecycle, Verdict
from dlc.executor.task_runner import CONTAINER_ID_LABEL, TaskRunner, encode_labels, status_data

log = logging.getLogger(__name__)

#: grace period when neither the flag nor MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD gives one
DEFAULT_GRACE_S = 10.0
#: time kept back from the agent's shutdown grace period for removing containers
_SHUTDOWN_MARGIN_S = 1.0
#: how long a checkpointing executor waits for its agent to come back (Mesos's default)
DEFAULT_RECOVERY_TIMEOUT_S = 15 * 60.0


class DriverSink:
    """A :class:`~dlc.executor.task_runner.StatusSink` that sends through the pymesos driver.

    Args:
        lifecycle: told of every update before it is sent (terminal ones are awaited).
    """

    def __init__(self, lifecycle: ExecutorLifecycle | None = None):
        self.driver: Any = None  # the pymesos driver (untyped), from registered()
        self.lifecycle = lifecycle

    def update(self, task_id, state, message=None, reason=None, labels=None) -> None:
        """Send one TaskStatus; a failure to send is logged (the driver re-sends it on
        re-subscribing)."""
        raw_uuid = uuid.uuid4().bytes
        status = {
            "task_id": {"value": task_id},
            "state": state,
            "uuid": base64.b64encode(raw_uuid).decode(),
        }
        if message:
            status["message"] = message
        if reason:
            status["reason"] = reason
        if labels:
            status["labels"] = encode_labels(labels)
            status["data"] = status_data(labels)
        log.info("task %s: %s %s", task_id, state, message or "")
        if self.lifecycle is not None:
            self.lifecycle.update_sent(task_id, state, raw_uuid)
        try:
            self.driver.sendStatusUpdate(status)
        except Exception:
            log.exception("could not send %s for task %s", state, task_id)

    def message(self, data: str) -> None:
        """Send a framework message (base64 ``data``): best effort, never queued, so a
        usage report lost while the scheduler is away is simply replaced by the next one."""
        try:
            self.driver.sendFrameworkMessage(data)
        except Exception as exc:  # not connected yet, or the agent is restarting
            log.debug("framework message not sent: %s", exc)


def grace_from_env(env: Mapping[str, str] | None = None, default: float = DEFAULT_GRACE_S) -> float:
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


def kill_grace_s(task: dict) -> float | None:
    """The grace of a TaskInfo's ``kill_policy`` in seconds, or ``None`` when it has none
    (or a malformed one: the executor's ``--grace`` applies then)."""
    try:
        nanos = task["kill_policy"]["grace_period"]["nanoseconds"]
        seconds = int(nanos) / 1e9
    except (KeyError, TypeError, ValueError):
        return None
    return seconds if 0 <= seconds <= 24 * 3600 else None


def recovery_timeout_from_env(env: Mapping[str, str] | None = None) -> float | None:
    """How long the executor waits for an unreachable agent before giving up.

    Returns:
        ``MESOS_RECOVERY_TIMEOUT`` (or 15 minutes) when ``MESOS_CHECKPOINT=1``, else ``None``:
        a non-checkpointing framework's executor ends as soon as its connection ends.

    Raises:
        DlcError: the variable is not a Mesos duration.
    """
    env = os.environ if env is None else env
    if env.get("MESOS_CHECKPOINT", "").strip() != "1":
        return None
    text = env.get("MESOS_RECOVERY_TIMEOUT")
    if not text:
        return DEFAULT_RECOVERY_TIMEOUT_S
    return parse_mesos_duration(text, "MESOS_RECOVERY_TIMEOUT")


def parse_mesos_duration(
    text: str, variable: str = "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"
) -> float:
    """Seconds in a Mesos duration string (``5secs``, ``500ms``, ``1mins``).

    Raises:
        DlcError: not a number followed by one of Mesos's units (names ``variable``).
    """
    text = text.strip()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            try:
                return float(text[: -len(unit)]) * _UNITS[unit]
            except ValueError:
                break
    raise DlcError(f"{variable}: {text!r} is not a Mesos duration (e.g. 5secs)")


def make_executor_class():
    """The pymesos ``Executor`` subclass (built lazily so that importing this module is cheap)."""
    from dlc.mesos import import_pymesos

    pymesos = import_pymesos()

    class DlcExecutor(pymesos.Executor):
        """pymesos callbacks -> :class:`TaskRunner`."""

        def __init__(
            self, runner: TaskRunner, sink: DriverSink, lifecycle: ExecutorLifecycle | None = None
        ):
            self.runner = runner
            self.sink = sink
            self.lifecycle = lifecycle or sink.lifecycle or ExecutorLifecycle()
            self._shutdown_done = threading.Event()

        def registered(self, driver, executorInfo, frameworkInfo, agentInfo):  # noqa: N802, N803
            self.sink.driver = driver
            self.lifecycle.connected()
            self._guard("registered", self._sweep)

        def reregistered(self, driver, agentInfo):  # noqa: N802, N803
            self.sink.driver = driver
            self.lifecycle.connected()

        def connection_lost(self):
            """The agent connection ended (pymesos retries it when checkpointing)."""
            self.lifecycle.disconnected()

        def acknowledged(self, task_id, raw_uuid):
            """The agent acknowledged one of this executor's updates."""
            self.lifecycle.acknowledged(raw_uuid)

        def launchTask(self, driver, task):  # noqa: N802
            self.sink.driver = driver
            self.lifecycle.task_launched(task["task_id"]["value"])
            self._guard(
                "launchTask", self.runner.launch, task["task_id"]["value"], task.get("data", ""),
                kill_grace_s(task),
            )  # fmt: skip

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


def serve(driver, executor, poll_s: float = 1.0) -> Verdict | None:
    """Run the driver until the executor should end, then stop it; returns why it ended.

    Ends when the lifecycle says so (last task done and acknowledged, an ack timed out, or the
    agent was gone past the recovery timeout: then every container is stopped and removed
    first), or when the driver stops by itself (SHUTDOWN from the agent; returns None).

    A driver that aborts on its own (pymesos raises in its I/O thread and interrupts the main
    thread) means the agent refused this executor, typically a restarted agent that did not
    recover it (``400 Executor cannot be found``) or no longer knows its framework. Nobody will
    ever shut this executor down then, and its tasks are already reported lost: its containers
    are stopped (SIGTERM, grace, SIGKILL) and removed at once, so that the GPUs they hold are
    free before the scheduler's retry arrives, rather than after the recovery timeout.
    """
    lifecycle = executor.lifecycle
    restore = _catch_driver_abort(lifecycle)
    driver.start()
    verdict = None
    try:
        while not driver.aborted:
            verdict = lifecycle.verdict()
            if verdict is not None:
                break
            lifecycle.changed.wait(poll_s)
            lifecycle.changed.clear()
    finally:
        restore()
        if verdict is Verdict.AGENT_GONE:
            log.warning("agent unreachable past the recovery timeout: removing containers")
            executor.shutdown(driver)
        elif verdict is None:
            log.warning("the driver stopped without a shutdown: removing containers")
            executor.shutdown(driver)  # idempotent: a SHUTDOWN from the agent did it already
        if verdict is not None:
            log.info("executor ends: %s", verdict.value)
            driver.stop_quietly()
        driver.join()
    from dlc.executor import reaper

    reaper.mark_done()  # every container is gone: the reaper need not look again
    return verdict


def _catch_driver_abort(lifecycle: ExecutorLifecycle):
    """pymesos reports an I/O thread failure with ``interrupt_main()`` (a SIGINT): take it
    as a wake-up of the main loop, which then sees ``driver.aborted``, instead of a
    KeyboardInterrupt that could cut the removal of the containers short. Returns the
    function that puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_interrupt(signum, frame):
        log.warning("the executor driver aborted (did the agent refuse this executor?)")
        lifecycle.changed.set()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    return lambda: signal.signal(signal.SIGINT, previous)


__all__ = [
    "CONTAINER_ID_LABEL",
    "DriverSink",
    "grace_from_env",
    "kill_grace_s",
    "make_driver",
    "make_executor_class",
    "parse_mesos_duration",
    "recovery_timeout_from_env",
    "serve",
]
