"""What one core's offer rounds keep from round to round, per agent (issue 26).

At openb scale every agent with anything free offers every round, and most offer exactly
what they offered the round before. Placement starts each round from a fresh slot per agent
(:class:`~dlc.scheduler.placement.slots.Slot`: normalised ranges, whole GPUs, ports) and a fresh
row of free share room per agent (:mod:`~dlc.scheduler.placement.share_index`); both are pure
functions of what the agent offered. :class:`RoundMemo` keeps them per agent while its
offer is unchanged:

* a slot's starting state, reused when the agent's new view holds the very same values
  (:data:`offer_key`: every field but the offer id, compared as one tuple, identity first:
  :class:`~dlc.scheduler.core.offer_views.OfferParser` hands an agent whose offer did not change
  the same objects under a new offer id, so an agent whose offer changed in any field is
  always read again). :class:`~dlc.scheduler.placement.shape_cache.CarriedFailures` keeps each kept
  state's starting snapshot too, so an agent that offers the same and took nothing is known
  not to have grown by identity;
* each queued job's impossibility answer for one inventory version
  (:meth:`RoundMemo.impossible`): a queued job's spec never changes, so only jobs new to
  the queue are asked again until the inventory changes (10,000 queued jobs were asked
  every round: about 20 ms of a steady round). The few answered impossible are listed
  (:meth:`RoundMemo.impossible_ids`), and :attr:`RoundMemo.covers` marks the pinned queue
  every job of which has an answer: the next round looks up only the jobs that entered
  the queue since (the job book's pin lists them), not each of the 10,000;
* the share rows (:attr:`RoundMemo.rows`), keyed by the ranges they were read from, and the
  last round's share room by slot state (:class:`~dlc.scheduler.placement.share_index.KeptFill`):
  a slot built from a kept state gets its row copied, with the others', in one array step;
* the fragmentation of every agent state measured so far (:attr:`RoundMemo.frag`,
  :class:`~dlc.scheduler.placement.frag_state.FragCache`), under a mix held until the core's mix
  drifts from it: whole-GPU jobs and shares measure only states not seen before.

One memo belongs to one core (it is not shared between cores in a process); placement
without one (tests, the direct replay) reads everything each call.
Pure: no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from dlc.scheduler.placement.frag_state import FragCache
from dlc.scheduler.placement.share_index import KeptFill, RowCache

#: the fields of an offer view (:class:`~dlc.scheduler.placement.model.OfferView`) a slot is built
#: from: everything but the offer id, read in one C call. Two keys compare as tuples, each
#: field by identity first (an unchanged offer's view holds the very objects of the last one,
#: :class:`~dlc.scheduler.core.offer_views.OfferParser`), then by value: a slot is a pure function
#: of these values, so a view parsed again with equal values may reuse it too
offer_key = operator.attrgetter(
    "agent_id", "gpu_ids", "gpu_mem", "gpu_core", "attributes", "ports", "cpus", "mem_mib",
    "disk_mib", "gpus", "shares_accounted", "hostname", "address", "domain",
)  # fmt: skip


class RoundMemo:
    """Per agent, what placement derived from its offer, while the offer stays the same."""

    def __init__(self) -> None:
        #: agent id -> (:data:`offer_key` of the view the slot state was built from, that state)
        self._slots: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        #: share rows read in earlier rounds
        #: (:class:`~dlc.scheduler.placement.share_index.ShareRoom`): (gpu_mem, gpu_core, id of the
        #: topology) -> (topology, row)
        self.rows: RowCache = {}
        #: the last round's share room rows, by slot state
        self.share_fill = KeptFill()
        #: the fragmentation of agent states measured in earlier rounds, under a held mix
        #: (whole-GPU jobs and shares read it; frag_state says when the mix is replaced)
        self.frag = FragCache()
        #: the inventory version :attr:`_impossible` answers for
        self._impossible_version: object = None
        #: job id -> why it cannot run on the known agents (``None``: it can)
        self._impossible: dict[str, str | None] = {}
        #: the ids of :attr:`_impossible` whose answer is not ``None`` (few: a round whose
        #: queue holds none of them takes the queue as it is, without reading the jobs)
        self._impossible_ids: set[str] = set()
        #: a mark of the last queue (the book's pin and the inventory version) every job of
        #: which :attr:`_impossible` answers for; ``None``: none known
        self.covers: object = None

    def impossible(self, version: object, queued: int) -> dict[str, str | None]:
        """Job id -> impossibility answer, valid for inventory ``version`` (emptied when
        the version changes, or when it holds far more jobs than the ``queued`` ones: the
        answers of jobs that left the queue). The caller fills in the jobs it lacks with
        :meth:`answer` (read only: a write past it would not be in :meth:`impossible_ids`)."""
        if version != self._impossible_version or len(self._impossible) > 2 * queued + 1024:
            self._impossible = {}
            self._impossible_ids = set()
            self._impossible_version = version
            self.covers = None
        return self._impossible

    def answer(self, job_id: str, why: str | None) -> None:
        """Keep a job's impossibility answer for the version :meth:`impossible` was last
        called with."""
        self._impossible[job_id] = why
        if why is not None:  # a job's answer changes only with the version (it starts again)
            self._impossible_ids.add(job_id)

    def impossible_ids(self) -> set[str]:
        """The jobs answered impossible under the current version (queued or not)."""
        return self._impossible_ids

    def slot_state(self, view: Any) -> dict[str, Any] | None:
        """The starting state of the slot of ``view``'s agent, if its offer is unchanged."""
        kept = self._slots.get(view.agent_id)
        if kept is None or kept[0] != offer_key(view):
            return None
        return kept[1]

    def slot_states(self) -> Mapping[str, tuple[tuple[Any, ...], dict[str, Any]]]:
        """Agent id -> (:data:`offer_key` of the view its kept state was built from, the
        state): :meth:`slot_state` for a caller reading 1,213 agents in one loop."""
        return self._slots

    def keep_slot(self, view: Any, state: dict[str, Any]) -> None:
        """Remember the starting state of the slot built from ``view``."""
        self._slots[view.agent_id] = (offer_key(view), state)

    def forget(self, agent_id: str) -> None:
        """Drop what is kept of one agent (it left the cluster)."""
        self._slots.pop(agent_id, None)

    def __len__(self) -> int:
        return len(self._slots)
