"""The master's agents as the core reads them: ``/master/slaves`` entries into
:class:`~dlc.scheduler.placement.inventory.AgentTotals` (the Mesos side of the core's
:class:`~dlc.scheduler.core.ports.EngineCodec`, :meth:`~dlc.mesos.codec.MesosCodec.decode_agents`).

What a record holds: the agent's ``total_resources`` (or ``resources``) less what
``reserved_resources`` keeps for roles that are not DLC's, its attributes as text, the role
DLC's GPUs there are reserved for and its fault domain. The framework and the dashboard fetch
the list (:func:`dlc.mesos.master.fetch_slaves`) and hand it to
:meth:`~dlc.scheduler.core.facade.SchedulerCore.update_agents`, whose codec decodes it. Pure: no
I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dlc.errors import FieldError
from dlc.scheduler.placement.inventory import AgentTotals
from dlc.topology import gpu_shares


def decode_agents(
    slaves: Iterable[Mapping[str, Any]], roles: tuple[str, ...] = ()
) -> list[AgentTotals]:
    """The totals of the active, well-formed entries of a ``/master/slaves`` ``slaves`` list,
    in its order (:func:`agent_totals`; the others are left out)."""
    return [totals for slave in slaves if (totals := agent_totals(slave, roles)) is not None]


def agent_totals(slave: Mapping[str, Any], roles: tuple[str, ...] = ()) -> AgentTotals | None:
    """An :class:`~dlc.scheduler.placement.inventory.AgentTotals` from one ``/master/slaves`` entry
    (``None``: inactive or malformed).

    Reads ``total_resources`` or ``resources`` (``{"cpus": 4.0, "gpu_ids": "{0, 1}"}``)
    and ``attributes`` (name -> text or number). What ``reserved_resources`` holds for a role
    that is not one of ``roles`` (nor an ancestor of one) is left out: the master never
    offers it to DLC, so a job that only it could hold must not be admitted.
    """
    try:
        if not slave.get("active", True):
            return None
        totals = slave.get("total_resources") or slave.get("resources") or {}
        attributes = slave.get("attributes") or {}
        others, gpu_role = _reservations(slave.get("reserved_resources") or {}, roles)
        return AgentTotals(
            agent_id=str(slave["id"]),
            hostname=str(slave.get("hostname", "")),
            gpu_ids=_set_items(totals.get("gpu_ids")).difference(
                *(_set_items(o.get("gpu_ids")) for o in others)
            ),
            cpus=float(totals.get("cpus", 0.0)) - sum(float(o.get("cpus", 0)) for o in others),
            mem_mib=float(totals.get("mem", 0.0)) - sum(float(o.get("mem", 0)) for o in others),
            disk_mib=float(totals.get("disk", 0.0)) - sum(float(o.get("disk", 0)) for o in others),
            attributes={str(k): _attribute_text(v) for k, v in attributes.items()},
            exact=True,
            gpu_memory=_gpu_memory(totals.get(gpu_shares.GPU_MEM), others),
            role=gpu_role,
            domain=domain_names(slave.get("domain")),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def domain_names(domain: Any) -> tuple[str, str]:
    """``(region, zone)`` of a Mesos ``DomainInfo`` JSON (an agent's or an offer's);
    ``("", "")`` where absent or malformed (a bad domain must not stop placement)."""
    if not isinstance(domain, Mapping):
        return "", ""
    fault = domain.get("fault_domain")
    if not isinstance(fault, Mapping):
        return "", ""

    def name(part: str) -> str:
        value = fault.get(part)
        return str(value.get("name") or "") if isinstance(value, Mapping) else ""

    return name("region"), name("zone")


def _reservations(
    reserved: Mapping[str, Mapping[str, Any]], roles: tuple[str, ...]
) -> tuple[list[Mapping[str, Any]], str | None]:
    """``/master/slaves`` ``reserved_resources`` split: the summaries reserved for roles that
    are not DLC's (nor a parent of one), and the first of DLC's roles holding a GPU there."""

    def covers(role: str, mine: str) -> bool:
        return mine == role or mine.startswith(role + "/")

    others = [s for role, s in reserved.items() if not any(covers(role, r) for r in roles)]
    gpu_role = next(
        (role for r in roles for role, s in reserved.items()
         if covers(role, r) and float(s.get("gpus", 0) or 0) > 0),
        None,
    )  # fmt: skip
    return others, gpu_role


def _gpu_memory(value: Any, others: Sequence[Mapping[str, Any]] = ()) -> dict[int, int]:
    """``"[0-32767, 1048576-1081343]"`` (the master's text for RANGES) -> GPU -> MiB, less the
    blocks reserved for ``others`` (other roles' ``reserved_resources``)."""
    if not isinstance(value, str) or not value.strip():
        return {}
    try:
        ranges = gpu_shares.parse_ranges_text(value)
        for other in others:
            if other.get(gpu_shares.GPU_MEM):
                taken = gpu_shares.parse_ranges_text(other[gpu_shares.GPU_MEM])
                ranges = gpu_shares.subtract(ranges, taken)
        return gpu_shares.amounts(ranges)
    except FieldError:
        return {}  # a malformed resource: the agent takes no shares, it is not dropped


def _set_items(value: Any) -> frozenset[int]:
    """``"{0, 1}"`` (as the master renders a SET) or a list -> GPU ids."""
    if not value:
        return frozenset()
    items = value.strip("{}").split(",") if isinstance(value, str) else value
    return frozenset(int(str(i).strip()) for i in items if str(i).strip())


def _attribute_text(value: Any) -> str:
    """An attribute's value as offers carry it: the master renders SCALAR ones as numbers
    (``3.0``), offers as text without the ``.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
