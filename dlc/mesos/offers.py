"""Mesos offers as the core reads them: a v1 ``Offer`` JSON dict into an
:class:`~dlc.scheduler.placement.model.OfferView` (the Mesos side of the core's
:class:`~dlc.scheduler.core.ports.EngineCodec`, :meth:`~dlc.mesos.codec.MesosCodec.decode_offer`).

What a view holds: the scalar resources summed over the offer's entries (``cpus``, ``mem``,
``disk``, ``gpus``), the ``gpu_ids`` SET items less the GPUs another framework took through the
plain ``gpus`` scalar, the ``gpu_mem``/``gpu_core`` share blocks of the GPUs left, the ``ports``
RANGES, the attributes as text, the agent's advertised address and its fault domain. A task's
resources are cut from an offer's entries as offered by :mod:`~dlc.mesos.echo`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dlc.errors import OfferError
from dlc.mesos.agents import domain_names
from dlc.scheduler.gangs.rendezvous import Ranges
from dlc.scheduler.placement.model import OfferView
from dlc.topology import gpu_shares


def offer_ids(offer: Any) -> tuple[str | None, str | None]:
    """``(offer["id"]["value"], offer["agent_id"]["value"])`` as text, ``None`` for a part the
    offer lacks. On the way of every offer of a round (the idle round's whole cost), so the
    well-formed case is two lookups and two type checks; anything else takes the slow path."""
    try:
        offer_id, agent_id = offer["id"]["value"], offer["agent_id"]["value"]
    except (KeyError, TypeError, IndexError):
        pass
    else:
        if type(offer_id) is str and type(agent_id) is str:
            return offer_id, agent_id
    return _value_of(offer, "id"), _value_of(offer, "agent_id")


def _value_of(offer: Any, key: str) -> str | None:
    """``offer[key]["value"]`` as text where the offer has it, else ``None``."""
    part = offer.get(key) if isinstance(offer, Mapping) else None
    value = part.get("value") if isinstance(part, Mapping) else None
    return None if value is None else str(value)


def offer_view(offer: Mapping[str, Any]) -> OfferView:
    """Parse a v1 ``Offer`` JSON dict.

    Raises:
        OfferError: the offer lacks ids or carries a malformed resource.
    """
    try:
        scalars: dict[str, float] = {}
        gpu_ids: set[int] = set()
        resources = offer.get("resources", ())
        for res in resources:
            if res.get("type") == "SCALAR":
                name = res["name"]
                scalars[name] = scalars.get(name, 0.0) + float(res["scalar"]["value"])
            elif res.get("name") == "gpu_ids" and res.get("type") == "SET":
                gpu_ids.update(int(i) for i in res["set"].get("item", ()))
        # another framework took whole GPUs through the plain scalar: no gpu_ids item
        # says which, so those ids (and their share blocks) count as taken
        taken = taken_by_scalar(scalars.get("gpus", 0.0), frozenset(gpu_ids))
        mem = gpu_shares.ranges_from_resources(resources, gpu_shares.GPU_MEM)
        core = gpu_shares.ranges_from_resources(resources, gpu_shares.GPU_CORE)
        if taken:
            mem, core = _without_gpus(mem, taken), _without_gpus(core, taken)
        return OfferView(
            offer_id=offer["id"]["value"],
            agent_id=offer["agent_id"]["value"],
            hostname=offer.get("hostname", ""),
            cpus=scalars.get("cpus", 0.0),
            mem_mib=scalars.get("mem", 0.0),
            disk_mib=scalars.get("disk", 0.0),
            gpus=scalars.get("gpus", 0.0),
            gpu_ids=frozenset(gpu_ids) - taken,
            attributes=_attributes(offer.get("attributes", ())),
            ports=parse_port_ranges(offer.get("resources", ())),
            address=_agent_address(offer),
            gpu_mem=mem,
            gpu_core=core,
            domain=domain_names(offer.get("domain")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise OfferError(f"malformed offer {offer.get('id')}: {exc!r}") from None


def taken_by_scalar(gpus: float, gpu_ids: frozenset[int]) -> frozenset[int]:
    """GPU ids to treat as taken when an offer's ``gpus`` is lower than its ``gpu_ids`` count.

    DLC's tasks always take ``gpus:k`` with k ``gpu_ids`` items, so the two agree until another
    framework takes whole GPUs through the plain ``gpus`` scalar alone: Mesos's GPU allocator
    then hands it the lowest-numbered free GPUs, and no ``gpu_ids`` item says which. DLC
    treats the difference as taken and picks those same lowest ids (Mesos's order), so it never
    offers a job a GPU that is, by the master's count, not free. ``docs/roles.md`` explains
    why reserving the GPUs for DLC's role is the real fix.
    """
    missing = len(gpu_ids) - int(gpus + 1e-9)
    if missing <= 0:
        return frozenset()
    return frozenset(sorted(gpu_ids)[:missing])


def _without_gpus(ranges: gpu_shares.Ranges, gpus: frozenset[int]) -> gpu_shares.Ranges:
    """``ranges`` without the blocks of GPUs ``gpus``."""
    per = gpu_shares.per_gpu(ranges)
    return gpu_shares.normalise(r for i, rs in per.items() if i not in gpus for r in rs)


def _agent_address(offer: Mapping[str, Any]) -> str:
    """The agent's advertised IP (the one the master reaches, so peers can too; no DNS
    needed), else the offer's hostname."""
    address = (offer.get("url") or {}).get("address") or {}
    return str(address.get("ip") or offer.get("hostname", ""))


def _attributes(attrs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Agent attributes as text (scalars rendered without ``.0``)."""
    out: dict[str, str] = {}
    for attr in attrs:
        kind = attr.get("type")
        if kind == "TEXT":
            out[attr["name"]] = attr["text"]["value"]
        elif kind == "SCALAR":
            value = float(attr["scalar"]["value"])
            out[attr["name"]] = str(int(value)) if value.is_integer() else str(value)
    return out


def parse_port_ranges(resources: Iterable[Mapping[str, Any]]) -> Ranges:
    """The ``ports`` RANGES of v1 offer resources, merged and sorted."""
    out: list[tuple[int, int]] = []
    for res in resources:
        if res.get("name") == "ports" and res.get("type") == "RANGES":
            for item in res.get("ranges", {}).get("range", ()):
                out.append((int(item["begin"]), int(item["end"])))
    return tuple(sorted(out))
