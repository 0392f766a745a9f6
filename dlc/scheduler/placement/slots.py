"""One agent's offers as a slot that shrinks while a round places tasks on it.

:class:`Slot` merges an agent's offers and keeps what is left of them; :func:`slots_of` builds
a round's slots (reusing the starting state a :class:`~dlc.scheduler.placement.round_memo.RoundMemo`
kept for agents that offer the same); :func:`unlink` drops the round's indexes from them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from dlc.scheduler.gangs.rendezvous import Ranges, ports_needed, take_port
from dlc.scheduler.gangs.topology import Locality
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.agent_facts import agent_text
from dlc.scheduler.placement.model import OfferView
from dlc.scheduler.placement.round_memo import RoundMemo, offer_key
from dlc.scheduler.placement.share_index import ShareRoom
from dlc.scheduler.placement.whole_score import FreeGpus, WholeScore
from dlc.topology import gpu_shares


class Slot:
    """One agent's offered resources, shrinking as tasks are placed on it."""

    # Defaults a round's 1,213 slots share until one changes them (a set and a tuple less
    # per slot: fewer young objects for the cyclic collector each round, issue 26).
    #: ports taken from this slot this round (a new set when ports are taken or given back)
    ports_taken: AbstractSet[int] = frozenset()
    #: whether anything was taken from (or given back to) this slot this round: one left
    #: untouched ends the round as it started (CarriedFailures reuses its snapshot)
    touched = False
    #: the offer ids of an agent with several offers this round (else its one view's)
    _offer_ids: tuple[str, ...] | None = None

    def __init__(self, offers: list[OfferView]):
        first = offers[0]
        self._first = first
        self.agent_id = first.agent_id
        self.hostname = first.hostname
        if len(offers) != 1:
            self._offer_ids = tuple(o.offer_id for o in offers)
        if len(offers) == 1:  # most agents (one sum over one offer each was a round's cost)
            self.cpus, self.mem, self.disk = first.cpus, first.mem_mib, first.disk_mib
            self.gpus, self.free = first.gpus, frozenset(first.gpu_ids)
            self.port_ranges: Ranges = tuple(sorted(first.ports))
        else:
            self.cpus = sum(o.cpus for o in offers)
            self.mem = sum(o.mem_mib for o in offers)
            self.disk = sum(o.disk_mib for o in offers)
            self.gpus = sum(o.gpus for o in offers)
            self.free = frozenset().union(*(o.gpu_ids for o in offers))
            self.port_ranges = tuple(sorted(r for o in offers for r in o.ports))
        self.attributes = first.attributes
        self.address = first.address or first.hostname
        self.port_count = sum(end - begin + 1 for begin, end in self.port_ranges)
        if len(offers) == 1:  # most agents: one offer, its ranges as the last round's
            self.gpu_mem = _normalised(tuple(first.gpu_mem))
            self.gpu_core = _normalised(tuple(first.gpu_core))
        else:
            self.gpu_mem = gpu_shares.normalise(r for o in offers for r in o.gpu_mem)
            self.gpu_core = gpu_shares.normalise(r for o in offers for r in o.gpu_core)
        #: the round's index of slots by free share room, told when the ranges change
        self.share_room: ShareRoom | None = None
        #: the round's whole-GPU scoring (whole_score), told when anything here changes
        self.whole_score: WholeScore | None = None
        #: the round's index of slots by free whole GPUs, told when ``free`` changes
        self.free_index: FreeGpus | None = None
        if self.gpu_mem or self.gpu_core or any(o.shares_accounted for o in offers):
            # an agent that accounts shares: a GPU any share holds part of is not whole
            self.free = _whole_of(self.free, self.gpu_mem, self.gpu_core)

    @property
    def offer_ids(self) -> tuple[str, ...]:
        """The ids of the agent's offers this slot holds."""
        ids = self._offer_ids
        return ids if ids is not None else (self._first.offer_id,)

    @functools.cached_property
    def locality(self) -> Locality:
        """Where the agent stands (read by gangs only: not built for every slot)."""
        return self._first.locality

    def take_ranges(self, take: gpu_shares.GpuRanges) -> None:
        """Consume ``take`` from what this agent's offers have left."""
        self.touched = True
        self.gpu_mem = gpu_shares.subtract(self.gpu_mem, take.mem)
        self.gpu_core = gpu_shares.subtract(self.gpu_core, take.core)
        if self.share_room is not None and (take.mem or take.core):
            self.share_room.refresh(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)
        # a GPU a share now holds part of is no longer whole for the jobs after it
        if take.mem or take.core:
            self.free = gpu_shares.whole_of(self.free, self.gpu_mem, self.gpu_core)
            if self.free_index is not None:
                self.free_index.changed(self)

    def give_ranges(self, take: gpu_shares.GpuRanges) -> None:
        """Give ``take`` back (a gang that did not fit whole)."""
        self.touched = True
        self.gpu_mem = gpu_shares.normalise(self.gpu_mem + take.mem)
        self.gpu_core = gpu_shares.normalise(self.gpu_core + take.core)
        if self.share_room is not None and (take.mem or take.core):
            self.share_room.refresh(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)

    def whole_take(self, ids: tuple[int, ...]) -> gpu_shares.GpuRanges:
        """The whole blocks of GPUs ``ids`` (nothing where the agent offers no ranges)."""
        if not ids or not (self.gpu_mem or self.gpu_core):
            return gpu_shares.GpuRanges()
        return gpu_shares.whole_gpu_take(ids, self.gpu_mem, self.gpu_core)

    def take_ports(self, count: int) -> tuple[int, ...] | None:
        """Take ``count`` free offered ports (``None``, taking nothing, when too few)."""
        self.touched = True
        got: list[int] = []
        for _ in range(count):
            port = take_port(self.port_ranges, self.ports_taken | set(got))
            if port is None:
                return None
            got.append(port)
        self.ports_taken = self.ports_taken | set(got)
        return tuple(got)

    def take(self, cpus: float, mem: float, disk: float, ids: tuple[int, ...], sign: int) -> None:
        """Take (``sign`` +1) or give back (-1) ``cpus``, ``mem``, ``disk`` and GPUs ``ids``."""
        self.touched = True
        self.cpus -= sign * cpus
        self.mem -= sign * mem
        self.disk -= sign * disk
        self.gpus -= sign * len(ids)
        self.free = self.free - set(ids) if sign > 0 else self.free | set(ids)
        if self.share_room is not None:
            self.share_room.scalars(self)
        if self.free_index is not None:
            self.free_index.changed(self)
        if self.whole_score is not None:
            self.whole_score.changed(self)


