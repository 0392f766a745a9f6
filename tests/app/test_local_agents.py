"""`dlc local --agents N`: how many simulated agents, and the one-line errors."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.app.local import LocalConfig, agent_spec, agent_specs
from dlc.cli.main import cli
from dlc.errors import ConfigError
from tests.app.test_local import DGX1


def test_agents_are_alike_with_their_own_loopback_hostnames():
    spec, _ = agent_spec(LocalConfig(simulate=str(DGX1), gpu_mem_mib=32768, agents=3))
    specs = agent_specs(spec, 3)
    assert [s.hostname for s in specs] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert {(s.resources, s.attributes) for s in specs} == {(spec.resources, spec.attributes)}


BAD = {
    "none": ({"simulate": str(DGX1), "agents": 0}, "agents: must be between 1 and 64, got 0"),
    "too many": ({"simulate": str(DGX1), "agents": 65}, "got 65; pass --agents N"),
    "this host twice": ({"agents": 2}, "offer its GPUs 2 times; add --simulate FILE"),
}


@pytest.mark.parametrize("kwargs, message", BAD.values(), ids=BAD.keys())
def test_bad_agent_counts_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LocalConfig(**kwargs)


def test_the_cli_says_it_in_one_line(tmp_path):
    args = ["local", "--agents", "2", "--work-dir", str(tmp_path), "--api-port", "0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--simulate FILE" in lines[0], result.output
