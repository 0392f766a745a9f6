"""One offer round's agents as arrays of free share room, kept current per agent change.

A share used to read every agent with room in Python
(:func:`~dlc.scheduler.placement.share_placement.choose_share`): per agent its ranges split by
GPU, the fit checked GPU by GPU, an ``AgentView`` built, then the lot packed into arrays for
the fragmentation measure. At openb scale (1,213 agents, most with some room on a GPU) that
was over half of an offer round (issue 26). :class:`ShareRoom` holds, per slot (row) and GPU
(column), the free MiB, the free thousandths and the GPU's memory, plus the slot's CPUs,
memory and disk; a slot whose ranges or amounts change says so (:meth:`ShareRoom.refresh`,
:meth:`ShareRoom.scalars`) and only its row is read again. A share's fit, its ordering and
the measure's arrays are then a few array operations over all rows.

Reading a row (ranges -> per-GPU amounts) is kept across rounds for ranges seen before, in
the caller's row cache (:class:`~dlc.scheduler.placement.round_memo.RoundMemo` of the core:
one per core, never shared between cores): an agent whose offer did not change since the last
round is not read again. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dlc.topology.gpu_shares import Ranges

#: per GPU of a slot: free MiB, free thousandths, memory (share_placement's ``_Amounts``)
Amounts = tuple[dict[int, int], dict[int, int], dict[int, int]]

#: rows read before: (gpu_mem, gpu_core, id of the topology) -> (topology, row)
RowCache = dict[tuple[Ranges, Ranges, int], tuple[Any, tuple[np.ndarray, ...]]]
#: how many rows a row cache keeps before it starts again (a few per agent is plenty)
_ROWS_KEPT = 20_000


def _row(
    slot: Any, topology: Any, amounts_of: Callable[[Any, Any], Amounts], rows: RowCache
) -> tuple[np.ndarray, ...]:
    """``(present, free MiB, free thousandths, memory)`` per GPU of ``slot`` (index order)."""
    key = (slot.gpu_mem, slot.gpu_core, id(topology))
    hit = rows.get(key)
    if hit is not None and hit[0] is topology:
        return hit[1]
    free_mem, free_core, totals = amounts_of(slot, topology)
    width = max(free_core, default=-1) + 1
    present = np.zeros(width, dtype=bool)
    mem = np.zeros(width, dtype=np.int64)
    core = np.zeros(width, dtype=np.int64)
    total = np.zeros(width, dtype=np.int64)
    for index, left in free_core.items():
        present[index] = True
        core[index] = left
        mem[index] = free_mem.get(index, 0)
        total[index] = totals[index]
    row = (present, mem, core, total)
    if len(rows) >= _ROWS_KEPT:
        rows.clear()
    rows[key] = (topology, row)
    return row


class KeptFill:
    """The share room's rows as the caller's last round filled them, by slot state.

    A slot built from a kept starting state (``slot.kept_state``, :mod:`~dlc.scheduler.
    round_memo`) starts each round as the last round's slot of that state started, so its
    row is copied from the last fill in one array operation instead of read again (refilling
    1,213 rows from the row cache was a fixed part of every round, issue 26). Slots without
    a kept state (a changed offer, placement without a memo) are read as before.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the last fill."""
        #: the states of the last fill's rows, and by id of the state its row
        self.states: list[Any] = []
        self.row_of: dict[int, int] = {}
        self.topology_of: Callable[[dict[str, str]], Any] | None = None
        self.arrays: tuple[np.ndarray, ...] = ()

    def keep(self, room: ShareRoom, states: list[Any]) -> None:
        """Remember ``room``'s rows as filled (before the round changes any)."""
        self.states = states
        self.row_of = {id(state): k for k, state in enumerate(states) if state is not None}
        self.topology_of = room._topology_of  # noqa: SLF001 - the room's own reader
        self.arrays = tuple(a.copy() for a in (room.present, room.free_mem, room.free_core,
                                               room.total, room.has_core))  # fmt: skip

    def sources(self, states: list[Any]) -> list[int]:
        """The last fill's row of slots of each of ``states`` (-1: none), in one call for a
        round's 1,213 slots."""
        row_of, kept, out = self.row_of.get, self.states, []
        for state in states:
            k = -1 if state is None else row_of(id(state), -1)
            out.append(k if k >= 0 and kept[k] is state else -1)
        return out


