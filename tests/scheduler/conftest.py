"""Fixtures shared by the scheduler's tests."""

from __future__ import annotations

import pytest

from dlc.mesos import codec, offers


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Offer ids parsed from scratch (the Mesos codec's ``offer_view`` counted, which every
    core and ``OfferParser(MesosCodec())`` parse through)."""
    seen: list[str] = []
    real = offers.offer_view

    def counting(body):
        seen.append(body["id"]["value"])
        return real(body)

    monkeypatch.setattr(codec, "offer_view", counting)
    return seen
