"""Builders of Mesos v1 JSON offers and jobs for scheduler tests, and placement on such
offers (:func:`place`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dlc.mesos.offers import offer_view
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement import placer as placement
from dlc.scheduler.placement.model import OfferView
from dlc.topology.model import Gpu, PairLink, PcieLevel, Topology


def offer(
    oid: str,
    agent: str,
    gpus: list[int] | None = None,
    cpus: float = 16,
    mem: float = 65536,
    disk: float = 0,
    attrs: dict[str, str] | None = None,
    gpus_scalar: float | None = None,
    ports: tuple[tuple[int, int], ...] = ((31000, 31009),),
) -> dict:
    """A v1 Offer dict as the master sends it (gpu_ids items are strings; ``ports`` as the
    agents' default ``ports`` resource)."""
    ids = list(range(8)) if gpus is None else gpus
    resources = [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}, "role": "*"},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}, "role": "*"},
    ]
    if disk:
        resources.append({"name": "disk", "type": "SCALAR", "scalar": {"value": disk}})
    if ids or gpus_scalar:
        scalar = float(len(ids)) if gpus_scalar is None else gpus_scalar
        resources.append({"name": "gpus", "type": "SCALAR", "scalar": {"value": scalar}})
    if ids:
        resources.append(
            {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in ids]}, "role": "*"}
        )
    if ports:
        ranges = [{"begin": b, "end": e} for b, e in ports]
        resources.append({"name": "ports", "type": "RANGES", "ranges": {"range": ranges}})
    return {
        "id": {"value": oid},
        "agent_id": {"value": agent},
        "framework_id": {"value": "fw"},
        "hostname": f"host-{agent}",
        "resources": resources,
        "attributes": [
            {"name": k, "type": "TEXT", "text": {"value": v}} for k, v in (attrs or {}).items()
        ],
    }


def job(
    job_id: str,
    gpus: int = 1,
    nodes: int = 1,
    priority: int = 0,
    at: float = 0.0,
    **spec,
) -> Job:
    """A queued job using an explicit image (no catalog lookup)."""
    body = {"image": "busybox", "gpus": gpus, "nodes": nodes, "priority": priority, **spec}
    return Job(job_id, "alice", JobSpec.from_dict(body), submitted_at=at)


def pairs_topology(n: int, nvlinked: set[tuple[int, int]], model: str | None = None) -> Topology:
    """n GPUs, the given pairs NVLinked, everything else SYS."""
    links = {
        (a, b): PairLink(a, b, PcieLevel.SYS, 2 if (a, b) in nvlinked else 0)
        for a in range(n)
        for b in range(a + 1, n)
    }
    return Topology(tuple(Gpu(i, model=model) for i in range(n)), links, source="test")


def place(offers: Sequence[Mapping[str, Any] | OfferView], *args: Any, **kwargs: Any) -> Any:
    """:func:`dlc.scheduler.placement.placer.place` on offers as the tests write them: a v1 Offer
    dict is decoded as the core's Mesos codec decodes it (the core places on views only)."""
    views = [o if isinstance(o, OfferView) else offer_view(o) for o in offers]
    return placement.place(views, *args, **kwargs)