class ShareRoom:
    """The slots of one placement round as arrays of free share room.

    Args:
        slots: the round's slots (``slots.Slot``), in their order; ties go to the
            first, as they did when every share read them in this order.
        topology_of: agent attributes -> decoded topology (a GPU's memory comes from it).
        amounts_of: ``(slot, topology) -> (free MiB, free thousandths, memory)`` per GPU.
        rows: rows read in earlier rounds, kept by the caller (default: this round's own).
        kept: the caller's last fill (:class:`KeptFill`): rows of slots whose starting state
            is unchanged are copied from it, and this fill is kept there for the next round.

    Row ``k`` is ``slots[k]``. :meth:`at_least` still lists slots by the most compute one
    of their GPUs has free (the per-GPU scan, used where exclusivity or a GPU model asks a
    question per GPU, reads only those).
    """

    def __init__(
        self,
        slots: Sequence[Any],
        topology_of: Callable[[dict[str, str]], Any],
        amounts_of: Callable[[Any, Any], Amounts],
        rows: RowCache | None = None,
        kept: KeptFill | None = None,
    ):
        self.slots = slots
        self._rows: RowCache = rows if rows is not None else {}
        self._kept = kept
        self._topology_of = topology_of
        self._amounts_of = amounts_of
        self._row_of = {id(s): k for k, s in enumerate(slots)}
        n = len(slots)
        self.width = 1
        self.present = np.zeros((n, 1), dtype=bool)
        self.free_mem = np.zeros((n, 1), dtype=np.int64)
        self.free_core = np.zeros((n, 1), dtype=np.int64)
        self.total = np.zeros((n, 1), dtype=np.int64)
        self.has_core = np.zeros(n, dtype=bool)
        self.room = np.zeros(n, dtype=np.int64)  # the most thousandths one GPU has free
        self.cpus = np.zeros(n)
        self.mem = np.zeros(n)
        self.disk = np.zeros(n)
        #: answers of :meth:`at_least` until a slot changes
        self._found: dict[int, list[Any]] = {}
        self._fill(slots)

    def _fill(self, slots: Sequence[Any]) -> None:
        """Read every slot: rows of slots whose starting state the last fill read are copied
        from it (:class:`KeptFill`), the others come from the row cache or are read."""
        n = len(slots)
        self.cpus = np.fromiter((s.cpus for s in slots), dtype=float, count=n)
        self.mem = np.fromiter((s.mem for s in slots), dtype=float, count=n)
        self.disk = np.fromiter((s.disk for s in slots), dtype=float, count=n)
        rows = []
        topology_of, amounts_of, cache = self._topology_of, self._amounts_of, self._rows
        kept = self._kept
        if kept is not None and kept.topology_of is not topology_of:
            kept.reset()  # rows read with another topology reader: nothing of them holds
        states = [getattr(s, "kept_state", None) for s in slots]
        source = kept.sources(states) if kept is not None else [-1] * n
        for k, slot in enumerate(slots):
            if source[k] < 0 and slot.gpu_core:
                topology = topology_of(slot.attributes)
                rows.append((k, _row(slot, topology, amounts_of, cache)))
        self.has_core[[k for k, _ in rows]] = True
        if kept is not None and kept.arrays:
            self._copy_kept(kept, np.array(source, dtype=np.int64))
        if rows:
            self._widen(max(len(row[0]) for _, row in rows))
        by_width: dict[int, list[tuple[int, tuple[np.ndarray, ...]]]] = {}
        for k, row in rows:  # one array write per GPU count, not four per agent
            by_width.setdefault(len(row[0]), []).append((k, row))
        for width, group in by_width.items():
            ks = [k for k, _ in group]
            for column, target in enumerate((self.present, self.free_mem, self.free_core,
                                             self.total)):  # fmt: skip
                target[ks, :width] = np.stack([row[column] for _, row in group])
        self.room = np.where(self.present, self.free_core, 0).max(axis=1)
        if kept is not None:
            kept.keep(self, states)

    def _copy_kept(self, kept: KeptFill, source: np.ndarray) -> None:
        """Copy the rows of slots whose state the last fill read (``source[k]``: its row)."""
        hit = np.flatnonzero(source >= 0)
        if not len(hit):
            return
        present, free_mem, free_core, total, has_core = kept.arrays
        self._widen(present.shape[1])
        width, src = present.shape[1], source[hit]
        self.present[hit, :width] = present[src]
        self.free_mem[hit, :width] = free_mem[src]
        self.free_core[hit, :width] = free_core[src]
        self.total[hit, :width] = total[src]
        self.has_core[hit] = has_core[src]

    def covers(self, slots: Sequence[Any]) -> bool:
        """Whether ``slots`` is the list indexed (a job holding reserved agents has its own)."""
        return slots is self.slots

    def _widen(self, width: int) -> None:
        more = width - self.width
        if more <= 0:
            return
        pad = ((0, 0), (0, more))
        self.present = np.pad(self.present, pad)
        self.free_mem = np.pad(self.free_mem, pad)
        self.free_core = np.pad(self.free_core, pad)
        self.total = np.pad(self.total, pad)
        self.width = width

    def refresh(self, slot: Any) -> None:
        """Re-read ``slot``: its ranges (or anything else) changed."""
        self._found.clear()
        k = self._row_of[id(slot)]
        self.scalars(slot)
        self.has_core[k] = bool(slot.gpu_core)
        if not slot.gpu_core:
            self.present[k] = False
            self.room[k] = 0
            return
        topology = self._topology_of(slot.attributes)
        present, mem, core, total = _row(slot, topology, self._amounts_of, self._rows)
        if len(present) > self.width:
            self._widen(len(present))
        width = len(present)
        self.present[k] = False
        self.present[k, :width] = present
        self.free_mem[k, :width] = mem
        self.free_core[k, :width] = core
        self.total[k, :width] = total
        self.room[k] = core.max(initial=0)

    def scalars(self, slot: Any) -> None:
        """Re-read ``slot``'s CPUs, memory and disk (a task took or gave some back)."""
        k = self._row_of[id(slot)]
        self.cpus[k], self.mem[k], self.disk[k] = slot.cpus, slot.mem, slot.disk

    def shareable(self) -> bool:
        """Whether any slot has share ranges left."""
        return bool(self.has_core.any())

    def at_least(self, milli: int) -> list[Any]:
        """Slots with a GPU of at least ``milli`` thousandths free, in the original order."""
        found = self._found.get(milli)
        if found is None:
            rows = np.flatnonzero(self.has_core & (self.room >= milli))
            found = self._found[milli] = [self.slots[k] for k in rows.tolist()]
        return found
