"""Dynamic reservations of the GPUs DLC uses (``dlc scheduler --reserve``).

Between two jobs a GPU is free, and on a shared cluster the master may hand it to another
framework. With ``--reserve`` the scheduler turns the GPU resources a task takes (``gpus``,
``gpu_ids`` and the ``gpu_mem``/``gpu_core`` ranges) into resources reserved dynamically for the
offer's role, in the same ACCEPT as the launch (``RESERVE`` then ``LAUNCH``); from then on the
master offers them only to DLC's role. A GPU whose reservation sat unused in DLC's offers for
``idle_s`` is given back with ``UNRESERVE``.

Every dynamic reservation for one of DLC's roles that shows up in its offers is treated as
DLC's own (do not share DLC's role with another framework that reserves dynamically). Pure:
dicts in, dicts out; the caller passes the time. The core makes its :class:`Reserver` through
its engine codec (:meth:`dlc.mesos.codec.MesosCodec.reserver`), holds it as a
:class:`~dlc.scheduler.core.ports.ReservationKeeper` and hands it back to the codec's
:meth:`~dlc.mesos.codec.MesosCodec.echo_round` (:mod:`~dlc.mesos.echo`) each round.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dlc.topology.gpu_shares import STRIDE

#: the GPU resources a reservation covers (CPUs and memory stay shared)
GPU_RESOURCES = ("gpus", "gpu_ids", "gpu_mem", "gpu_core")


def _last(res: Mapping[str, Any]) -> Mapping[str, Any]:
    stack = res.get("reservations") or ()
    return stack[-1] if stack else {}


def is_dynamic_for(res: Mapping[str, Any], role: str) -> bool:
    """Whether a resource's last reservation is a dynamic one for ``role``."""
    last = _last(res)
    return last.get("type") == "DYNAMIC" and last.get("role") == role


def _reserved_for(res: Mapping[str, Any], role: str) -> bool:
    return _last(res).get("role") == role or (
        not res.get("reservations") and res.get("role") == role
    )


def gpu_indices(res: Mapping[str, Any]) -> set[int]:
    """The GPUs a ``gpu_ids`` item set or ``gpu_mem``/``gpu_core`` ranges touch."""
    if res.get("name") == "gpu_ids":
        return {int(i) for i in res.get("set", {}).get("item", ())}
    if res.get("type") == "RANGES" and res.get("name") in ("gpu_mem", "gpu_core"):
        out: set[int] = set()
        for r in res["ranges"].get("range", ()):
            out.update(range(int(r["begin"]) // STRIDE, int(r["end"]) // STRIDE + 1))
        return out
    return set()


@dataclass
class Reserver:
    """What ``--reserve`` keeps: the settings and when each reserved GPU became idle.

    Args:
        idle_s: how long a reserved GPU may sit unused in DLC's offers before UNRESERVE.
        principal: the framework's principal (Mesos requires it on the reservation when the
            framework has one, and forbids it otherwise).
    """

    idle_s: float = 300.0
    principal: str | None = None
    #: (agent id, GPU index) -> when it was first seen reserved and unused in an offer
    idle_since: dict[tuple[str, int], float] = field(default_factory=dict)
    #: (agent id, GPU index) DLC reserved or saw reserved for its role and has not released
    held: set[tuple[str, int]] = field(default_factory=set)

    def reserve(
        self, agent_id: str, role: str, resources: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A task's carved resources with its GPU resources reserved for ``role``.

        Returns:
            ``(task resources, resources to RESERVE first)``: entries not yet reserved for
            ``role`` get a dynamic layer on top of what they had (a refinement when a parent
            role reserved them statically).
        """
        out, to_reserve = [], []
        for res in resources:
            if res.get("name") in GPU_RESOURCES and not _reserved_for(res, role):
                res = self._layered(res, role)
                to_reserve.append(res)
            out.append(res)
            for index in gpu_indices(res):
                self.idle_since.pop((agent_id, index), None)
                self.held.add((agent_id, index))
        return out, to_reserve

    def _layered(self, res: Mapping[str, Any], role: str) -> dict[str, Any]:
        layer: dict[str, Any] = {"type": "DYNAMIC", "role": role}
        if self.principal:
            layer["principal"] = self.principal
        out = {k: copy.deepcopy(v) for k, v in res.items() if k not in ("role", "reservation")}
        out["reservations"] = [*copy.deepcopy(res.get("reservations") or []), layer]
        return out

    def idle(
        self, agent_id: str, role: str | None, left: Iterable[Mapping[str, Any]], now: float
    ) -> list[dict[str, Any]]:
        """The resources to UNRESERVE from what an agent's offers still hold after this
        round's launches (``left``): GPUs reserved dynamically for ``role`` that have sat unused
        for ``idle_s``. Starts the idle clock of the others."""
        if role is None:
            return []
        mine = [r for r in left if r.get("name") in GPU_RESOURCES and is_dynamic_for(r, role)]
        seen: set[int] = set()
        for res in mine:
            seen |= gpu_indices(res)
        due = set()
        for index in seen:
            since = self.idle_since.setdefault((agent_id, index), now)
            self.held.add((agent_id, index))
            if now - since >= self.idle_s:
                due.add(index)
        if not due:
            return []
        out = _cut_gpus(mine, due)
        for index in due:
            self.idle_since.pop((agent_id, index), None)
            self.held.discard((agent_id, index))
        return out

    def holding(self) -> bool:
        """Whether some GPU is still reserved (offers must keep coming to release it)."""
        return bool(self.held)


def _cut_gpus(entries: list[Mapping[str, Any]], due: set[int]) -> list[dict[str, Any]]:
    """The parts of ``entries`` that belong to GPUs ``due``: their ``gpu_ids`` items, their
    range blocks, and one ``gpus`` unit per id."""
    out: list[dict[str, Any]] = []
    whole = 0
    for res in entries:
        name = res.get("name")
        if name == "gpu_ids":
            items = [i for i in res["set"].get("item", ()) if int(i) in due]
            if items:
                out.append({**copy.deepcopy(dict(res)), "set": {"item": items}})
                whole += len(items)
        elif name in ("gpu_mem", "gpu_core"):
            ranges = [r for r in res["ranges"].get("range", ()) if int(r["begin"]) // STRIDE in due]
            if ranges:
                out.append({**copy.deepcopy(dict(res)), "ranges": {"range": ranges}})
    for res in entries:
        if res.get("name") == "gpus" and whole:
            take = min(whole, int(float(res["scalar"]["value"]) + 1e-9))
            if take:
                out.append({**copy.deepcopy(dict(res)), "scalar": {"value": float(take)}})
                whole -= take
    return out
