"""Task validation of the emulated master (the checks Mesos makes before launching a task)."""

from __future__ import annotations

from typing import Any

from dlc.mesos.emulator.model import Agent, Framework, dig
from dlc.mesos.resources import Resources


def _resources(obj: dict[str, Any] | None) -> Resources:
    return Resources.from_json((obj or {}).get("resources") or [])


def validate_task(
    master: Any, framework: Framework, agent: Agent, info: dict[str, Any], available: Resources,
    role: str = "*",
) -> tuple[str | None, Resources]:  # fmt: skip
    """Checks a TaskInfo against the framework, agent and the offered resources left.

    Returns:
        ``(problem, needed)``: the TASK_ERROR message (None when valid) and the resources the
        task consumes, its executor's included when the executor is not running yet.
    """
    task_id = (info.get("task_id") or {}).get("value")
    if not task_id:
        return "Task has no 'task_id'", Resources()
    if (framework.framework_id, task_id) in master.tasks:
        return f"Task has duplicate ID: {task_id}", Resources()
    agent_id = (info.get("agent_id") or {}).get("value")
    if agent_id != agent.agent_id:
        return f"Task uses invalid agent: {agent_id}", Resources()
    executor = info.get("executor")
    if bool(info.get("command")) == bool(executor):
        message = "Task should have at least one (but not both) of CommandInfo or ExecutorInfo"
        return message + " present", Resources()
    problem = _allocation_problem(info, role)
    if problem:
        return problem, Resources()
    try:
        needed = _resources(info)
        if executor is not None:
            if not (executor.get("executor_id") or {}).get("value"):
                return "ExecutorInfo has no 'executor_id'", Resources()
            if not (executor.get("command") or {}).get("value"):
                return "ExecutorInfo has no 'command.value' (DLC emulator)", Resources()
            executor_id = executor["executor_id"]["value"]
            running = master.runtime.has_executor(
                agent.agent_id, framework.framework_id, executor_id
            )
            if not running:
                needed = needed + _resources(executor)
    except (KeyError, TypeError, ValueError) as exc:
        return f"Task uses invalid resources: {exc}", Resources()
    if not needed:
        return "Task uses no resources", Resources()
    gpus = needed.scalar("gpus")
    if gpus != int(gpus):
        return "The 'gpus' resource must be an unsigned integer", Resources()
    if not available.contains(needed):
        message = (
            f"Total resources {needed} required by task and its executor is more than "
            f"available {available}"
        )
        return message, Resources()
    return None, needed


def _allocation_problem(info: dict[str, Any], role: str) -> str | None:
    """Resources allocated to a role other than the offers' (Mesos checks ``allocation_info``;
    a resource without it gets the offers' role, as the master injects for single-role
    frameworks)."""
    resources = list(info.get("resources") or [])
    resources += list((info.get("executor") or {}).get("resources") or [])
    for res in resources:
        allocated = dig(res, "allocation_info", "role")
        if allocated is not None and allocated != role:
            return (
                f"Invalid resources: resource {res.get('name')} is allocated to role "
                f"'{allocated}' but the offers are allocated to '{role}'"
            )
    return None
