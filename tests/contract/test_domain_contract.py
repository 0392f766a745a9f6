"""An agent's fault domain (``mesos-agent --domain``) on offers and in /master/slaves.

DLC places gangs by zone (docs/scheduler.md, gangs across racks), reading ``domain`` from
each offer and from ``/master/slaves``; the emulator must render it as the real master does.
The real one shares its flags between master and agent (one process), so both sit in the
same region, as a region-unaware framework needs to see the agent's offers.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from dlc.mesos.emulator.model import fault_domain
from dlc.mesos.offers import offer_view
from tests.contract.conftest import AGENT_ATTRIBUTES, AGENT_RESOURCES, Harness
from tests.real_mesos import real_mesos_master

DOMAIN = {"fault_domain": {"region": {"name": "eu-west"}, "zone": {"name": "eu-west-1a"}}}


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def domain_master(request, tmp_path):
    """A master whose one agent is in zone eu-west-1a of region eu-west."""
    text = fault_domain("eu-west", "eu-west-1a")
    if request.param == "emulator":
        from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator

        agent = AgentSpec(resources=AGENT_RESOURCES, attributes=AGENT_ATTRIBUTES, domain=text)
        with MesosEmulator(agents=[agent], work_dir=tmp_path / "emulator") as emulator:
            yield emulator.address
        return
    with real_mesos_master(
        tmp_path / "mesos",
        MESOS_RESOURCES=AGENT_RESOURCES,
        MESOS_ATTRIBUTES=AGENT_ATTRIBUTES,
        MESOS_DOMAIN=text,
    ) as mesos:
        yield mesos.address


def test_offer_and_master_slaves_carry_the_agent_domain(domain_master):
    harness = Harness(domain_master).start()
    try:
        offer = harness.offer()
    finally:
        harness.stop()
    assert offer["domain"] == DOMAIN
    assert offer_view(offer).domain == ("eu-west", "eu-west-1a")
    with urllib.request.urlopen(f"http://{domain_master}/master/slaves", timeout=10) as resp:
        (slave,) = json.load(resp)["slaves"]
    assert slave["domain"] == DOMAIN


def test_an_agent_without_domain_has_none(mesos_master):
    harness = Harness(mesos_master).start()
    try:
        offer = harness.offer()
    finally:
        harness.stop()
    assert "domain" not in offer
    with urllib.request.urlopen(f"http://{mesos_master}/master/slaves", timeout=10) as resp:
        assert all("domain" not in s for s in json.load(resp)["slaves"])
