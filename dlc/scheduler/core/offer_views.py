"""Offers parsed once: an agent re-offering what it offered last round is not parsed again.

At openb scale every agent with anything free offers every round, and most offer exactly
what they offered before (nothing of theirs started or ended). Parsing 1,213 offers into
:class:`~dlc.scheduler.placement.model.OfferView`\\ s was most of a round with nothing queued
(issue 26). :class:`OfferParser` keeps each agent's last offer and its view; an offer whose
resources, attributes, hostname, address and fault domain equal the last one's (a deep
comparison, done in C) gets the same view under its new offer id. Offers are read-only to
DLC: the comparison trusts that nobody changes an offer dict after handing it to the core
(the adapter decodes each from JSON); an offer that *is* the cached object is parsed again
all the same.

A round with nothing queued needs none of that: its offers are declined by id.
:class:`IdleOffers` keeps each agent's latest such offer unparsed until something reads what
the agents offered (the next round with work, the cluster view); only an agent whose totals
the master did not give (offers may teach those) is learnt from at once.

Both read an offer only through the core's engine codec
(:class:`~dlc.scheduler.core.ports.EngineCodec`): its ids (:meth:`~EngineCodec.offer_ids`), the
parts its view is made of (:meth:`~EngineCodec.offer_inputs`) and, for a changed offer, its view
(:meth:`~EngineCodec.decode_offer`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

from dlc.errors import OfferError
from dlc.scheduler.core.ports import EngineCodec
from dlc.scheduler.placement.model import OfferView


def _same(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether an offer's inputs (:meth:`~dlc.scheduler.core.ports.EngineCodec.offer_inputs`; for
    Mesos its resources, attributes, hostname, url, domain) equal the cached ones; the very
    same list or dict is not trusted (it may have been changed in place)."""
    for a, b in zip(old, new, strict=True):
        if a is b and isinstance(a, list | dict):
            return False
    return old == new


class OfferParser:
    """Parses offers into views, reusing an agent's view while its offer is unchanged.

    Args:
        codec: the core's engine codec (its offers' ids and inputs, and the view of a changed
            one: :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_offer`, which raises
            OfferError when the offer is malformed).
    """

    def __init__(self, codec: EngineCodec) -> None:
        self._ids, self._inputs = codec.offer_ids, codec.offer_inputs
        self._decode = codec.decode_offer
        #: agent id -> (the fields of its last offer that the view reads, the view)
        self._last: dict[str, tuple[tuple[Any, ...], OfferView]] = {}

    def parse(
        self,
        offers: Iterable[dict[str, Any]],
        forget: bool = True,
        mark: Callable[[str], bool] | None = None,
    ) -> tuple[list[OfferView], list[str]]:
        """``(views, ids of malformed offers)``: the views equal the codec's fresh
        :meth:`~dlc.scheduler.core.ports.EngineCodec.decode_offer` of each offer; an offer it
        refuses, or one without both ids, is listed by its offer id (to decline). ``forget``: agents
        absent from ``offers`` leave the cache (a round's batch); ``False``: they stay (a
        catch-up of kept offers, :class:`IdleOffers`). ``mark``: agent id -> whether its
        view says ``shares_accounted`` (the agent's totals hold share blocks); the cached
        view keeps the mark, so an unchanged agent costs one copy a round, not two."""
        good: list[OfferView] = []
        bad: list[str] = []
        last = self._last
        ids, inputs = self._ids, self._inputs
        if forget:
            self._last = {}
        for offer in offers:
            offer_id, agent_id = ids(offer)
            if offer_id is None or agent_id is None:
                if offer_id:
                    bad.append(offer_id)
                continue
            fields = inputs(offer)
            try:
                cached = last.get(agent_id)
                if cached is not None and _same(cached[0], fields):
                    # keep the old fields: the new offer's are freed by the caller, not here
                    # (freeing 1,213 offers' resources was a fixed part of every round)
                    fields, view = cached
                    if view.offer_id != offer_id:
                        view = with_fields(view, offer_id=offer_id)
                else:
                    view = self._decode(offer)
                if mark is not None and view.shares_accounted != mark(agent_id):
                    view = with_fields(view, shares_accounted=not view.shares_accounted)
            except (OfferError, KeyError, TypeError):
                if offer_id:
                    bad.append(offer_id)
                continue
            self._last[agent_id] = (fields, view)
            good.append(view)
        return good, bad


