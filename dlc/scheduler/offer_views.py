"""Offers parsed once: an agent re-offering what it offered last round is not parsed again.

At openb scale every agent with anything free offers every round, and most offer exactly
what they offered before (nothing of theirs started or ended). Parsing 1,213 offers into
:class:`~dlc.scheduler.placement.OfferView`\\ s was most of a round with nothing queued
(issue 26). :class:`OfferParser` keeps each agent's last offer and its view; an offer whose
resources, attributes, hostname and address equal the last one's (a deep comparison, done in
C) gets the same view under its new offer id. Offers are read-only to DLC: the comparison
trusts that nobody changes an offer dict after handing it to the core (the adapter decodes
each from JSON); an offer that *is* the cached object is parsed again all the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from dlc.errors import OfferError
from dlc.scheduler.placement import OfferView

_KEYS = ("resources", "attributes", "hostname", "url")


class OfferParser:
    """Parses offers into views, reusing an agent's view while its offer is unchanged."""

    def __init__(self) -> None:
        #: agent id -> (the fields of its last offer that the view reads, the view)
        self._last: dict[str, tuple[tuple[Any, ...], OfferView]] = {}

    def parse(self, offers: Iterable[dict[str, Any]]) -> tuple[list[OfferView], list[str]]:
        """``(views, ids of malformed offers)`` as :func:`~dlc.scheduler.placement.
        parse_offers` returns them (the views equal a fresh parse's)."""
        good: list[OfferView] = []
        bad: list[str] = []
        last, self._last = self._last, {}
        for offer in offers:
            fields = tuple(offer.get(k) for k in _KEYS)
            try:
                agent_id = offer["agent_id"]["value"]
                offer_id = offer["id"]["value"]
                view = self._same(last.get(agent_id), fields, offer_id)
                if view is None:
                    view = OfferView.from_mesos(offer)
            except (OfferError, KeyError, TypeError):
                oid = (offer.get("id") or {}).get("value") if isinstance(offer, dict) else None
                if oid:
                    bad.append(oid)
                continue
            self._last[agent_id] = (fields, view)
            good.append(view)
        return good, bad

    @staticmethod
    def _same(
        cached: tuple[tuple[Any, ...], OfferView] | None, fields: tuple[Any, ...], offer_id: str
    ) -> OfferView | None:
        """The cached view under ``offer_id`` when ``fields`` equal the cached ones."""
        if cached is None:
            return None
        old, view = cached
        if any(a is b and isinstance(a, list | dict) for a, b in zip(old, fields, strict=True)):
            return None  # the same list or dict: it may have been changed in place
        if old != fields:
            return None
        return view if view.offer_id == offer_id else replace(view, offer_id=offer_id)
