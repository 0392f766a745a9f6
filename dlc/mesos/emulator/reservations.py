"""RESERVE and UNRESERVE offer operations of the emulated master (dynamic reservations).

As on Mesos 1.11: a RESERVE turns offered unreserved resources (or resources reserved for an
ancestor role, with ``RESERVATION_REFINEMENT``) into resources reserved dynamically for the
offers' role; an UNRESERVE gives them back. Both change the agent's totals, so the reservation
outlives the offer: the reserved resources are offered only to that role from then on. An
operation the offers cannot hold is dropped with a log line, as the master does when it gets no
operation feedback to send.
"""

from __future__ import annotations

import logging
from typing import Any

from dlc.mesos.emulator.model import Agent, Framework, dig
from dlc.mesos.resources import Resources, is_dynamic, reserved_role

logger = logging.getLogger(__name__)


def apply_reservation(
    master: Any, framework: Framework, agent: Agent, operation: dict[str, Any],
    available: Resources, role: str,
) -> Resources:  # fmt: skip
    """Applies one RESERVE/UNRESERVE to the agent; returns what the offers hold afterwards."""
    kind = str(operation.get("type"))
    try:
        wanted = Resources.from_json(dig(operation, kind.lower(), "resources") or [])
    except (KeyError, TypeError, ValueError) as exc:
        return _drop(kind, f"invalid resources: {exc}", available)
    problem = _check(wanted, role)
    if problem:
        return _drop(kind, problem, available)
    below = wanted.popped()
    before, after = (below, wanted) if kind == "RESERVE" else (wanted, below)
    if not available.contains(before):
        return _drop(kind, f"{before} is not available in the offers ({available})", available)
    agent.total = agent.total - before + after
    master.allocator.request()
    return available - before + after


def _check(wanted: Resources, role: str) -> str | None:
    if not wanted:
        return "no resources"
    for key in wanted.by_reservation():
        if not is_dynamic(key):
            return "only dynamic reservations can be made or removed through offers"
        if reserved_role(key) != role:
            return f"the reservation's role {reserved_role(key)!r} is not the offers' role {role!r}"
    return None


def _drop(kind: str, why: str, available: Resources) -> Resources:
    logger.warning("Dropping %s offer operation: %s", kind, why)
    return available
