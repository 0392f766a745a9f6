"""Agents' GPU models as rows of a mix's access table (the ``gpuspec`` traces' pods).

A job may allow only some GPU models (``JobSpec.gpu_model``: ``T4``, ``V100M16|V100M32``), and
the mix placement scores fragmentation against keeps that restriction
(:func:`~dlc.scheduler.whole_score.counted_mix`): an agent of another model counts the room
such a shape would use as fragmented, as in FGD's target workload. The measure reads an
agent's model as a row of :attr:`~dlc.scheduler.allocator.shares.MixArrays.access`; this
table gives each model name one row for the life of the process, so that the fragmentation
values the core keeps across rounds (:class:`~dlc.scheduler.frag_state.FragCache`, keyed by
the row) stay valid. When no shape of a mix is restricted every agent reads row 0 (all
rows would be alike), so the values and keys are those of a model-blind measure. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from dlc.scheduler.allocator.shares import MixArrays


class ModelRows:
    """GPU model names -> access table rows; row 0 is an agent that names no model."""

    def __init__(self) -> None:
        self.names: list[str] = [""]
        self._row: dict[str, int] = {"": 0}

    def row(self, name: str) -> int:
        """The row of ``name`` (a new one the first time)."""
        row = self._row.get(name)
        if row is None:
            row = self._row[name] = len(self.names)
            self.names.append(name)
        return row

    def rows(self, names: Iterable[str], mix: MixArrays) -> np.ndarray:
        """The rows of ``names`` under ``mix``: all 0 when no shape of it is restricted, else
        each name's own, with ``mix``'s access table grown to cover any new one."""
        listed = list(names)
        if not mix.constrained:
            return np.zeros(len(listed), dtype=np.int64)
        out = np.fromiter(map(self.row, listed), dtype=np.int64, count=len(listed))
        mix.cover(self.names)
        return out


#: one table per process: rows never change, so any cache keyed by them stays right
MODELS = ModelRows()


def agent_model(slot: object) -> str:
    """The ``gpu_model`` attribute of an offer slot or view (``""``: none)."""
    attributes = getattr(slot, "attributes", None) or {}
    return str(attributes.get("gpu_model", ""))


__all__ = ["MODELS", "ModelRows", "agent_model"]
