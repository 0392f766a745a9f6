"""Agents' GPU models as rows of a mix's access table (the ``gpuspec`` traces' pods).

A job may allow only some GPU models (``JobSpec.gpu_model``: ``T4``, ``V100M16|V100M32``), and
the mix placement scores fragmentation against keeps that restriction
(:func:`~dlc.scheduler.placement.whole_score.counted_mix`): an agent of another model counts
the room such a shape would use as fragmented, as in FGD's target workload. The measure reads
an agent's model as a row of :attr:`~dlc.scheduler.allocator.shares.MixArrays.access`; this
table gives each model name one row for the life of the process, so that the fragmentation
values the core keeps across rounds (:class:`~dlc.scheduler.placement.frag_state.FragCache`,
keyed by the row) stay valid. When no shape of a mix is restricted every agent reads row 0 (all
rows would be alike), so the values and keys are those of a model-blind measure. Pure.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from dlc.scheduler.allocator.shares import MixArrays

log = logging.getLogger(__name__)


#: the most rows the table holds: a cluster has a handful of GPU models, and agents that
#: advertise thousands of distinct ``gpu_model`` values (a broken node script, agents
#: re-registering under new names) would otherwise grow it, and the access table every mix
#: builds from it, without bound (red-team #47)
MAX_ROWS = 256


class ModelRows:
    """GPU model names -> access table rows; row 0 is an agent that names no model.

    Past :data:`MAX_ROWS` names a new name reads row 0, as an agent naming no model: the
    fragmentation measure then counts its room as fragmented for every restricted shape (which
    GPUs a job may get is still checked against the agent's real model by placement)."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.names: list[str] = [""]
        self._row: dict[str, int] = {"": 0}
        self._max_rows = max_rows
        self._warned = False

    def row(self, name: str) -> int:
        """The row of ``name`` (a new one the first time, row 0 once the table is full)."""
        row = self._row.get(name)
        if row is None:
            if len(self.names) >= self._max_rows:
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "more than %d distinct agent gpu_model values (%.60r is one): further "
                        "ones count as naming no model in the fragmentation measure",
                        self._max_rows - 1, name,
                    )  # fmt: skip
                return 0
            row = self._row[name] = len(self.names)
            self.names.append(name)
        return row

    def of_slots(self, slots: Sequence[object], mix: MixArrays) -> np.ndarray:
        """The rows of the models of ``slots`` (offer slots or views, :func:`agent_model`)
        under ``mix``: all 0 when no shape of it is restricted (nothing is read), else each
        model's own, with ``mix``'s access table grown to cover any new one."""
        if not mix.constrained:
            return np.zeros(len(slots), dtype=np.int64)
        names = map(agent_model, slots)
        out = np.fromiter(map(self.row, names), dtype=np.int64, count=len(slots))
        mix.cover(self.names)
        return out


#: one table per process: rows never change, so any cache keyed by them stays right
MODELS = ModelRows()


def pressure(mix: MixArrays, rows: np.ndarray, hosts: np.ndarray | None = None) -> np.ndarray:
    """Per agent (its model ``rows``, :meth:`ModelRows.of_slots`): how much of the expected
    workload only some models can host and this agent's model can, per agent of that model
    among ``rows`` (only those ``hosts`` marks, when given: the agents that can take the job
    placed, so that the answer does not depend on which other agents the round offers); 0
    everywhere when no shape of ``mix`` is restricted.

    Placement breaks ties of the (bucketed) fragmentation growth by this first: a job that
    may run anywhere then goes to the model least needed by the jobs that cannot, per agent
    left of it. The measure alone does not: a restricted shape's part of the mix is often
    below one tie bucket, and the best-fit tie-break that follows prefers the small agents,
    which on openb are the scarce models (2-GPU P100 and T4, 4-GPU V100M16)."""
    if not mix.constrained or not len(rows):
        return np.zeros(len(rows))
    restricted = np.fromiter(
        (bool(s.gpu_models) for s in mix.shapes), dtype=bool, count=len(mix.shapes)
    )
    need = mix.access[:, restricted] @ mix.weight[restricted]
    count = np.bincount(rows if hosts is None else rows[hosts], minlength=len(need))
    out: np.ndarray = need[rows] / np.maximum(count[rows], 1)
    return out


