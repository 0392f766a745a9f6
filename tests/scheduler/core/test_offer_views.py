"""Offers parsed once while agents offer the same (issue 26; dlc/scheduler/core/offer_views.py)."""

from __future__ import annotations

import copy

from dlc.mesos.codec import MesosCodec
from dlc.scheduler.core.offer_views import OfferParser

from ..helpers import offer


def test_an_unchanged_offer_reuses_its_view_under_the_new_id(parses):
    parser = OfferParser(MesosCodec())
    parser.parse([offer("o1", "a1"), offer("o2", "a2")])
    views, bad = parser.parse([offer("o3", "a1"), offer("o4", "a2", cpus=3)])
    assert parses == ["o1", "o2", "o4"] and not bad  # o3 is a1's o1 again
    fresh = [MesosCodec().decode_offer(o) for o in (offer("o3", "a1"), offer("o4", "a2", cpus=3))]
    assert views == fresh  # what the codec the core uses makes of them afresh


def test_an_offer_changed_in_place_is_parsed_again(parses):
    parser = OfferParser(MesosCodec())
    body = offer("o1", "a1", cpus=4)
    parser.parse([body])
    body["resources"][0]["scalar"]["value"] = 8.0
    body["id"]["value"] = "o2"
    views, _ = parser.parse([body])
    assert views[0].cpus == 8.0 and parses == ["o1", "o2"]


def test_a_malformed_offer_is_declined_and_not_cached(parses):
    parser = OfferParser(MesosCodec())
    broken = copy.deepcopy(offer("o1", "a1"))
    broken["resources"][0]["scalar"] = {}
    views, bad = parser.parse([broken])
    assert views == [] and bad == ["o1"]
    views, bad = parser.parse([offer("o2", "a1")])
    assert len(views) == 1 and not bad


def test_an_offer_without_ids_is_declined_by_the_id_it_has(parses):
    parser = OfferParser(MesosCodec())
    no_agent = {"id": {"value": "o2"}, "resources": []}
    no_id = {"agent_id": {"value": "a3"}, "resources": []}
    views, bad = parser.parse([offer("o1", "a1"), no_agent, no_id])
    assert [v.offer_id for v in views] == ["o1"] and bad == ["o2"] and parses == ["o1"]


def _in_zone(body: dict, zone: str) -> dict:
    body["domain"] = {"fault_domain": {"region": {"name": "r1"}, "zone": {"name": zone}}}
    return body


def test_an_agent_whose_fault_domain_alone_changed_is_parsed_again(parses):
    parser = OfferParser(MesosCodec())
    parser.parse([_in_zone(offer("o1", "a1"), "z1")])
    views, bad = parser.parse([_in_zone(offer("o2", "a1"), "z2")])  # moved; nothing else did
    assert views[0].domain == ("r1", "z2") and parses == ["o1", "o2"] and not bad
    views, _ = parser.parse([_in_zone(offer("o3", "a1"), "z2")])  # the same again: reused
    assert views[0].domain == ("r1", "z2") and parses == ["o1", "o2"]
