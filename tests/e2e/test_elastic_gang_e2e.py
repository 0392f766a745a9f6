"""An elastic gang (``dlc submit --nodes 2:3``) on the emulator and the REAL Mesos master,
three one-GPU agents: it starts at 2 nodes while another job holds the third agent, grows to 3
when that job ends, and gives its extra member back when a higher-priority job needs the agent,
while node 0's container runs on untouched throughout.

Each node runs a loop that prints its rank and ``PET_NNODES``; the test reads the logs through
the API, and node 0's container from the Docker engine (same id, still running, one start line).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.executor.container_spec import LABEL_TASK
from dlc.scheduler.gangs.elastic import nodes_text
from tests.e2e.gang_cluster import gang_service

pytestmark = [pytest.mark.docker]

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
TOKEN = "elastic-admin-token"
AGENTS = 3
#: a training stand-in: one start line, then its rank and torchrun's node range every 0.5 s
LOOP = (
    'echo "start rank=$DLC_NODE_RANK nnodes=$PET_NNODES rdzv=$PET_RDZV_ENDPOINT"; '
    'while true; do echo "rank=$DLC_NODE_RANK nnodes=$PET_NNODES"; sleep 0.5; done'
)
#: bound of each wait; every wait ends as soon as its condition holds
DEADLINE_S = 180


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def service(request, tmp_path):
    with gang_service(request.param, tmp_path, AGENTS, TOKEN, IMAGE) as (svc, runtime, _):
        yield svc, runtime


def _wait(condition, what: str, timeout: float = DEADLINE_S, detail=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; {detail()}")


def _dlc(svc, *args) -> str:
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": TOKEN}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _submit(svc, *args) -> str:
    common = ["submit", "--image", IMAGE, "--gpus", "1", "--cpus", "0.5", "--mem", "128M"]
    return _dlc(svc, *common, *args).split()[0]


def _logs(svc, job_id: str, rank: int) -> str:
    url = f"{svc.api_url}/v1/jobs/{job_id}/logs?rank={rank}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())["data"]


def _running(svc, job_id: str, ranks: set[int]):
    """The job when exactly ``ranks`` are its members and all of them run."""
    job = svc.store.get_job(job_id)
    live = {t.rank for t in job.tasks if t.state == "TASK_RUNNING"}
    if {t.rank for t in job.tasks} == ranks and live == ranks:
        return job
    return None


def test_elastic_gang_grows_and_shrinks_while_node0_keeps_running(service):
    svc, runtime = service
    history = lambda: f"history: {svc.store.history(gang)}"  # noqa: E731
    filler = _submit(svc, "--", "sleep", "600")
    _wait(lambda: svc.store.get_job(filler).state.value == "running", "the filler to run")
    gang = _submit(svc, "--nodes", "2:3", "--", "sh", "-c", LOOP)
    job = _wait(lambda: _running(svc, gang, {0, 1}), "the gang at MIN", detail=history)
    assert nodes_text(job) == "2/2:3"
    assert "2/2:3x1" in _dlc(svc, "jobs")
    (node0,) = runtime.list_containers({LABEL_TASK: f"{gang}.0.0"})
    _wait(lambda: "nnodes=2:3" in _logs(svc, gang, 1), "node 1's loop")

    _dlc(svc, "kill", filler)  # another job ends: its agent is free
    job = _wait(lambda: _running(svc, gang, {0, 1, 2}), "the gang to grow", detail=history)
    assert job.state.value == "running"
    assert "3/2:3x1" in _dlc(svc, "jobs")
    _wait(lambda: "rank=2 nnodes=2:3" in _logs(svc, gang, 2), "the new member's loop")
    start = next(line for line in _logs(svc, gang, 2).splitlines() if line.startswith("start"))
    endpoint = start.split("rdzv=")[1]
    assert endpoint == next(t.rendezvous for t in job.tasks if t.rank == 0)  # node 0's address

    urgent = _submit(svc, "--priority", "10", "--", "sleep", "600")
    _wait(lambda: svc.store.get_job(urgent).state.value == "running", "the urgent job to run",
          detail=history)  # fmt: skip
    job = _wait(lambda: _running(svc, gang, {0, 1}), "the gang to shrink", detail=history)
    assert job.state.value == "running" and job.failures == 0 and job.attempt == 0
    urgent_agent = svc.store.get_job(urgent).tasks[0].agent_id
    assert urgent_agent not in {t.agent_id for t in job.tasks}  # it took the extra's agent
    assert any("shrinking: gave back node 2" in msg for _, _, msg in svc.store.history(gang))

    # node 0 ran on throughout: the same container, running, started once
    (still,) = runtime.list_containers({LABEL_TASK: f"{gang}.0.0"})
    assert (still.id, still.status) == (node0.id, "running")
    log0 = _logs(svc, gang, 0)
    assert log0.count("start rank=0") == 1, log0[-500:]
    count = log0.count("rank=0 nnodes=2:3")
    _wait(lambda: _logs(svc, gang, 0).count("rank=0 nnodes=2:3") > count, "node 0 to go on")
    for job_id in (gang, urgent):
        _dlc(svc, "kill", job_id)
