"""A gang through the Mesos emulator with agents in two racks: both nodes land in one rack.

Four agents, two per rack, listed so that best fit alone (fewest free GPUs first) would take
the two 2-GPU agents, one in each rack. The racks come from ``dlc node-config --rack/--switch``
attributes and the zone from the agents' ``--domain``. The executor is the stand-in (no Docker).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

from click.testing import CliRunner

from dlc.app.service import SchedulerService, ServiceConfig
from dlc.cli.main import cli
from dlc.mesos.emulator.cluster import AgentSpec, MesosEmulator
from dlc.mesos.emulator.model import fault_domain
from dlc.mesos.framework import FrameworkConfig
from dlc.scheduler.core.facade import Actions
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.tasks.launch import ExecutorConfig

ROOT = Path(__file__).resolve().parents[3]
STAND_IN = ROOT / "tests" / "scheduler" / "stand_in_executor.py"


def _attributes(rack: str, switch: str) -> str:
    """What ``dlc node-config --rack R --switch S`` adds to --attributes."""
    result = CliRunner().invoke(
        cli, ["node-config", "--from-file", str(_topo()), "--rack", rack, "--switch", switch,
              "-o", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    attrs = json.loads(result.stdout)["attributes"]
    assert (attrs["dlc_rack"], attrs["dlc_switch"]) == (rack, switch)
    return f"dlc_rack:{rack};dlc_switch:{switch}"


def _topo() -> Path:
    from tests.fixture_files import complete_topo_files

    return next(p for p in complete_topo_files() if p.name.startswith("dgx1-v100"))


def _agent(gpus: int, rack: str) -> AgentSpec:
    ids = ",".join(str(i) for i in range(gpus))
    return AgentSpec(
        resources=f"cpus:4;mem:4096;disk:4096;ports:[31000-31010];gpus:{gpus};gpu_ids:{{{ids}}}",
        attributes=_attributes(rack, f"{rack}-tor"),
        domain=fault_domain("eu", "eu-1a"),
    )


def test_gang_of_two_lands_in_one_rack(tmp_path):
    agents = [_agent(2, "r1"), _agent(2, "r2"), _agent(4, "r1"), _agent(4, "r2")]
    with MesosEmulator(agents=agents, work_dir=tmp_path / "emulator") as emulator:
        master = emulator.address
        config = ServiceConfig(
            master=master,
            db=str(tmp_path / "db"),
            api_port=0,
            executor=ExecutorConfig(command=f"{sys.executable} {STAND_IN}"),
            framework=FrameworkConfig(master=master, refuse_seconds=1.0),
        )
        service = SchedulerService(config)
        service.start()
        try:
            assert service.framework.registered.wait(30), "framework did not register"
            spec = JobSpec(image="none", gpus=2, nodes=2, command=("sh", "-c", "true"))
            job = service.core.submit("alice", spec)
            service.framework.dispatch(Actions(revive=True))
            deadline = time.monotonic() + 40
            while not service.store.get_job(job.job_id).tasks:
                assert time.monotonic() < deadline, service.store.get_job(job.job_id).message
                time.sleep(0.1)
            tasks = service.store.get_job(job.job_id).tasks
            with urllib.request.urlopen(f"http://{master}/master/slaves", timeout=10) as resp:
                slaves = {s["id"]: s for s in json.load(resp)["slaves"]}
            racks = {slaves[t.agent_id]["attributes"]["dlc_rack"] for t in tasks}
            assert len(tasks) == 2 and len({t.agent_id for t in tasks}) == 2
            assert len(racks) == 1, f"gang spread over racks {sorted(racks)}"
            assert all(slaves[t.agent_id]["domain"]["fault_domain"]["zone"]["name"] == "eu-1a"
                       for t in tasks)  # fmt: skip
        finally:
            service.stop()
