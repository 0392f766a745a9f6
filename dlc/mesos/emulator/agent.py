"""The emulated agents' runtime: executor and command-task processes and the v1 executor API.

A custom executor (TaskInfo with ExecutorInfo) is started with its ``command`` through
``/bin/sh -c`` in a sandbox directory, with the environment a Mesos agent prepares
(``MESOS_AGENT_ENDPOINT``, ``MESOS_SLAVE_PID``, ``MESOS_FRAMEWORK_ID``, ``MESOS_EXECUTOR_ID``,
``MESOS_DIRECTORY``, ``MESOS_SANDBOX``, ...); it subscribes on ``/api/v1/executor`` or
``/slave(N)/api/v1/executor`` and gets its tasks as LAUNCH events. A plain command task is run
directly as a subprocess, reporting TASK_RUNNING and then TASK_FINISHED/TASK_FAILED with
``exit status N`` like the command-executor stand-in of ../shared/mesos-local. Every process
gets its own session so that a kill reaches the whole tree. When an executor process exits, its
unfinished tasks fail with ``REASON_EXECUTOR_TERMINATED`` from ``SOURCE_AGENT``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlc.mesos.emulator.executor_auth import TOKEN_VARIABLE, ExecutorTokens, check_call
from dlc.mesos.emulator.master import CallError
from dlc.mesos.emulator.model import Agent, Framework, Task, make_status
from dlc.mesos.emulator.streams import EventStream
from dlc.mesos.resources import Resources

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5.0
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ExecutorRun:
    """One running executor (or a command task, which has no executor process of its own)."""

    agent: Agent
    framework_id: str
    executor_id: str
    info: dict[str, Any] | None  # None for a command task
    resources: Resources
    sandbox: Path
    container_id: str
    process: subprocess.Popen | None = None
    stream: EventStream | None = None
    queued: list[Task] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    killing: bool = False
    kill_at: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """(agent id, framework id, executor id)."""
        return (self.agent.agent_id, self.framework_id, self.executor_id)


def _wait_status(returncode: int) -> int:
    """Turns a Popen return code into the raw wait status Mesos reports."""
    return -returncode if returncode < 0 else returncode << 8


#: variables that hold DLC credentials: never inherited by executors
_CREDENTIAL_VARS = frozenset({"DLC_ADMIN_TOKEN", "DLC_TOKEN"})


class AgentRuntime:
    """Processes and executor connections of all emulated agents.

    Args:
        lock: the emulator's lock (held by every caller of the public methods, and taken by the
            process-watching threads).
        work_dir: root of the sandboxes.
        address: returns the emulator's ``host:port``.
        tokens: signs and checks executor tokens (:mod:`~dlc.mesos.emulator.executor_auth`);
            ``None`` accepts unauthenticated executor calls, like an agent without
            ``--authenticate_http_executors``.
    """

    def __init__(
        self,
        lock: threading.RLock,
        work_dir: Path,
        address: Any,
        tokens: ExecutorTokens | None = None,
    ) -> None:
        self.lock = lock
        self.work_dir = work_dir
        self.address = address
        self.tokens = tokens
        self.master: Any = None  # set by the emulator once the master exists
        self.runs: dict[tuple[str, str, str], ExecutorRun] = {}

    # -- queries used by the master --------------------------------------------------------------

    def has_executor(self, agent_id: str, framework_id: str, executor_id: str) -> bool:
        """True when that custom executor is already running on the agent."""
        run = self.runs.get((agent_id, framework_id, executor_id))
        return run is not None and run.info is not None

    def executor_resources(self, agent_id: str) -> Resources:
        """Resources held by the custom executors running on an agent."""
        total = Resources()
        for run in self.runs.values():
            if run.agent.agent_id == agent_id:
                total = total + run.resources
        return total

    # -- launching -------------------------------------------------------------------------------

    def launch(
        self, agent: Agent, framework: Framework, task: Task, executor: dict[str, Any] | None
    ) -> None:
        """Starts a task: a command subprocess, or a LAUNCH for a (new) custom executor."""
        if executor is None:
            self._launch_command(agent, framework, task)
            return
        key = (agent.agent_id, framework.framework_id, task.executor_id)
        run = self.runs.get(key)
        if run is None:
            run = self._new_run(agent, framework.framework_id, task.executor_id, executor)
            self.runs[key] = run
            command = executor.get("command") or {}
            if not self._spawn(run, command):
                run.queued.append(task)
                self._spawn_failed(run)
                return
        if run.stream is not None:
            run.tasks[task.task_id] = task
            run.stream.send({"type": "LAUNCH", "launch": {"task": task.info}})
        else:
            run.queued.append(task)

    def _new_run(
        self, agent: Agent, framework_id: str, executor_id: str, info: dict[str, Any] | None
    ) -> ExecutorRun:
        container_id = str(uuid.uuid4())
        sandbox = (
            self.work_dir
            / "slaves"
            / agent.agent_id
            / "frameworks"
            / framework_id
            / "executors"
            / executor_id
            / "runs"
            / container_id
        )
        sandbox.mkdir(parents=True, exist_ok=True)
        resources = Resources.from_json((info or {}).get("resources") or [])
        return ExecutorRun(agent, framework_id, executor_id, info, resources, sandbox, container_id)

    def _environment(self, run: ExecutorRun, command: dict[str, Any]) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            # executors get no Mesos leftovers and no DLC credentials: they need neither,
            # and /proc/<pid>/environ would show them (red-team finding)
            if not k.startswith(("MESOS_", "LIBPROCESS_")) and k not in _CREDENTIAL_VARS
        }
        # The interpreter running the emulator comes first on PATH, so that an executor started
        # as `python3 ...` has the same packages (pymesos, dlc) as the process that launched it.
        python_bin = os.path.dirname(sys.executable)
        env["PATH"] = f"{python_bin}:{env.get('PATH', _DEFAULT_PATH)}"
        env.update(run.agent.executor_env)  # the agent's own, as --executor_environment_variables
        for variable in (command.get("environment") or {}).get("variables") or []:
            env[str(variable.get("name"))] = str(variable.get("value", ""))
        host, _, port = self.address().partition(":")
        env.update(
            MESOS_AGENT_ENDPOINT=self.address(),
            MESOS_SLAVE_PID=f"slave({run.agent.index})@{host}:{port}",
            MESOS_SLAVE_ID=run.agent.agent_id,
            MESOS_FRAMEWORK_ID=run.framework_id,
            MESOS_EXECUTOR_ID=run.executor_id,
            MESOS_DIRECTORY=str(run.sandbox),
            MESOS_SANDBOX=str(run.sandbox),
            MESOS_CHECKPOINT="0",
            # the emulator dies with its process: an executor never waits long for it
            MESOS_RECOVERY_TIMEOUT="5secs",
            MESOS_HTTP_COMMAND_EXECUTOR="0",
            MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD=f"{SHUTDOWN_GRACE_SECONDS:g}secs",
        )
        env.pop(TOKEN_VARIABLE, None)  # never one from the task's own environment
        if self.tokens is not None and run.info is not None:
            env[TOKEN_VARIABLE] = self.tokens.issue(
                run.framework_id, run.executor_id, run.container_id
            )
        return env

    def _spawn(self, run: ExecutorRun, command: dict[str, Any]) -> bool:
        value = str(command.get("value", ""))
        if command.get("shell", True):
            argv, executable = ["/bin/sh", "-c", value], "/bin/sh"
        else:
            argv, executable = list(command.get("arguments") or [value]), value
        try:
            with (
                open(run.sandbox / "stdout", "ab") as stdout,
                open(run.sandbox / "stderr", "ab") as stderr,
            ):
                run.process = subprocess.Popen(
                    argv,
                    executable=executable,
                    cwd=run.sandbox,
                    env=self._environment(run, command),
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=True,
                )
        except OSError as exc:
            logger.warning("cannot start %s: %s", run.executor_id, exc)
            return False
        threading.Thread(
            target=self._watch, args=(run,), name=f"emulator-wait-{run.executor_id}", daemon=True
        ).start()
        return True

    def _spawn_failed(self, run: ExecutorRun) -> None:
        self.runs.pop(run.key, None)
        for task in run.queued:
            self._update(run, task, "TASK_FAILED", "SOURCE_AGENT", "Failed to launch container")

    def _launch_command(self, agent: Agent, framework: Framework, task: Task) -> None:
        run = self._new_run(agent, framework.framework_id, task.executor_id, None)
        run.tasks[task.task_id] = task
        self.runs[run.key] = run
        if not self._spawn(run, task.info.get("command") or {}):
            self._spawn_failed(run)
            return
        self._update(run, task, "TASK_RUNNING", "SOURCE_EXECUTOR")

    # -- process exits ---------------------------------------------------------------------------

    def _watch(self, run: ExecutorRun) -> None:
        assert run.process is not None
        returncode = run.process.wait()
        with self.lock:
            self._exited(run, returncode)

    def _exited(self, run: ExecutorRun, returncode: int) -> None:
        if self.runs.get(run.key) is run:
            del self.runs[run.key]
        if run.stream is not None:
            run.stream.close()
        if run.info is None:
            for task in run.tasks.values():
                if not task.terminal:
                    self._command_finished(run, task, returncode)
            self.master.allocator.request()
            return
        for task in [*run.tasks.values(), *run.queued]:
            if not task.terminal:
                self._update(
                    run,
                    task,
                    "TASK_FAILED",
                    "SOURCE_AGENT",
                    "Executor terminated",
                    reason="REASON_EXECUTOR_TERMINATED",
                )
        self.master.executor_lost(
            run.framework_id, run.agent.agent_id, run.executor_id, _wait_status(returncode)
        )

    def _command_finished(self, run: ExecutorRun, task: Task, returncode: int) -> None:
        if run.killing:
            self._update(run, task, "TASK_KILLED", "SOURCE_EXECUTOR")
        elif returncode == 0:
            self._update(run, task, "TASK_FINISHED", "SOURCE_EXECUTOR", "exit status 0")
        else:
            code = returncode if returncode >= 0 else 128 - returncode
            self._update(run, task, "TASK_FAILED", "SOURCE_EXECUTOR", f"exit status {code}")

    def _update(
        self,
        run: ExecutorRun,
        task: Task,
        state: str,
        source: str,
        message: str | None = None,
        reason: str | None = None,
    ) -> None:
        status = make_status(
            task.task_id,
            state,
            source,
            agent_id=run.agent.agent_id,
            # Only the agent's own updates name the executor; an executor's do not (Mesos 1.11).
            executor_id=run.executor_id if source == "SOURCE_AGENT" else None,
            reason=reason,
            message=message,
        )
        self.master.status_update(task, status)

    # -- kills and shutdown ----------------------------------------------------------------------

    def _run_of(self, task: Task) -> ExecutorRun | None:
        return self.runs.get((task.agent_id, task.framework_id, task.executor_id))

    def kill(self, task: Task) -> None:
        """Kills a task: SIGTERM for a command task, a KILL event for an executor's task."""
        run = self._run_of(task)
        if run is None:
            return
        if run.info is None:
            run.killing = True
            self._signal(run, signal.SIGTERM)
            return
        if task in run.queued:
            run.queued.remove(task)
            self._update(
                run,
                task,
                "TASK_KILLED",
                "SOURCE_AGENT",
                "Killed before the executor subscribed",
                reason="REASON_TASK_KILLED_DURING_LAUNCH",
            )
            if not run.queued and not run.tasks:
                # as a Mesos agent does: an unregistered executor left with no task is killed
                # (it would otherwise subscribe later and wait for a task for ever)
                self._shutdown(run)
        elif run.stream is not None:
            run.stream.send({"type": "KILL", "kill": {"task_id": {"value": task.task_id}}})

    def shutdown_framework(self, framework_id: str) -> None:
        """Shuts down a framework's executors (SHUTDOWN, then SIGKILL after the grace period)."""
        for run in [r for r in self.runs.values() if r.framework_id == framework_id]:
            self._shutdown(run)

    def _shutdown(self, run: ExecutorRun) -> None:
        run.killing = True
        if run.stream is not None and run.info is not None:
            run.stream.send({"type": "SHUTDOWN"})
            run.kill_at = self.master.clock() + SHUTDOWN_GRACE_SECONDS
        else:
            self._signal(run, signal.SIGKILL)

    def _signal(self, run: ExecutorRun, signum: int) -> None:
        # The whole session: a shell's children must go too, even after the shell itself exits.
        if run.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.process.pid, signum)

    def tick(self, now: float) -> None:
        """Force-kills executors whose shutdown grace period is over."""
        for run in list(self.runs.values()):
            if run.kill_at is not None and now >= run.kill_at:
                run.kill_at = None
                self._signal(run, signal.SIGKILL)

    def stop_all(self) -> list[subprocess.Popen]:
        """SIGKILLs every process; returns them so the caller can wait outside the lock."""
        processes = []
        for run in list(self.runs.values()):
            run.killing = True
            self._signal(run, signal.SIGKILL)
            if run.stream is not None:
                run.stream.close()
            if run.process is not None:
                processes.append(run.process)
        return processes

    # -- the v1 executor API ---------------------------------------------------------------------

    def _find(
        self, call: dict[str, Any], agent_index: int | None, authorization: str | None
    ) -> ExecutorRun:
        """The run a call is for; with tokens on, only for the executor the token names.

        Raises:
            CallError: ``401`` no valid token, ``403`` the token names another executor (or an
                earlier container of this one), ``400`` no such executor.
        """
        principal = None
        if self.tokens is not None:
            principal = self.tokens.principal(authorization)
            check_call(principal, call)
        run = self._lookup(call, agent_index)
        if principal is not None and principal.container_id != run.container_id:
            raise CallError(
                f"Forbidden: the token is for container '{principal.container_id}', not the "
                f"executor's current container '{run.container_id}'",
                403,
            )
        return run

    def _lookup(self, call: dict[str, Any], agent_index: int | None) -> ExecutorRun:
        framework_id = (call.get("framework_id") or {}).get("value")
        executor_id = (call.get("executor_id") or {}).get("value")
        for run in self.runs.values():
            if (
                run.framework_id == framework_id
                and run.executor_id == executor_id
                and run.info is not None
                and agent_index in (None, run.agent.index)
            ):
                return run
        raise CallError(f"Executor '{executor_id}' of framework '{framework_id}' is not found")

    def executor_subscribe(
        self, call: dict[str, Any], agent_index: int | None, authorization: str | None = None
    ) -> EventStream:
        """Handles an executor's SUBSCRIBE; returns its stream with SUBSCRIBED and LAUNCHes.

        ``authorization`` is the request's ``Authorization`` header (see :meth:`_find`)."""
        run = self._find(call, agent_index, authorization)
        if run.stream is not None:
            run.stream.close()
        run.stream = stream = EventStream()
        framework = self.master.frameworks.get(run.framework_id)
        framework_info = dict(framework.info) if framework else {}
        framework_info["id"] = {"value": run.framework_id}
        agent = run.agent
        host, _, port = self.address().partition(":")
        subscribed = {
            "executor_info": {**(run.info or {}), "framework_id": {"value": run.framework_id}},
            "framework_info": framework_info,
            "agent_info": {
                "id": {"value": agent.agent_id},
                "hostname": agent.hostname,
                "port": int(port),
                "resources": agent.total.to_json(),
                "attributes": agent.attributes,
            },
            "container_id": {"value": run.container_id},
        }
        stream.send({"type": "SUBSCRIBED", "subscribed": subscribed})
        for task in run.queued:
            run.tasks[task.task_id] = task
            stream.send({"type": "LAUNCH", "launch": {"task": task.info}})
        run.queued.clear()
        if run.killing:
            self._shutdown(run)
        return stream

    def executor_call(
        self, call: dict[str, Any], agent_index: int | None, authorization: str | None = None
    ) -> None:
        """Handles an executor's UPDATE or MESSAGE call (``authorization``: see :meth:`_find`)."""
        run = self._find(call, agent_index, authorization)
        kind = call.get("type")
        if kind == "UPDATE":
            status = dict((call.get("update") or {}).get("status") or {})
            task_id = (status.get("task_id") or {}).get("value")
            task = run.tasks.get(str(task_id))
            if task is None:
                # With tokens on, the caller proved it is this executor, and the task is not
                # its own: forbidden. (The real agent 1.11 forwards such an update when the
                # task is another executor's of the same framework; docs/security.md.)
                raise CallError(
                    f"Task '{task_id}' is unknown to executor '{run.executor_id}'",
                    403 if self.tokens is not None else 400,
                )
            if not status.get("uuid") or not status.get("state"):
                raise CallError("Status update needs 'state' and 'uuid'")
            status.setdefault("source", "SOURCE_EXECUTOR")
            status["agent_id"] = {"value": run.agent.agent_id}
            self.master.status_update(task, status)
        elif kind == "MESSAGE":
            data = (call.get("message") or {}).get("data", "")
            self.master.framework_message(
                run.framework_id, run.agent.agent_id, run.executor_id, data
            )
        else:
            raise CallError(f"Executor call type {kind!r} is not supported")

    def executor_disconnected(self, stream: EventStream) -> None:
        """Forgets a closed executor stream (the process may still reconnect)."""
        for run in self.runs.values():
            if run.stream is stream:
                run.stream = None

    def acknowledged(self, task: Task, status: dict[str, Any]) -> None:
        """Tells an executor that the scheduler acknowledged one of its updates."""
        run = self._run_of(task)
        if run is None or run.info is None or run.stream is None:
            return
        if status.get("source") != "SOURCE_EXECUTOR":
            return
        acknowledged = {"task_id": {"value": task.task_id}, "uuid": status["uuid"]}
        run.stream.send({"type": "ACKNOWLEDGED", "acknowledged": acknowledged})

    def message_to_executor(
        self, framework_id: str, agent_id: str, executor_id: str, data: str
    ) -> None:
        """Relays a scheduler MESSAGE call to the executor."""
        run = self.runs.get((agent_id, framework_id, executor_id))
        if run is not None and run.stream is not None:
            run.stream.send({"type": "MESSAGE", "message": {"data": data}})
