"""An in-process Mesos 1.11 master + agents speaking the v1 HTTP scheduler and executor APIs.

``dlc local`` and the tests run DLC's pymesos scheduler and executor against it when no Mesos
is installed; tests/contract runs the same scenarios against it and against the real master so
that the two cannot drift apart. Typical use::

    from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

    agents = [AgentSpec(resources="cpus:8;mem:16384;gpus:4;gpu_ids:{0,1,2,3}",
                        attributes="gpu_model:V100")]
    with MesosEmulator(agents=agents) as mesos:
        driver = MesosSchedulerDriver(scheduler, framework, mesos.address)

Roles and reservations as the master has them (static ``gpus(dlc):4`` in ``resources``, dynamic
through RESERVE/UNRESERVE, per-role offers with ``allocation_info``; docs/roles.md).

What it is not: no quota or weights, no containerizers or images (executors and command tasks
run as plain host processes in a sandbox directory), no LAUNCH_GROUP, no framework or operator
authentication, no agent recovery or checkpointing. Executors are authenticated as by an agent
with ``--authenticate_http_executors`` (:mod:`~dlc.mesos.emulator.executor_auth`) unless
``authenticate_executors=False``.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlc.errors import EmulatorError
from dlc.mesos.emulator.agent import AgentRuntime
from dlc.mesos.emulator.executor_auth import ExecutorTokens, basic_authorization
from dlc.mesos.emulator.http import EmulatorHTTPServer
from dlc.mesos.emulator.master import Master
from dlc.mesos.emulator.model import AgentSpec
from dlc.mesos.emulator.state import master_state
from dlc.mesos.resources import Resources, parse_attributes

__all__ = ["AgentSpec", "MesosEmulator"]

logger = logging.getLogger(__name__)

_TICK_SECONDS = 0.05


#: what ``mesos-agent`` offers as ``ports`` when its ``--resources`` names none
DEFAULT_PORTS = "ports:[31000-32000]"


def agent_resources(text: str) -> Resources:
    """``--resources`` text as an agent offers it: like ``mesos-agent``, one that names no
    ``ports`` still offers the default range (interactive jobs and gangs take ports)."""
    parsed = Resources.parse(text)
    if "ports" in parsed.names():
        return parsed
    return parsed + Resources.parse(DEFAULT_PORTS)


class MesosEmulator:
    """A Mesos master and its agents, in this process, on ``127.0.0.1`` and a free port.

    Args:
        agents: the agents to register (default: one CPU-only agent).
        work_dir: where executor sandboxes go (default: a temporary directory removed by
            :meth:`stop`).
        host: address to bind; loopback by default.
        port: port to bind; 0 picks a free one.
        allocation_interval: seconds between periodic allocation runs (Mesos's default is 1).
        authenticate_executors: hand each executor a token and refuse executor API calls
            without a valid one (``401``) or for another executor (``403``). Only tests of the
            insecure mode turn it off.
        framework_credential: ``(principal, secret)`` every scheduler API call must carry as
            HTTP Basic (else ``401``), like a master with ``--authenticate_http_frameworks``.
            ``dlc local`` draws one: a host-network job shares loopback with the emulator and
            could otherwise fail DLC's framework over or take offers (red-team 2026-11-26).

    Raises:
        ResourceSyntaxError: an agent's resources or attributes text is malformed.
    """

    def __init__(
        self,
        agents: Sequence[AgentSpec] | None = None,
        work_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        allocation_interval: float = 1.0,
        authenticate_executors: bool = True,
        framework_credential: tuple[str, str] | None = None,
    ) -> None:
        self.agent_specs = list(agents) if agents is not None else [AgentSpec()]
        # Parse now so that a typo fails at construction, with the offending item named.
        self._parsed = [
            (
                spec,
                agent_resources(spec.resources),
                parse_attributes(spec.attributes),
                spec.domain_info(),
            )
            for spec in self.agent_specs
        ]
        self._own_work_dir = work_dir is None
        self._work_dir = Path(work_dir) if work_dir is not None else None
        self._bind = (host, port)
        self._allocation_interval = allocation_interval
        self._tokens = ExecutorTokens() if authenticate_executors else None
        #: the ``Authorization`` value scheduler calls must send (None: any caller)
        self.framework_authorization = (
            None if framework_credential is None else basic_authorization(*framework_credential)
        )
        self.lock = threading.RLock()
        self.master: Master | None = None
        self.runtime: AgentRuntime | None = None
        self._server: EmulatorHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> MesosEmulator:
        """Binds the port, registers the agents and starts serving.

        Raises:
            EmulatorError: already started, or the address cannot be bound.
        """
        if self._server is not None:
            raise EmulatorError("the Mesos emulator is already started")
        if self._work_dir is None:
            self._work_dir = Path(tempfile.mkdtemp(prefix="dlc-mesos-emulator-"))
        self._work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._server = EmulatorHTTPServer(self._bind, self)
        except OSError as exc:
            host, port = self._bind
            raise EmulatorError(
                f"--mesos-port {port}: cannot listen on {host}:{port} ({exc.strerror}); "
                "pick another port, or 0 for any"
            ) from None
        self.runtime = AgentRuntime(self.lock, self._work_dir, lambda: self.address, self._tokens)
        self.master = Master(
            str(uuid.uuid4()), self.runtime, lambda: self.address, self._allocation_interval
        )
        self.runtime.master = self.master
        with self.lock:
            for spec, resources, attributes, domain in self._parsed:
                self.master.add_agent(
                    spec.hostname, resources, attributes, spec.executor_env, domain
                )
        self._stopping.clear()
        self._threads = [
            threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="mesos-emulator-http",
                daemon=True,
            ),
            threading.Thread(target=self._tick_loop, name="mesos-emulator-tick", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        logger.info("Mesos emulator listening on %s", self.address)
        return self

    def stop(self) -> None:
        """Kills every executor and task process, ends all streams and frees the port."""
        if self._server is None:
            return
        self._stopping.set()
        processes: list[subprocess.Popen] = []
        with self.lock:
            assert self.master is not None and self.runtime is not None
            for framework in self.master.frameworks.values():
                if framework.stream is not None:
                    framework.stream.close()
            processes = self.runtime.stop_all()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                logger.warning("process %s did not exit after SIGKILL", process.pid)
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._server = None
        if self._own_work_dir and self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def __enter__(self) -> MesosEmulator:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _tick_loop(self) -> None:
        while not self._stopping.wait(_TICK_SECONDS):
            with self.lock:
                try:
                    assert self.master is not None and self.runtime is not None
                    self.master.tick()
                    self.runtime.tick(self.master.clock())
                except Exception:  # keep serving; a bug here must not freeze the emulator
                    logger.exception("Mesos emulator tick failed")

    # -- information and control -----------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` of the master (what pymesos takes as ``master``).

        Raises:
            EmulatorError: the emulator is not started.
        """
        if self._server is None:
            raise EmulatorError("the Mesos emulator is not started; call start() first")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.address}"

    @property
    def work_dir(self) -> Path | None:
        """Root of the executor sandboxes (None before start)."""
        return self._work_dir

    @property
    def agent_ids(self) -> list[str]:
        """Ids of the registered agents, in the order of ``agents``."""
        with self.lock:
            return list(self.master.agents) if self.master else []

    def state(self) -> dict[str, Any]:
        """The same JSON as ``GET /master/state``."""
        with self.lock:
            if self.master is None:
                raise EmulatorError("the Mesos emulator is not started; call start() first")
            return master_state(self.master)

    def set_agent_resources(self, agent_id: str, resources: str) -> None:
        """Changes an agent's total resources (outstanding offers on it are rescinded).

        Raises:
            ResourceSyntaxError: ``resources`` is malformed.
            EmulatorError: no such agent, or not started.
        """
        parsed = Resources.parse(resources)
        with self.lock:
            if self.master is None or agent_id not in self.master.agents:
                raise EmulatorError(f"agent_id {agent_id!r} is not an agent of this emulator")
            self.master.set_agent_resources(agent_id, parsed)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Waits until no executor or task process is running; True if that happened."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.runtime is None or not self.runtime.runs:
                    return True
            time.sleep(0.05)
        return False
