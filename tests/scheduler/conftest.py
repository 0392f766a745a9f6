"""Fixtures shared by the scheduler's tests."""

from __future__ import annotations

import pytest

from dlc.scheduler import offer_views
from dlc.scheduler.placement import OfferView


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Offer ids parsed from scratch (``OfferView.from_mesos`` counted, as offer_views calls it)."""
    seen: list[str] = []
    real = OfferView.from_mesos

    def counting(body):
        seen.append(body["id"]["value"])
        return real(body)

    monkeypatch.setattr(offer_views.OfferView, "from_mesos", staticmethod(counting))
    return seen
