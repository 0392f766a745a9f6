"""A 2-node gang on the emulator and the REAL Mesos master, two agents each, whose containers
find each other; another user can neither read nor kill it.

`dlc submit --nodes 2` -> scheduler -> the emulator with two agents, or real Mesos
(``MESOS_NUM_SLAVES=2``) -> two `dlc executor` processes -> two Docker containers on the host
network. Node 0 listens on ``$MASTER_PORT`` (a
port DLC took from its offer) with busybox ``nc``; node 1 connects to ``$MASTER_ADDR:$MASTER_PORT``
and both exchange a line, so the test passes only when the variables name a reachable peer.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from tests.e2e.gang_cluster import gang_service as two_agent_service

pytestmark = [pytest.mark.docker]

IMAGE = os.environ.get("DLC_TEST_IMAGE", "dlc-test/busybox:1")
TOKEN = "gang-admin-token"

# node 0 answers the first connection; node 1 retries until node 0 listens (bounded at about
# 7 min: the test's own deadline ends it sooner). Each side sends its line and keeps its end open
# until the peer's line has arrived (busybox nc stops at its stdin's end), so neither side can
# close before the other has spoken, however late a loaded machine starts node 0
SCRIPT = (
    'echo "rank=$RANK world=$WORLD_SIZE nproc=$NPROC_PER_NODE master=$MASTER_ADDR:$MASTER_PORT"; '
    'echo "tf=$TF_CONFIG"; '
    'hold() { echo "hello from node $NODE_RANK"; '
    "  while [ ! -s /tmp/peer ] && [ ! -e /tmp/ended ]; do sleep 0.2; done; }; "
    "talk() { rm -f /tmp/peer /tmp/ended; "
    '  hold | { nc "$@" > /tmp/peer; touch /tmp/ended; }; [ -s /tmp/peer ]; }; '
    'if [ "$NODE_RANK" = 0 ]; then talk -l -p "$MASTER_PORT"; '
    "else "
    '  for i in $(seq 600); do talk "$MASTER_ADDR" "$MASTER_PORT" && break; sleep 0.5; done; '
    "fi; "
    "cat /tmp/peer; [ -s /tmp/peer ]"
)


@pytest.fixture(params=["emulator", pytest.param("real", marks=pytest.mark.mesos)])
def gang_service(request, tmp_path):
    with two_agent_service(request.param, tmp_path, 2, TOKEN, IMAGE) as (svc, _, address):
        yield svc, address


def _logs(svc, job_id: str, rank: int) -> str:
    url = f"{svc.api_url}/v1/jobs/{job_id}/logs?rank={rank}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())["data"]


def test_two_node_gang_containers_reach_each_other(gang_service):
    svc, master = gang_service
    env = {"DLC_API": svc.api_url, "DLC_TOKEN": TOKEN}
    args = ["submit", "--image", IMAGE, "--nodes", "2", "--gpus", "1", "--cpus", "0.5",
            "--mem", "128M", "--", "sh", "-c", SCRIPT]  # fmt: skip
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job_id = result.output.split()[0]
    bob = {"DLC_API": svc.api_url, "DLC_TOKEN": svc.store.add_token("gang-bob")}
    for other in (["logs", job_id], ["kill", job_id], ["cp", f"{job_id}:x", "-"]):
        refused = CliRunner().invoke(cli, other, env=bob)
        assert refused.exit_code != 0 and "no job" in refused.output.lower(), refused.output
    deadline = time.monotonic() + 300  # a bound for a stuck gang; the wait ends when it ends
    while time.monotonic() < deadline:
        job = svc.store.get_job(job_id)
        if job.state.terminal:
            break
        time.sleep(0.5)
    logs = [_logs(svc, job_id, rank) for rank in (0, 1)]
    history = svc.store.history(job_id)
    assert job.state.value == "finished", (job.state, history, logs)
    assert len({t.agent_id for t in job.tasks}) == 2  # two distinct agents
    # each side got the other's line: the rendezvous variables name a reachable peer
    assert "hello from node 1" in logs[0], logs
    assert "hello from node 0" in logs[1], logs
    port = int(logs[0].split("master=")[1].split()[0].rpartition(":")[2])
    assert 31200 <= port <= 31210  # taken from node 0's offer
    assert "rank=1 world=2 nproc=1" in logs[1]
    tf_config = json.loads(logs[1].split("tf=")[1].splitlines()[0])
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert len(tf_config["cluster"]["worker"]) == 2
