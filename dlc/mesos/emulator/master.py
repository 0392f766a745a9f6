"""The emulated Mesos master: v1 scheduler calls, offers, status updates, failover.

Everything here runs under the emulator's one lock (taken by the HTTP handlers and the ticker);
events leave through :class:`~dlc.mesos.emulator.streams.EventStream` queues, so no network I/O
happens while the lock is held. Behaviour follows Mesos 1.11 as observed on the real master
(see tests/contract): e.g. a task asking for resources its offers lack gets ``TASK_ERROR``,
``REASON_TASK_INVALID`` from ``SOURCE_MASTER`` without a uuid, and reconciling an unknown task
answers ``TASK_LOST`` (``TASK_UNKNOWN`` for PARTITION_AWARE frameworks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from dlc.mesos.emulator.allocation import Allocator
from dlc.mesos.emulator.model import Agent, Filter, Framework, Offer, Task, dig, make_status
from dlc.mesos.emulator.streams import EventStream
from dlc.mesos.emulator.updates import StatusUpdates
from dlc.mesos.resources import Resources

logger = logging.getLogger(__name__)

DEFAULT_REFUSE_SECONDS = 5.0  # Mesos's Filters.refuse_seconds default
HEARTBEAT_INTERVAL_SECONDS = 15.0


class CallError(Exception):
    """A call the master refuses with an HTTP error status (400 unless said otherwise)."""

    def __init__(self, message: str, status: int = 400):
        self.status = status
        super().__init__(message)


class Master(StatusUpdates):
    """The master's state and its handling of scheduler calls.

    Args:
        master_id: the master's id; framework, agent and offer ids are derived from it.
        runtime: the agents' runtime (launches, kills, executor events), see
            :class:`~dlc.mesos.emulator.agent.AgentRuntime`.
        address: returns the master's ``host:port``.
        clock: monotonic clock, replaceable in tests.
    """

    def __init__(
        self,
        master_id: str,
        runtime: Any,
        address: Callable[[], str],
        allocation_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.master_id = master_id
        self.runtime = runtime
        self.address = address
        self.clock = clock
        self.agents: dict[str, Agent] = {}
        self.frameworks: dict[str, Framework] = {}
        self.removed_frameworks: dict[str, Framework] = {}
        self.offers: dict[str, Offer] = {}
        self.tasks: dict[tuple[str, str], Task] = {}
        self.completed_tasks: list[Task] = []
        self.allocator = Allocator(self, allocation_interval)
        self._next_framework = 0
        self._next_offer = 0
        self.start_time = time.time()

    # -- agents ----------------------------------------------------------------------------------

    def add_agent(
        self,
        hostname: str,
        total: Resources,
        attributes: list[dict[str, Any]],
        executor_env: tuple[tuple[str, str], ...] = (),
        domain: dict[str, Any] | None = None,
    ) -> Agent:
        """Registers an agent; it is offered on the next allocation."""
        index = len(self.agents) + 1
        agent_id = f"{self.master_id}-S{index - 1}"
        agent = Agent(agent_id, index, hostname, total, attributes, executor_env=executor_env,
                      domain=domain)  # fmt: skip
        self.agents[agent.agent_id] = agent
        self.allocator.request()
        return agent

    def set_agent_resources(self, agent_id: str, total: Resources) -> None:
        """Changes an agent's total resources; its outstanding offers are rescinded."""
        self.agents[agent_id].total = total
        self.rescind_offers(lambda offer: offer.agent_id == agent_id)
        self.allocator.request()

    def used(self, agent_id: str) -> Resources:
        """Resources of live tasks and executors on an agent."""
        used = Resources()
        for task in self.tasks.values():
            if task.agent_id == agent_id and not task.terminal:
                used = used + task.resources
        return used + self.runtime.executor_resources(agent_id)

    def offered(self, agent_id: str) -> Resources:
        """Resources in outstanding offers on an agent."""
        out = Resources()
        for offer in self.offers.values():
            if offer.agent_id == agent_id:
                out = out + offer.resources
        return out

    # -- subscription ----------------------------------------------------------------------------

    def subscribe(self, call: dict[str, Any]) -> EventStream:
        """Handles SUBSCRIBE; returns the new stream (already holding SUBSCRIBED or ERROR)."""
        info = dig(call, "subscribe", "framework_info")
        if not isinstance(info, dict) or not info.get("user") or not info.get("name"):
            raise CallError("Expecting 'subscribe.framework_info' with 'user' and 'name'")
        top_id = dig(call, "framework_id", "value")
        info_id = dig(info, "id", "value")
        if top_id and info_id and top_id != info_id:
            raise CallError("'framework_id' differs from 'subscribe.framework_info.id'")
        framework_id = top_id or info_id
        stream = EventStream()
        if framework_id in self.removed_frameworks:
            stream.send({"type": "ERROR", "error": {"message": "Framework has been removed"}})
            stream.close()
            return stream
        framework = self.frameworks.get(framework_id) if framework_id else None
        if framework is None:
            framework_id = framework_id or self._new_framework_id()
            framework = Framework(framework_id, info)
            self.frameworks[framework_id] = framework
        elif framework.stream is not None:
            framework.stream.send({"type": "ERROR", "error": {"message": "Framework failed over"}})
            framework.stream.close()
        framework.info = {**info, "id": {"value": framework_id}}
        framework.stream = stream
        framework.failover_deadline = None
        self.rescind_offers(lambda offer: offer.framework_id == framework_id, notify=False)
        stream.send(
            {
                "type": "SUBSCRIBED",
                "subscribed": {
                    "framework_id": {"value": framework_id},
                    "heartbeat_interval_seconds": HEARTBEAT_INTERVAL_SECONDS,
                    "master_info": self.master_info(),
                },
            }
        )
        # Mesos's heartbeater fires once right away, then every interval.
        stream.send({"type": "HEARTBEAT"})
        for task in self.tasks.values():
            if task.framework_id == framework_id and task.pending:
                self._deliver(task)
        self.allocator.request()
        return stream

    def master_info(self) -> dict[str, Any]:
        """The MasterInfo dict SUBSCRIBED carries."""
        host, _, port = self.address().partition(":")
        return {
            "id": self.master_id,
            "ip": 16777343,
            "port": int(port),
            "hostname": host,
            "version": "1.11.0",
            "address": {"hostname": host, "ip": host, "port": int(port)},
        }

    def disconnected(self, stream: EventStream) -> None:
        """Called when a scheduler's stream ends; starts its failover timeout."""
        for framework in self.frameworks.values():
            if framework.stream is stream:
                framework.stream = None
                timeout = float(framework.info.get("failover_timeout", 0) or 0)
                framework.failover_deadline = self.clock() + timeout
                self.rescind_offers(partial(_offered_to, framework.framework_id), False)
                logger.info("framework %s disconnected", framework.framework_id)

    def _new_framework_id(self) -> str:
        while True:
            framework_id = f"{self.master_id}-{self._next_framework:04d}"
            self._next_framework += 1
            if framework_id not in self.frameworks:
                return framework_id

    # -- calls -----------------------------------------------------------------------------------

    def call(self, call: dict[str, Any], stream_id: str | None) -> None:
        """Handles every scheduler call except SUBSCRIBE.

        Raises:
            CallError: unknown framework, wrong stream id, or a malformed call.
        """
        kind = call.get("type")
        framework_id = dig(call, "framework_id", "value")
        framework = self.frameworks.get(framework_id or "")
        if framework is None:
            raise CallError(f"Framework '{framework_id}' not found")
        if not stream_id:
            raise CallError("All non-subscribe calls should include the 'Mesos-Stream-Id' header")
        if framework.stream is None or framework.stream.stream_id != stream_id:
            raise CallError(f"The stream ID '{stream_id}' does not match framework {framework_id}")
        handler = {
            "ACCEPT": self._accept,
            "DECLINE": self._decline,
            "REVIVE": self._revive,
            "SUPPRESS": self._suppress,
            "KILL": self._kill,
            "ACKNOWLEDGE": self._acknowledge,
            "RECONCILE": self._reconcile,
            "TEARDOWN": self._teardown,
            "MESSAGE": self._message,
            "REQUEST": lambda framework, payload: None,
        }.get(str(kind))
        if handler is None:
            raise CallError(f"Call type {kind!r} is not supported by the DLC Mesos emulator")
        handler(framework, call.get(str(kind).lower()) or {})

    def _take_offers(self, framework: Framework, ids: Any) -> tuple[list[Offer], list[str]]:
        if isinstance(ids, dict):
            ids = [ids]
        taken, invalid = [], []
        for offer_id in ids or []:
            value = dig(offer_id, "value")
            offer = self.offers.get(value or "")
            if offer is None or offer.framework_id != framework.framework_id:
                invalid.append(str(value))
            else:
                taken.append(self.offers.pop(offer.offer_id))
        return taken, invalid

    def _add_filter(self, framework: Framework, agent_id: str, unused: Resources, filters: Any):
        refuse = dig(filters, "refuse_seconds")
        refuse = DEFAULT_REFUSE_SECONDS if refuse is None else float(refuse)
        if refuse > 0 and unused:
            entry = Filter(unused, self.clock() + refuse)
            framework.filters.setdefault(agent_id, []).append(entry)

    def _accept(self, framework: Framework, accept: dict[str, Any]) -> None:
        offers, invalid = self._take_offers(framework, accept.get("offer_ids"))
        operations = accept.get("operations") or []
        agents = {offer.agent_id for offer in offers}
        if invalid or len(agents) != 1:
            why = f"invalid offers: {', '.join(invalid)}" if invalid else "offers of several agents"
            self._drop_launches(framework, operations, f"Task launched with {why}")
            self.allocator.request()
            return
        roles = {offer.role for offer in offers}
        if len(roles) != 1:
            # Mesos: "Aggregated offers must be allocated to the same role"
            self._drop_launches(framework, operations, "Task launched with offers of several roles")
            self.allocator.request()
            return
        agent = self.agents[agents.pop()]
        available = Resources()
        for offer in offers:
            available = available + offer.resources
        role = roles.pop()
        for operation in operations:
            available = self._apply(framework, agent, operation, available, role)
        self._add_filter(framework, agent.agent_id, available, accept.get("filters"))
        self.allocator.request()

    def _drop_launches(self, framework: Framework, operations: list[Any], message: str) -> None:
        state = "TASK_DROPPED" if framework.has_capability("PARTITION_AWARE") else "TASK_LOST"
        for operation in operations:
            for task in _operation_tasks(operation):
                task_id = str(dig(task, "task_id", "value"))
                status = make_status(
                    task_id,
                    state,
                    "SOURCE_MASTER",
                    reason="REASON_INVALID_OFFERS",
                    message=message,
                    with_uuid=False,
                )
                self.send(framework, {"type": "UPDATE", "update": {"status": status}})

    def _apply(
        self, framework: Framework, agent: Agent, operation: dict[str, Any], available: Resources,
        role: str,
    ) -> Resources:  # fmt: skip
        kind = operation.get("type")
        if kind == "LAUNCH":
            for info in dig(operation, "launch", "task_infos") or []:
                available = self._launch(framework, agent, info, available, role)
        elif kind in ("RESERVE", "UNRESERVE"):
            from dlc.mesos.emulator.reservations import apply_reservation

            available = apply_reservation(self, framework, agent, operation, available, role)
        elif kind == "LAUNCH_GROUP":
            for info in _operation_tasks(operation):
                self._task_error(
                    framework, agent, info, "LAUNCH_GROUP is not supported by the DLC emulator"
                )
        else:
            logger.warning("ignoring unsupported offer operation %s", kind)
        return available

    def _launch(
        self, framework: Framework, agent: Agent, info: dict[str, Any], available: Resources,
        role: str = "*",
    ) -> Resources:  # fmt: skip
        from dlc.mesos.emulator.validation import validate_task

        problem, needed = validate_task(self, framework, agent, info, available, role)
        if problem:
            self._task_error(framework, agent, info, problem)
            return available
        executor = info.get("executor")
        task_id = info["task_id"]["value"]
        executor_id = dig(executor, "executor_id", "value") if executor else task_id
        task_resources = Resources.from_json(info.get("resources") or [])
        task = Task(
            task_id, framework.framework_id, agent.agent_id, executor_id, info, task_resources,
            role=role,
        )  # fmt: skip
        self.tasks[(framework.framework_id, task_id)] = task
        self.runtime.launch(agent, framework, task, executor)
        return available - needed

    def _task_error(
        self, framework: Framework, agent: Agent, info: dict[str, Any], message: str
    ) -> None:
        status = make_status(
            str(dig(info, "task_id", "value")),
            "TASK_ERROR",
            "SOURCE_MASTER",
            agent_id=agent.agent_id,
            reason="REASON_TASK_INVALID",
            message=message,
            with_uuid=False,
        )
        self.send(framework, {"type": "UPDATE", "update": {"status": status}})

    def _decline(self, framework: Framework, decline: dict[str, Any]) -> None:
        offers, _ = self._take_offers(framework, decline.get("offer_ids"))
        for offer in offers:
            self._add_filter(framework, offer.agent_id, offer.resources, decline.get("filters"))
        self.allocator.request()

    def _revive(self, framework: Framework, payload: dict[str, Any]) -> None:
        roles = payload.get("roles") or ()
        if roles:  # only these roles; the others stay as they are
            if framework.suppressed:
                framework.suppressed_roles = set(framework.roles)
                framework.suppressed = False
            framework.suppressed_roles -= set(roles)
        else:
            framework.suppressed = False
            framework.suppressed_roles.clear()
        framework.filters.clear()
        self.allocator.request()

    def _suppress(self, framework: Framework, payload: dict[str, Any]) -> None:
        roles = payload.get("roles") or ()
        if roles:
            framework.suppressed_roles |= set(roles)
        else:
            framework.suppressed = True

    def _kill(self, framework: Framework, kill: dict[str, Any]) -> None:
        task_id = str(dig(kill, "task_id", "value"))
        task = self.tasks.get((framework.framework_id, task_id))
        if task is None:
            self._reconcile(framework, {"tasks": [{"task_id": {"value": task_id}}]})
        elif not task.terminal:
            self.runtime.kill(task)

    def _teardown(self, framework: Framework, _payload: dict[str, Any]) -> None:
        self.remove_framework(framework)

    def _message(self, framework: Framework, message: dict[str, Any]) -> None:
        self.runtime.message_to_executor(
            framework.framework_id,
            str(dig(message, "agent_id", "value")),
            str(dig(message, "executor_id", "value")),
            message.get("data", ""),
        )

    # -- removal, rescinding, delivery ----------------------------------------------------------

    def remove_framework(self, framework: Framework) -> None:
        """Removes a framework: its offers vanish and its executors and tasks are shut down."""
        self.frameworks.pop(framework.framework_id, None)
        self.removed_frameworks[framework.framework_id] = framework
        self.rescind_offers(lambda o: o.framework_id == framework.framework_id, notify=False)
        self.runtime.shutdown_framework(framework.framework_id)
        for key, task in list(self.tasks.items()):
            if task.framework_id == framework.framework_id:
                task.state = "TASK_KILLED" if not task.terminal else task.state
                self.tasks.pop(key)
                self.completed_tasks.append(task)
        if framework.stream is not None:
            framework.stream.close()
            framework.stream = None
        self.allocator.request()

    def rescind_offers(self, which: Callable[[Offer], bool], notify: bool = True) -> None:
        """Withdraws the matching outstanding offers (sending RESCIND when ``notify``)."""
        for offer in [o for o in self.offers.values() if which(o)]:
            del self.offers[offer.offer_id]
            if notify:
                event = {"type": "RESCIND", "rescind": {"offer_id": {"value": offer.offer_id}}}
                self.send_to(offer.framework_id, event)

    def new_offer(
        self, framework: Framework, agent: Agent, resources: Resources, role: str = "*"
    ) -> Offer:
        """Creates an outstanding offer allocated to ``role`` (the allocator sends it)."""
        offer_id = f"{self.master_id}-O{self._next_offer}"
        self._next_offer += 1
        offer = Offer(offer_id, framework.framework_id, agent.agent_id, resources, role)
        self.offers[offer_id] = offer
        return offer

    def offer_json(self, offer: Offer) -> dict[str, Any]:
        """The v1 JSON Offer, in the format the framework's capabilities ask for (as the real
        master: ``allocation_info`` for ``MULTI_ROLE``, ``reservations`` stacks for
        ``RESERVATION_REFINEMENT``)."""
        agent = self.agents[offer.agent_id]
        host, _, port = self.address().partition(":")
        framework = self.frameworks.get(offer.framework_id)
        multi = framework is not None and framework.has_capability("MULTI_ROLE")
        refinement = framework is not None and framework.has_capability("RESERVATION_REFINEMENT")
        out = {
            "id": {"value": offer.offer_id},
            "framework_id": {"value": offer.framework_id},
            "agent_id": {"value": offer.agent_id},
            "hostname": agent.hostname,
            "url": {
                "scheme": "http",
                "address": {"hostname": agent.hostname, "ip": host, "port": int(port)},
                "path": f"/slave({agent.index})",
            },
            "resources": offer.resources.to_json(refinement, offer.role if multi else None),
            "attributes": agent.attributes,
        }
        if agent.domain is not None:  # the agent's fault domain, as the real master sends it
            out["domain"] = agent.domain
        if multi:
            out["allocation_info"] = {"role": offer.role}
        return out

    def send_to(self, framework_id: str, event: dict[str, Any]) -> None:
        """Sends an event to a framework if it is subscribed."""
        framework = self.frameworks.get(framework_id)
        if framework is not None:
            self.send(framework, event)

    def send(self, framework: Framework, event: dict[str, Any]) -> None:
        """Sends an event to a framework if it is subscribed (dropped otherwise, as in Mesos)."""
        if framework.connected:
            framework.stream.send(event)

    # -- time ------------------------------------------------------------------------------------

    def tick(self) -> None:
        """Runs the periodic work: failover timeouts, update retries, allocation."""
        now = self.clock()
        for framework in list(self.frameworks.values()):
            deadline = framework.failover_deadline
            if not framework.connected and deadline is not None and now >= deadline:
                logger.info("framework %s failover timeout", framework.framework_id)
                self.remove_framework(framework)
        self.retry_updates(now)
        self.allocator.tick(now)


def _offered_to(framework_id: str, offer: Offer) -> bool:
    return offer.framework_id == framework_id


def _operation_tasks(operation: dict[str, Any]) -> list[dict[str, Any]]:
    if operation.get("type") == "LAUNCH":
        return list(dig(operation, "launch", "task_infos") or [])
    if operation.get("type") == "LAUNCH_GROUP":
        return list(dig(operation, "launch_group", "task_group", "tasks") or [])
    return []
