"""``GET /v1/nodes`` and ``dlc nodes`` show each agent's zone (Mesos fault domain), rack and
switch (``dlc node-config --rack/--switch``), read from /master/slaves and from offers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer


def slave(agent, rack, switch, zone):
    return {"id": agent, "hostname": f"host-{agent}", "active": True,
            "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"},
            "attributes": {"dlc_rack": rack, "dlc_switch": switch},
            "domain": {"fault_domain": {"region": {"name": "eu"},
                                        "zone": {"name": zone}}}}  # fmt: skip


@pytest.fixture
def api(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda s: (s.image, None))  # fmt: skip
    core.update_agents([slave("a1", "r1", "r1-tor", "eu-1a"), slave("a2", "r2", "r2-tor", "eu-1b")])
    server = ApiServer(core, LogReader(lambda: core.framework_id), lambda a: None)
    server.start()
    yield server, core, store.add_token("alice")
    server.stop()


def test_nodes_carry_zone_rack_and_switch(api):
    server, core, token = api
    # an agent known only from its offer: the offer's domain and attributes say where
    body = offer("o1", "b1", attrs={"dlc_rack": "r3", "dlc_switch": "r3-tor"})
    body["domain"] = {"fault_domain": {"region": {"name": "eu"}, "zone": {"name": "eu-1c"}}}
    core.on_offers([body])
    nodes = ApiClient(server.url, token)._call("GET", "/v1/nodes")["nodes"]
    places = {n["agent_id"]: (n["region"], n["zone"], n["rack"], n["switch"]) for n in nodes}
    assert places == {
        "a1": ("eu", "eu-1a", "r1", "r1-tor"),
        "a2": ("eu", "eu-1b", "r2", "r2-tor"),
        "b1": ("eu", "eu-1c", "r3", "r3-tor"),
    }
    env = {"DLC_API": server.url, "DLC_TOKEN": token}
    table = CliRunner().invoke(cli, ["nodes"], env=env).output
    head, *rows = table.splitlines()
    assert head.split()[:5] == ["POOL", "AGENT", "ZONE", "RACK", "SWITCH"]
    assert any(r.split()[:5] == ["default", "host-a2", "eu-1b", "r2", "r2-tor"] for r in rows)
    out = CliRunner().invoke(cli, ["nodes", "-o", "json"], env=env).output
    assert {n["rack"] for n in json.loads(out)} == {"r1", "r2", "r3"}


def test_submit_takes_gang_topology_as_text_or_mapping_and_refuses_a_bad_one(api):
    from dlc.errors import ApiError

    server, _core, token = api
    client = ApiClient(server.url, token)
    base = {"image": "busybox", "gpus": 8, "nodes": 2}
    job = client.submit({**base, "gang_topology": {"level": "rack", "mode": "preferred"}})
    assert job["gang_topology"] == "rack:preferred"
    assert client.submit({**base, "gang_topology": "zone"})["gang_topology"] == ("zone:preferred")
    with pytest.raises(ApiError) as err:
        client.submit({**base, "gang_topology": "row:required"})
    text = str(err.value)
    assert "gang_topology: level 'row' is not one of switch, rack, zone" in text
    assert "--gang-topology" in text and "\n" not in text
    # a1 and a2 are in two racks (and zones): no rack could ever hold a required 2-node gang
    with pytest.raises(ApiError) as err:
        client.submit({**base, "gang_topology": {"level": "rack", "mode": "required"}})
    assert str(err.value) == (
        "gang_topology: no rack has 2 agents that can run this job (the largest has 1); "
        "pass --gang-topology zone:required or --gang-topology rack:preferred"
    )
