"""Plain data of the Mesos emulator: agents, frameworks, offers, tasks, and status updates."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from dlc.mesos.resources import Resources
from dlc.scheduler.tasks.states import TERMINAL_STATES

#: ``build_user`` of the emulator's ``/version``: how clients tell it from a real master
EMULATOR_BUILD_USER = "dlc-emulator"


@dataclass(frozen=True)
class AgentSpec:
    """One emulated agent, configured like ``mesos-agent`` flags.

    Attributes:
        resources: ``--resources`` text, e.g. ``"cpus:4;mem:4096;gpus:4;gpu_ids:{0,1,2,3}"``.
        attributes: ``--attributes`` text, e.g. ``"dlc_topo:...;gpu_model:V100"``.
        hostname: the hostname offers carry.
        executor_env: environment this agent gives its executors, like ``mesos-agent
            --executor_environment_variables`` (the task's own CommandInfo variables win).
        domain: ``--domain`` JSON, the agent's fault domain (:func:`fault_domain`); offers
            and ``/master/slaves`` carry it as ``domain``, as the real master does. Empty:
            none.
    """

    resources: str = "cpus:4;mem:4096;disk:10240;ports:[31000-31100]"
    attributes: str = ""
    hostname: str = "127.0.0.1"
    executor_env: tuple[tuple[str, str], ...] = ()
    domain: str = ""

    def domain_info(self) -> dict[str, Any] | None:
        """The parsed ``DomainInfo`` (``None``: no domain).

        Raises:
            ValueError: not ``{"fault_domain": {"region": {"name": ..}, "zone": {"name": ..}}}``
                (the real agent refuses to start on such a flag).
        """
        if not self.domain:
            return None
        info = json.loads(self.domain)
        fault = info.get("fault_domain") if isinstance(info, dict) else None
        names = [(fault or {}).get(k, {}).get("name") for k in ("region", "zone")]
        if set(info) != {"fault_domain"} or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"--domain {self.domain!r}: expected a fault_domain with a "
                             "region name and a zone name")  # fmt: skip
        return {"fault_domain": {"region": {"name": names[0]}, "zone": {"name": names[1]}}}


def fault_domain(region: str, zone: str) -> str:
    """``mesos-agent --domain`` JSON of a fault domain (region and zone names)."""
    return json.dumps({"fault_domain": {"region": {"name": region}, "zone": {"name": zone}}})


@dataclass
class Agent:
    """An agent registered with the emulated master."""

    agent_id: str
    index: int  # 1-based: the N of its libprocess id "slave(N)"
    hostname: str
    total: Resources
    attributes: list[dict[str, Any]]
    registered_time: float = field(default_factory=time.time)
    #: environment its executors get before their CommandInfo's (see AgentSpec)
    executor_env: tuple[tuple[str, str], ...] = ()
    #: its ``DomainInfo`` (``AgentSpec.domain``), or ``None``
    domain: dict[str, Any] | None = None


@dataclass
class Filter:
    """A DECLINE/ACCEPT filter: refuse offers of ``resources`` (or less) until ``expires``."""

    resources: Resources
    expires: float


@dataclass
class Framework:
    """A framework known to the master."""

    framework_id: str
    info: dict[str, Any]
    stream: Any = None  # EventStream while subscribed
    suppressed: bool = False
    #: roles suppressed one by one (``SUPPRESS`` with ``roles``); ``suppressed``: all of them
    suppressed_roles: set[str] = field(default_factory=set)
    filters: dict[str, list[Filter]] = field(default_factory=dict)
    failover_deadline: float | None = None
    registered_time: float = field(default_factory=time.time)

    @property
    def connected(self) -> bool:
        """True while a subscription stream is open."""
        return self.stream is not None and not self.stream.closed

    def has_capability(self, name: str) -> bool:
        """True when ``framework_info.capabilities`` lists ``name``."""
        return any(c.get("type") == name for c in self.info.get("capabilities", []))

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles it subscribed with: ``roles`` with ``MULTI_ROLE``, else ``(role,)``."""
        if self.has_capability("MULTI_ROLE"):
            return tuple(self.info.get("roles") or ())
        return (str(self.info.get("role") or "*"),)

    def wants(self, role: str) -> bool:
        """Whether offers for ``role`` may go to it now (not suppressed for it)."""
        return not self.suppressed and role not in self.suppressed_roles


@dataclass
class Offer:
    """An outstanding offer."""

    offer_id: str
    framework_id: str
    agent_id: str
    resources: Resources
    #: the role the offer is allocated to (``allocation_info.role``)
    role: str = "*"


@dataclass
class Task:
    """A task the master knows about (launched and not yet removed)."""

    task_id: str
    framework_id: str
    agent_id: str
    executor_id: str
    info: dict[str, Any]
    resources: Resources
    state: str = "TASK_STAGING"
    statuses: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)  # unacknowledged, oldest first
    retry_at: float = 0.0
    retry_interval: float = 10.0
    #: the role its resources were allocated to
    role: str = "*"

    @property
    def terminal(self) -> bool:
        """True once the latest state is terminal (its resources are free again)."""
        return self.state in TERMINAL_STATES


def new_uuid() -> str:
    """A status-update uuid as the v1 JSON API carries it (base64 of 16 bytes)."""
    return base64.b64encode(uuid.uuid4().bytes).decode()


def make_status(
    task_id: str,
    state: str,
    source: str,
    *,
    agent_id: str | None = None,
    executor_id: str | None = None,
    reason: str | None = None,
    message: str | None = None,
    with_uuid: bool = True,
) -> dict[str, Any]:
    """Builds a v1 TaskStatus dict; master-generated statuses carry no uuid (nothing to ACK)."""
    status: dict[str, Any] = {"task_id": {"value": task_id}, "state": state, "source": source}
    if message:
        status["message"] = message
    if reason:
        status["reason"] = reason
    if agent_id:
        status["agent_id"] = {"value": agent_id}
    if executor_id:
        status["executor_id"] = {"value": executor_id}
    status["timestamp"] = time.time()
    if with_uuid:
        status["uuid"] = new_uuid()
    return status


def dig(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None where a key is missing or a level is not a dict."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj
