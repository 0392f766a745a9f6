"""Gangs across racks: one switch first, then one rack, then one zone; required or preferred."""

from __future__ import annotations

import pytest

from dlc.errors import JobSpecError
from dlc.mesos.agents import decode_agents
from dlc.mesos.offers import offer_view
from dlc.scheduler.gangs.topology import GangTopology, Locality, choose_group
from dlc.scheduler.placement.model import PlacementConfig
from tests.scheduler.helpers import job, offer, place

FF = PlacementConfig(policy="first-fit")


def racked(oid, agent, rack="", switch="", zone="", gpus=None):
    """An offer of an agent in ``zone`` (fault domain), ``rack`` and ``switch``."""
    attrs = {}
    if rack:
        attrs["dlc_rack"] = rack
    if switch:
        attrs["dlc_switch"] = switch
    body = offer(oid, agent, gpus, attrs=attrs)
    if zone:
        body["domain"] = {"fault_domain": {"region": {"name": "eu"}, "zone": {"name": zone}}}
    return body


def agents_of(result, job_id):
    return sorted(x.agent_id for x in result.launches if x.job_id == job_id)


def test_offer_domain_and_rack_attributes_make_the_locality():
    view = offer_view(racked("o1", "a1", rack="r1", switch="s1", zone="z1"))
    assert view.locality == Locality("eu", "z1", "r1", "s1")
    assert offer_view(offer("o2", "a2")).locality == Locality()


def test_gang_goes_to_one_switch_even_when_best_fit_would_spread_it():
    # a1 (switch s1) and b1 (switch s2) fit best (4 GPUs free each): without the preference
    # the gang took them; s2 has two 8-GPU agents, which hold the gang under one switch
    offers = [
        racked("o1", "a1", "r1", "s1", gpus=[0, 1, 2, 3]),
        racked("o2", "b1", "r1", "s2", gpus=[0, 1, 2, 3]),
        racked("o3", "b2", "r1", "s2"),
        racked("o4", "b3", "r1", "s2"),
    ]
    result = place(offers, [job("g", gpus=4, nodes=3)], FF)
    assert agents_of(result, "g") == ["b1", "b2", "b3"]


def test_one_rack_when_no_switch_holds_the_gang():
    offers = [
        racked("o1", "a1", "r1", "s1", gpus=[0, 1]),
        racked("o2", "b1", "r2", "s2"),
        racked("o3", "b2", "r2", "s3"),
        racked("o4", "c1", "r3", "s4", gpus=[0, 1]),
    ]
    result = place(offers, [job("g", gpus=2, nodes=2)], FF)
    assert agents_of(result, "g") == ["b1", "b2"]


def test_one_zone_when_no_rack_holds_the_gang():
    offers = [
        racked("o1", "a1", "r1", zone="z1", gpus=[0, 1]),
        racked("o2", "b1", "r2", zone="z2"),
        racked("o3", "b2", "r3", zone="z2"),
    ]
    result = place(offers, [job("g", gpus=2, nodes=2)], FF)
    assert agents_of(result, "g") == ["b1", "b2"]


def test_the_smallest_group_that_holds_the_gang_keeps_big_ones_whole():
    offers = [racked(f"o{i}", f"a{i}", "r1", "s1") for i in range(4)]
    offers += [racked(f"p{i}", f"b{i}", "r2", "s2") for i in range(2)]
    result = place(offers, [job("g", gpus=8, nodes=2)], FF)
    assert agents_of(result, "g") == ["b0", "b1"]


def test_preferred_spreads_when_no_group_holds_the_gang():
    offers = [racked("o1", "a1", "r1", "s1"), racked("o2", "b1", "r2", "s2")]
    result = place(offers, [job("g", gpus=8, nodes=2, gang_topology="switch")], FF)
    assert agents_of(result, "g") == ["a1", "b1"]


def test_required_waits_naming_what_is_missing():
    offers = [racked("o1", "a1", "r1", "s1"), racked("o2", "b1", "r1", "s2")]
    result = place(offers, [job("g", gpus=8, nodes=2, gang_topology="switch:required")], FF)
    assert result.launches == []
    assert result.waiting["g"] == "no switch has 2 agents with 8 free GPUs each"
    # the rack holds both: required at rack level runs
    rack = place(offers, [job("g", gpus=8, nodes=2, gang_topology="rack:required")], FF)
    assert agents_of(rack, "g") == ["a1", "b1"]


def test_required_waits_where_agents_do_not_say_where_they_stand():
    offers = [offer("o1", "a1"), offer("o2", "a2")]
    result = place(offers, [job("g", gpus=8, nodes=2, gang_topology="rack:required")], FF)
    assert result.waiting["g"] == "no rack has 2 agents with 8 free GPUs each"
    assert agents_of(place(offers, [job("g", gpus=8, nodes=2)], FF), "g") == ["a1", "a2"]


def test_switch_names_are_scoped_by_rack():
    # both racks call their switch tor1: they are different switches
    offers = [racked("o1", "a1", "r1", "tor1"), racked("o2", "b1", "r2", "tor1")]
    result = place(offers, [job("g", gpus=8, nodes=2, gang_topology="switch:required")], FF)
    assert result.launches == []


def test_agents_that_cannot_take_a_node_do_not_count_for_a_group():
    # s1 has two agents, but one has only 2 free GPUs: the gang goes to s2
    offers = [
        racked("o1", "a1", "r1", "s1"),
        racked("o2", "a2", "r1", "s1", gpus=[0, 1]),
        racked("o3", "b1", "r1", "s2"),
        racked("o4", "b2", "r1", "s2"),
    ]
    result = place(offers, [job("g", gpus=4, nodes=2, gang_topology="switch:required")], FF)
    assert agents_of(result, "g") == ["b1", "b2"]


def test_choose_group_order_and_required_cutoff():
    where = {
        "a": Locality("", "z", "r1", "s1"),
        "b": Locality("", "z", "r1", "s2"),
        "c": Locality("", "z", "r2", "s3"),
    }
    chosen = choose_group(["a", "b", "c"], 2, where.get, GangTopology("switch", "preferred"))
    assert (chosen.level, chosen.order[:2]) == ("rack", ["a", "b"])
    assert choose_group(["a", "b", "c"], 2, where.get, GangTopology("switch", "required")) is None
    zone = choose_group(["c", "a", "b"], 3, where.get, GangTopology("zone", "required"))
    assert (zone.level, zone.order) == ("zone", ["c", "a", "b"])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("rack", "rack:preferred"),
        ("zone:required", "zone:required"),
        ({"level": "switch", "mode": "required"}, "switch:required"),
    ],
)
def test_spec_field_forms(value, text):
    assert job("g", nodes=2, gang_topology=value).spec.gang_topology == text


@pytest.mark.parametrize(
    ("value", "nodes", "words"),
    [
        ("row", 2, "level 'row' is not one of switch, rack, zone"),
        ("rack:must", 2, "mode 'must' is not one of preferred, required"),
        ({"level": "rack", "strict": True}, 2, "unknown key 'strict'"),
        ("rack", 1, "pass --nodes 2 or more"),
    ],
)
def test_spec_field_errors_name_the_field_and_the_fix(value, nodes, words):
    with pytest.raises(JobSpecError) as err:
        job("g", nodes=nodes, gang_topology=value)
    text = str(err.value)
    assert text.startswith("gang_topology: ") and words in text and "\n" not in text
    assert "--gang-topology" in text or "--nodes" in text


def _slave(agent, rack, switch):
    return {"id": agent, "hostname": agent, "active": True,
            "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"},
            "attributes": {"dlc_rack": rack, "dlc_switch": switch}}  # fmt: skip


def test_admission_refuses_a_required_gang_no_group_could_ever_hold():
    from dlc.scheduler.placement.inventory import Inventory

    inventory = Inventory()
    inventory.replace_agents(
        decode_agents(
            [_slave("a1", "r1", "s1"), _slave("a2", "r1", "s2"), _slave("a3", "r2", "s3")]
        )
    )
    spec = job("g", gpus=8, nodes=2, gang_topology="switch:required").spec
    error = inventory.impossible(spec)
    assert str(error) == (
        "gang_topology: no switch has 2 agents that can run this job (the largest has 1); "
        "pass --gang-topology rack:required or --gang-topology switch:preferred"
    )
    assert (
        inventory.impossible(job("g", gpus=8, nodes=2, gang_topology="rack:required").spec) is None
    )
    assert inventory.impossible(job("g", gpus=8, nodes=2, gang_topology="switch").spec) is None


@pytest.mark.parametrize("flag", ["--rack", "--switch"])
def test_node_config_refuses_a_rack_or_switch_mesos_would_misread(flag):
    from click.testing import CliRunner

    from dlc.cli.main import cli
    from tests.fixture_files import complete_topo_files

    topo = next(p for p in complete_topo_files() if p.name.startswith("dgx1-v100"))
    result = CliRunner().invoke(cli, ["node-config", "--from-file", str(topo), flag, "12"])
    kind = flag.removeprefix("--")
    assert result.exit_code != 0
    assert f"{kind}: '12' is not a valid {kind} name; pass {flag} with" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_passed_over_gang_reserves_agents_of_one_switch(tmp_path):
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.store.sqlite import JobStore

    config = CoreConfig(placement=FF, max_skips=2, reservation_s=600)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None))
    core.update_agents([_slave("a1", "r1", "s1"), _slave("a2", "r1", "s1"),
                        _slave("b1", "r2", "s2"), _slave("b2", "r2", "s2")])  # fmt: skip
    gang = core.submit("alice", job("g", gpus=8, nodes=2).spec)
    # a1 and b1 have the most GPUs free, in two switches: never 8 free anywhere
    offers = [racked("o1", "a1", "r1", "s1", gpus=[0, 1, 2, 3, 4, 5]),
              racked("o2", "b1", "r2", "s2", gpus=[0, 1, 2, 3, 4, 5]),
              racked("o3", "a2", "r1", "s1", gpus=[0]),
              racked("o4", "b2", "r2", "s2", gpus=[0])]  # fmt: skip
    for _ in range(3):
        core.on_offers(offers)
    held = core.state.reservations.active
    assert held is not None and held.job_id == gang.job_id
    assert sorted(held.agent_ids) == ["a1", "a2"]


def test_a_placed_gang_says_where_it_went(tmp_path):
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.store.sqlite import JobStore

    core = SchedulerCore(JobStore(tmp_path / "db"), CoreConfig(placement=FF),
                         lambda s: (s.image, None))  # fmt: skip
    core.update_agents([_slave("a1", "r1", "s1"), _slave("a2", "r1", "s1"),
                        _slave("b1", "r2", "s2")])  # fmt: skip
    gang = core.submit("alice", job("g", gpus=8, nodes=2).spec)
    spread_gang = core.submit("alice", job("h", gpus=8, nodes=2).spec)
    core.on_offers([racked("o1", "a1", "r1", "s1"), racked("o2", "a2", "r1", "s1")])
    assert core.store.get_job(gang.job_id).message.endswith("(one switch r1/s1)")
    core.on_offers([racked("o3", "b1", "r2", "s2"), racked("o4", "c1", "r3", "s3")])
    assert core.store.get_job(spread_gang.job_id).message.endswith("(2 racks)")
