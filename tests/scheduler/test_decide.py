"""The pure decision function: same inputs, same decision; nothing written, nothing mutated."""

from __future__ import annotations

import dataclasses

import pytest

from dlc.scheduler.decide import DecideRequest, decide
from dlc.scheduler.inventory import Inventory
from dlc.scheduler.placement import OfferView, PlacementConfig

from .helpers import job, offer


def _inventory(views):
    inventory = Inventory()
    inventory.note_offers(views, at=0.0)
    return inventory


def test_decide_launches_declines_and_explains_without_side_effects():
    views = [
        OfferView.from_mesos(offer("o1", "a1", [0, 1])),
        OfferView.from_mesos(offer("o2", "a2", [])),
    ]
    inventory = _inventory(views)
    version = inventory.version
    queue = [job("j1", gpus=2), job("j2", gpus=1), job("j3", gpus=4)]
    request = DecideRequest(
        queue=queue, inventory=inventory, offers=views, config=PlacementConfig(), now=100.0
    )
    first, again = decide(request), decide(request)
    assert first.placed_jobs == ["j1"] and [x.gpu_ids for x in first.launches] == [(0, 1)]
    assert first.declines == ["o2"]
    assert set(first.waiting) == {"j2", "j3"}
    assert first.impossible == {"j3": first.waiting["j3"]}
    assert "impossible on the current agents" in first.waiting["j3"]
    assert (first.launches, first.declines, first.waiting) == (
        again.launches, again.declines, again.waiting,
    )  # fmt: skip
    assert inventory.version == version and queue[0].tasks == ()


def test_reserved_agents_take_only_their_holder():
    views = [OfferView.from_mesos(offer("o1", "a1", [0, 1]))]
    request = DecideRequest(
        queue=[job("small", gpus=1), job("big", gpus=2)],
        inventory=_inventory(views),
        offers=views,
        config=PlacementConfig(),
        now=0.0,
        reserved={"a1": "big"},
    )
    decision = decide(request)
    assert decision.placed_jobs == ["big"] and "small" in decision.waiting


def test_a_request_is_named_and_frozen():
    views = [OfferView.from_mesos(offer("o1", "a1", [0, 1]))]
    with pytest.raises(TypeError):  # keywords only: no caller counts positions
        DecideRequest([], _inventory(views), views, PlacementConfig(), 0.0)  # type: ignore[misc]
    request = DecideRequest(
        queue=[], inventory=_inventory(views), offers=views, config=PlacementConfig(), now=0.0
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.now = 1.0  # type: ignore[misc]
    assert decide(request).declines == ["o1"]