class IdleOffers:
    """Offers of rounds with nothing queued, kept unparsed: each agent's latest batch.

    Such a round declines every offer by id; parsing 1,213 offers into views only to keep
    the inventory's picture of what each agent offered was most of it (issue 26). An agent
    the master gave exact totals learns nothing from an offer (offers are lower bounds), so
    its offers wait here until someone reads what the agents offered (:meth:`take`); offers
    of other agents are handed back to be learnt from at once.

    Args:
        ids: one engine offer -> ``(offer id, agent id)`` (the core's
            :meth:`~dlc.scheduler.core.ports.EngineCodec.offer_ids`).
    """

    def __init__(self, ids: Callable[[Mapping[str, Any]], tuple[str | None, str | None]]) -> None:
        self._ids = ids
        #: agent id -> its first offer of the latest round it offered in, and that round's
        #: time (one entry per agent, no list or tuple made per agent and round: a round with
        #: nothing queued made and freed 1,213 of each, issue 26)
        self._kept: dict[str, dict[str, Any]] = {}
        self._at: dict[str, float] = {}
        #: agent id -> its further offers of that round (rare: most agents offer once)
        self._more: dict[str, list[dict[str, Any]]] = {}

    def keep(
        self, offers: Iterable[dict[str, Any]], now: float, exact: Container[str]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """``(ids of every offer, to decline; the offers to learn from now)``: offers of
        agents in ``exact`` are kept, replacing what those agents offered before; an offer
        without an id is left out (it cannot be declined)."""
        ids: list[str] = []
        learn: list[dict[str, Any]] = []
        at, more, ids_of = self._at, self._more, self._ids
        batch: dict[str, dict[str, Any]] = {}
        for offer in offers:
            offer_id, agent_id = ids_of(offer)
            if offer_id is None:
                continue
            ids.append(offer_id)
            if agent_id is None:
                continue
            if agent_id not in exact:
                learn.append(offer)
            elif agent_id in batch:
                more.setdefault(agent_id, []).append(offer)
            else:
                batch[agent_id] = offer
                at[agent_id] = now
                if more:
                    more.pop(agent_id, None)
        # the offers this replaces are freed here, together, once the loop has read the new
        # ones: freeing 1,213 offers is most of a round with nothing queued, and freed inside
        # the loop, each as its agent's new offer came, they made that round about 5% longer
        # (0.3-0.4 ms of 6-7, bench/core_scale.py's empty rounds at full size, issue 26)
        self._kept.update(batch)
        return ids, learn

    def take(self) -> list[tuple[float, list[dict[str, Any]]]]:
        """The kept offers, grouped by the time they came (oldest first); forgets them."""
        by_time: dict[float, list[dict[str, Any]]] = {}
        for agent_id, offer in self._kept.items():
            group = by_time.setdefault(self._at[agent_id], [])
            group.append(offer)
            group.extend(self._more.get(agent_id, ()))
        self._kept, self._at, self._more = {}, {}, {}
        return sorted(by_time.items(), key=lambda item: item[0])

    def __bool__(self) -> bool:
        return bool(self._kept)


def with_fields(view: OfferView, **changes: Any) -> OfferView:
    """``dataclasses.replace(view, **changes)`` without re-running the dataclass's init:
    a view is plain data (no ``__post_init__``), and ``replace`` of 1,213 views a round
    cost more than the round's other per-offer work (issue 26)."""
    copy = object.__new__(OfferView)
    copy.__dict__.update(view.__dict__)
    copy.__dict__.update(changes)
    return copy
