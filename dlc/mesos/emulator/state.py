"""Read-only JSON views of the emulator (subsets of Mesos's ``/master/state`` and agent ``/state``).

Field names follow Mesos 1.11 (``slaves``, ``frameworks[].tasks[]``, ``used_resources``, ...)
so that code reading the real endpoints can read these too.
"""

from __future__ import annotations

from typing import Any

from dlc.mesos.emulator.model import Agent, Framework, Task
from dlc.mesos.resources import Resources, attributes_summary, reserved_role


def _task_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.task_id,
        "name": task.info.get("name", task.task_id),
        "framework_id": task.framework_id,
        "executor_id": "" if task.info.get("command") else task.executor_id,
        "slave_id": task.agent_id,
        "state": task.state,
        "role": task.role,
        "resources": task.resources.summary(),
        "statuses": [{"state": s["state"], "timestamp": s.get("timestamp")} for s in task.statuses],
    }


def _agent_json(master: Any, agent: Agent) -> dict[str, Any]:
    host, _, port = master.address().partition(":")
    used = master.used(agent.agent_id)
    return {
        "id": agent.agent_id,
        "hostname": agent.hostname,
        "port": int(port),
        "pid": f"slave({agent.index})@{host}:{port}",
        "attributes": attributes_summary(agent.attributes),
        "resources": agent.total.summary(),
        "used_resources": used.summary(),
        "offered_resources": master.offered(agent.agent_id).summary(),
        **_reservations_json(agent.total),
        "registered_time": agent.registered_time,
        "active": True,
        "version": "1.11.0",
        **({"domain": agent.domain} if agent.domain is not None else {}),
    }


def _reservations_json(total: Resources) -> dict[str, Any]:
    """``reserved_resources`` (per role), ``unreserved_resources`` and their ``_full`` JSON,
    as the real master's ``/master/slaves`` renders them."""
    parts = total.by_reservation()
    unreserved = parts.pop("*", Resources())
    reserved: dict[str, Resources] = {}
    for key, bag in parts.items():
        role = reserved_role(key) or "*"
        reserved[role] = reserved.get(role, Resources()) + bag
    return {
        "reserved_resources": {role: bag.summary() for role, bag in reserved.items()},
        "unreserved_resources": unreserved.summary(),
        "reserved_resources_full": {
            role: [
                r
                for key, bag in parts.items()
                if reserved_role(key) == role
                for r in bag.to_json(refinement=True)
            ]
            for role in reserved
        },  # fmt: skip
        "unreserved_resources_full": unreserved.to_json(),
    }


def _framework_json(master: Any, framework: Framework, active: bool) -> dict[str, Any]:
    tasks = [t for t in master.tasks.values() if t.framework_id == framework.framework_id]
    done = [t for t in master.completed_tasks if t.framework_id == framework.framework_id]
    offers = [o for o in master.offers.values() if o.framework_id == framework.framework_id]
    used = Resources()
    for task in tasks:
        if not task.terminal:
            used = used + task.resources
    offered = Resources()
    for offer in offers:
        offered = offered + offer.resources
    info = framework.info
    return {
        "id": framework.framework_id,
        "name": info.get("name", ""),
        "user": info.get("user", ""),
        "hostname": info.get("hostname", ""),
        "webui_url": info.get("webui_url", ""),
        "failover_timeout": info.get("failover_timeout", 0),
        "capabilities": [c.get("type") for c in info.get("capabilities", [])],
        "role": framework.roles[0] if framework.roles else "*",
        "roles": list(framework.roles),
        "active": active and framework.connected and not framework.suppressed,
        "connected": active and framework.connected,
        "registered_time": framework.registered_time,
        "used_resources": used.summary(),
        "offered_resources": offered.summary(),
        "tasks": [_task_json(t) for t in tasks],
        "completed_tasks": [_task_json(t) for t in done],
        "offers": [
            {
                "id": o.offer_id,
                "framework_id": o.framework_id,
                "slave_id": o.agent_id,
                "resources": o.resources.summary(),
            }
            for o in offers
        ],
    }


def master_state(master: Any) -> dict[str, Any]:
    """The ``/master/state`` subset: version, ids, agents, frameworks with their tasks."""
    host, _, port = master.address().partition(":")
    return {
        "version": "1.11.0",
        "id": master.master_id,
        "pid": f"master@{host}:{port}",
        "hostname": host,
        "start_time": master.start_time,
        "activated_slaves": float(len(master.agents)),
        "slaves": [_agent_json(master, a) for a in master.agents.values()],
        "frameworks": [_framework_json(master, f, True) for f in master.frameworks.values()],
        "completed_frameworks": [
            _framework_json(master, f, False) for f in master.removed_frameworks.values()
        ],
    }


def slaves_state(master: Any) -> dict[str, Any]:
    """The ``/master/slaves`` view."""
    return {"slaves": [_agent_json(master, a) for a in master.agents.values()]}


def agent_state(master: Any, index: int) -> dict[str, Any]:
    """An agent's ``/state`` subset: its resources, attributes and executors with tasks."""
    agent = next((a for a in master.agents.values() if a.index == index), None)
    if agent is None:
        return {}
    frameworks: dict[str, dict[str, Any]] = {}
    for run in master.runtime.runs.values():
        if run.agent is not agent:
            continue
        entry = frameworks.setdefault(run.framework_id, {"id": run.framework_id, "executors": []})
        entry["executors"].append(
            {
                "id": run.executor_id,
                "directory": str(run.sandbox),
                "container": run.container_id,
                "resources": run.resources.summary(),
                "tasks": [_task_json(t) for t in run.tasks.values()],
                "queued_tasks": [_task_json(t) for t in run.queued],
            }
        )
    state = _agent_json(master, agent)
    state["frameworks"] = list(frameworks.values())
    return state
