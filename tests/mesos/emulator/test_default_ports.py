"""Like `mesos-agent`, an emulated agent whose --resources names no ports offers 31000-32000
(`dlc local`'s agent, built from `dlc node-config`, names none: no interactive job could start)."""

from __future__ import annotations

from dlc.mesos.emulator.cluster import MesosEmulator, agent_resources
from dlc.mesos.emulator.model import AgentSpec
from dlc.mesos.resources import Resources


def test_an_agent_without_ports_offers_the_default_range():
    assert agent_resources("cpus:1;mem:128").names() == {"cpus", "mem", "ports"}
    own = agent_resources("cpus:1;mem:128;ports:[4000-4001]")
    assert own == Resources.parse("cpus:1;mem:128;ports:[4000-4001]")  # its own range only
    assert "31000" not in str(own)


def test_the_master_state_shows_the_default_ports(tmp_path):
    agents = [AgentSpec(resources="cpus:1;mem:128"), AgentSpec(resources="cpus:1;ports:[5-6]")]
    with MesosEmulator(agents=agents, work_dir=tmp_path) as emulator:
        ports = [a["resources"]["ports"] for a in emulator.state()["slaves"]]
    assert sorted(ports) == ["[31000-32000]", "[5-6]"]