#: a slot's fields that belong to one round (offer ids, its view, ports taken): not kept
_ROUND_FIELDS = ("_offer_ids", "_first", "ports_taken", "kept_state", "touched")


def _kept_slot(view: OfferView, memo: RoundMemo) -> Slot:
    """A new slot of ``view`` alone, its starting state kept in ``memo``."""
    slot = Slot([view])
    share_backend(slot)  # kept with the state: every share round asks it of every agent
    state = {k: v for k, v in slot.__dict__.items() if k not in _ROUND_FIELDS}
    memo.keep_slot(view, state)
    slot.kept_state = state  # type: ignore[attr-defined]  # the share room reads it
    return slot


def _restored(view: OfferView, state: dict[str, Any]) -> Slot:
    """A slot of ``view``'s agent started from its kept ``state`` (no re-read of the offer)."""
    slot = object.__new__(Slot)
    fields = slot.__dict__
    fields.update(state)  # ports_taken, touched: the class's (none taken, untouched)
    fields["_first"] = view
    fields["kept_state"] = state  # what the slot started from (the share room copies its row)
    return slot


def slots_of(groups: Iterable[list[OfferView]], memo: RoundMemo | None) -> list[Slot]:
    """The slot of each agent's offers, its starting state kept in ``memo`` while the agent
    offers the same (building 1,213 slots was a fixed part of every round, issue 26), in one
    loop: an agent that offers what it offered before (its kept key equal to its view's,
    :meth:`RoundMemo.slot_states`) costs a tuple comparison and a copy of its kept state (a
    call per agent and a field-by-field comparison of 1,213 views were most of it)."""
    if memo is None:
        return [Slot(group) for group in groups]
    kept_of, key_of = memo.slot_states().get, offer_key
    slots: list[Slot] = []
    for group in groups:
        view = group[0]
        kept = kept_of(view.agent_id) if len(group) == 1 else None
        if len(group) != 1:
            slots.append(Slot(group))  # several offers of one agent: not kept
        elif kept is None or kept[0] != key_of(view):
            slots.append(_kept_slot(view, memo))  # a changed offer: built and kept
        else:
            slots.append(_restored(view, kept[1]))
    return slots


@functools.lru_cache(maxsize=8192)
def _normalised(ranges: Ranges) -> Ranges:
    """:func:`gpu_shares.normalise`, kept per ranges: an agent offers the same ranges round
    after round until something of it starts or ends (1,213 slots a round, issue 26)."""
    return gpu_shares.normalise(ranges)


@functools.lru_cache(maxsize=8192)
def _whole_of(free: frozenset[int], mem: Ranges, core: Ranges) -> frozenset[int]:
    """:func:`gpu_shares.whole_of`, kept per agent state (as :func:`_normalised`)."""
    return gpu_shares.whole_of(free, mem, core)


def room_for_one(slot: Slot, spec: JobSpec, cpus: float, mem: float) -> bool:
    """Whether ``slot`` has the amounts for one node of a gang now (nothing is taken)."""
    if slot.cpus < cpus - 1e-9 or slot.mem < mem - 1e-9 or slot.disk < spec.disk_mib - 1e-9:
        return False
    if slot.gpus < spec.gpus - 1e-9 or len(slot.free) < spec.gpus:
        return False
    # ports are counted, not taken: the ranges are disjoint and every taken port is in them
    return slot.port_count - len(slot.ports_taken) >= ports_needed(
        2 if spec.is_gang else 1, spec.interactive
    )


def share_backend(slot: Slot) -> str:
    """The agent's share backend (``dlc_sharing``; ``watchdog`` when it names none), kept
    on the slot: every share of a round asks it of every agent."""
    backend: str | None = getattr(slot, "_share_backend", None)
    if backend is None:
        backend = agent_text(slot.attributes, gpu_shares.ATTR_SHARING) or "watchdog"
        slot._share_backend = backend  # type: ignore[attr-defined]  # a cache set on demand
    return backend


def unlink(slots: list[Slot]) -> None:
    """Drop the round's indexes from its slots. Each index holds the slots and each slot
    its indexes, so without this a round's 1,213 slots, their offer views and rows (about
    7,400 objects) are freed only by the cyclic collector, and under the scheduler's raised
    collector thresholds (:mod:`dlc.app.interpreter`) they piled up between its passes
    (peak RSS +40 MiB at openb scale)."""
    for slot in slots:
        slot.free_index = None
        slot.share_room = None
        slot.whole_score = None
