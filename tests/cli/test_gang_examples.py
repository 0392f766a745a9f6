"""The multi-node examples use only variables DLC really sets on a gang's nodes.

Each ``examples/**.yaml`` with ``nodes: 2`` or more is read as ``dlc submit -f`` reads it and
turned into the launch specs of its nodes (the scheduler's own code, peers given); every
``$NAME``/``${NAME}`` in its shell command must be in each node's environment. A renamed
variable (``$DLC_NUM_NODES`` dropped, ``NPROC`` spelt differently) fails here, not on node 1
hanging at its rendezvous.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlc.cli.submit_cmd import load_spec_file
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.model import Launch
from dlc.scheduler.tasks.launch import launch_spec

EXAMPLES = Path(__file__).parents[2] / "examples"
GANGS = sorted(
    p for p in EXAMPLES.rglob("*.yaml") if (load_spec_file(str(p)).get("nodes") or 1) > 1
)
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def test_the_gang_examples_are_found():
    names = {p.relative_to(EXAMPLES).as_posix() for p in GANGS}
    assert {"distributed-2x8.yaml", "torchrun-gloo/job.yaml"} <= names


@pytest.mark.parametrize("path", GANGS, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_a_gang_examples_command_names_only_variables_dlc_sets(path):
    spec = JobSpec.from_dict(load_spec_file(str(path)))
    assert spec.command[:2] == ("sh", "-c"), "a YAML string runs through the shell"
    used = set(VARIABLE.findall(spec.command[2]))
    assert {"MASTER_ADDR", "MASTER_PORT"} <= used, spec.command  # the nodes must meet
    job = Job("j1", "alice", spec, attempt=1)
    peers = tuple(f"10.0.0.{rank + 1}:31000" for rank in range(spec.nodes))
    for rank in range(spec.nodes):
        launch = Launch(job_id="j1", task_id=f"j1.1.{rank}", rank=rank, agent_id=f"agent-{rank}",
                        hostname=f"host{rank}", offer_ids=("o",), gpu_ids=tuple(range(spec.gpus)),
                        ports=(31000,), peers=peers)  # fmt: skip
        env = launch_spec(job, launch).env
        assert used <= set(env), f"{path.name}: not set by DLC: {sorted(used - set(env))}"
        assert env["MASTER_ADDR"] == "10.0.0.1" and env["NODE_RANK"] == str(rank)