#: how much free room each model keeps for the restricted demand it can host, as a multiple of
#: that demand's part of the expected GPU demand (see :func:`reserved`)
RESERVE = 1.0

#: what a share pays on the agents of a kept model (:func:`reserved`, under :data:`RESERVE`),
#: in the placement cost's tie buckets (``ScoreParams.tie_milli``); 0 (the default): shares
#: ignore the reserve. Measured, not shipped: see :func:`share_keep_cost`
SHARE_KEEP_COST = 0.0


def reserved(
    mix: MixArrays,
    rows: np.ndarray,
    free: np.ndarray,
    hosts: np.ndarray | None = None,
    reserve: float | None = None,
) -> np.ndarray:
    """Per agent (its model ``rows``, its free GPU thousandths ``free``): whether its model is
    kept for restricted demand, i.e. its free room among the agents ``hosts`` marks is less than
    ``reserve`` times the part of the expected GPU demand (weight x GPU thousandths) that
    restricted shapes its model can host make, of all their free room. All ``False`` when no
    shape of ``mix`` is restricted.

    Whole-GPU placement (``WholeScore.order``) tries such agents last: a job that may run
    elsewhere goes elsewhere, one restricted to kept models has only them (or none kept) and
    is placed as before. Why: the measure alone let jobs that may run anywhere fill the scarce
    models early (a restricted shape's part of the mix is below one tie bucket; best fit and the
    CPU cap prefer the small and the CPU-rich agents), and the pods restricted to them failed
    from 20% of demand on (``gpuspec33``; docs/simulator.md, "Model reserve"). Shares are not
    ordered by it (on ``gpuspec33`` seed 44 that cost 0.8 points at 130%, 0.14 without): they
    pay :func:`share_keep_cost` on a kept model's agents instead."""
    if reserve is None:
        reserve = RESERVE
    if not mix.constrained or not len(rows) or reserve <= 0:
        return np.zeros(len(rows), dtype=bool)
    restricted = np.fromiter(
        (bool(s.gpu_models) for s in mix.shapes), dtype=bool, count=len(mix.shapes)
    )
    demand = mix.weight * mix.milli * mix.num
    total_demand = demand.sum()
    if total_demand <= 0:
        return np.zeros(len(rows), dtype=bool)
    need = mix.access[:, restricted] @ demand[restricted] / total_demand
    live = np.ones(len(rows), dtype=bool) if hosts is None else hosts
    room = np.bincount(rows[live], weights=free[live], minlength=len(need)).astype(float)
    total = room.sum()
    kept = (need > 0) & (room < reserve * need * total)
    out: np.ndarray = kept[rows]
    return out


def share_keep_cost(
    mix: MixArrays, rows: np.ndarray, free: np.ndarray, cost: float | None = None
) -> np.ndarray:
    """Per agent a share fits (its model ``rows``, its free GPU thousandths ``free``): what
    placing the share there adds to its cost, in tie buckets: ``cost`` (default
    :data:`SHARE_KEEP_COST`) where its model is kept (:func:`reserved`, among these agents),
    else 0.

    Why: shares that may run anywhere used up the scarce models' GPUs mid-load while the
    whole-GPU jobs kept off them (``gpuspec10`` seed 42: unrestricted shares held 121 of the 265
    P100 GPUs at 26% of demand, and the P100-only shares failed from there on). Not on by
    default: at 2 buckets ``gpuspec10``'s worst mid-load step of the 3-seed mean goes from
    -0.32 to -0.19 below FGD, but ``gpuspec33`` loses 0.22 points at 130% (kept agents last, as
    whole-GPU jobs have them, lost 0.75 on its seed 44): displaced to G2 for the whole run, the
    unrestricted shares strand room there (docs/simulator.md, "Share keep")."""
    if cost is None:
        cost = SHARE_KEEP_COST
    if cost <= 0:
        return np.zeros(len(rows))
    out: np.ndarray = reserved(mix, rows, free) * cost
    return out


def agent_model(slot: object) -> str:
    """The ``gpu_model`` attribute of an offer slot or view (``""``: none)."""
    attributes = getattr(slot, "attributes", None) or {}
    return str(attributes.get("gpu_model", ""))


__all__ = [
    "MAX_ROWS", "MODELS", "RESERVE", "SHARE_KEEP_COST", "ModelRows", "agent_model", "pressure",
    "reserved", "share_keep_cost",
]  # fmt: skip
