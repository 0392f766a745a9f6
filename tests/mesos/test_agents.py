"""The master's agent list (``/master/slaves``) as the dashboard reads it."""

from __future__ import annotations

import pytest

from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator
from dlc.mesos.master import fetch_agents, parse_slaves


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param(
            {"id": "S1", "hostname": "h1", "resources": {"gpus": 2.0, "gpu_ids": "{0, 1}"},
             "attributes": {"gpu_model": "vA100", "rack": 3.0}},
            ("S1", "h1", {"gpu_model": "vA100", "rack": "3"}, {0, 1}),
            id="gpu-agent",
        ),
        pytest.param(
            {"id": "S2", "hostname": "h2", "resources": {"cpus": 4.0}},
            ("S2", "h2", {}, set()),
            id="cpu-only-agent",
        ),
        pytest.param({"hostname": "no-id"}, None, id="entry-without-id-skipped"),
        pytest.param({"id": "S3", "attributes": ["not", "a", "dict"]}, None, id="odd-attributes"),
    ],
)  # fmt: skip
def test_parse_slaves(entry, expected):
    agents = parse_slaves({"slaves": [entry]})
    if expected is None:
        assert agents == []
        return
    [agent] = agents
    assert (agent.agent_id, agent.hostname, agent.attributes, set(agent.gpu_ids)) == expected


def test_fetch_agents_from_the_emulator(tmp_path):
    spec = AgentSpec(
        resources="cpus:4;mem:4096;gpus:4;gpu_ids:{0,1,2,3}", attributes="gpu_model:vTesla_V100"
    )
    with MesosEmulator(agents=[spec], work_dir=tmp_path) as emulator:
        [agent] = fetch_agents(emulator.url)
    assert agent.gpu_ids == frozenset({0, 1, 2, 3})
    assert agent.attributes == {"gpu_model": "vTesla_V100"}


def test_fetch_agents_from_nowhere_is_empty():
    assert fetch_agents("http://127.0.0.1:9", timeout_s=1) == []
