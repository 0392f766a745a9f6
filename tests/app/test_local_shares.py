"""The AIStation split on `dlc local --agents 2`: two simulated agents of 8 x 32 GiB GPUs take
128 jobs of --gpu-memory 4G at the same time, eight per GPU; the 129th queues with a reason.

Executors are the stand-in (no Docker): each runs `sleep` as a plain process. The jobs hold
their share until the test ends (the cluster's stop kills them), so seeing all 128 running
does not race their end however slow a loaded machine starts the executors. The helpers here
are shared with the same check on the real Mesos master
(tests/e2e/test_share_split_real_mesos.py).
"""

from __future__ import annotations

import json
import time
import urllib.request

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from dlc.topology.gpu_shares import GPU_MEM, amounts, parse_ranges_text
from tests.app.test_local import DGX1, STAND_IN

AGENTS = 2
GPUS = 8
GPU_MEM_MIB = 32768
#: 32 GiB / 4 GiB = 8 shares per GPU
SHARES = AGENTS * GPUS * 8
#: the jobs never end by themselves: the test's cluster stop ends them (a job that ended
#: before all were seen running would make "all 128 at once" a race against the machine's load)
HOLD_S = 86400
BODY = {"image": "none", "gpu_memory": "4G", "cpus": 0.1, "mem_mib": 64,
        "command": ["sleep", str(HOLD_S)]}  # fmt: skip


def wait_for(predicate, timeout=90.0, what=""):
    """``predicate()``'s first true value, polled every 0.5 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def check_share_split(client: ApiClient, master_url: str) -> None:
    """Submit :data:`SHARES` + 1 jobs of ``--gpu-memory 4G`` and check the split.

    All :data:`SHARES` run at once, eight on every GPU of both agents; the master's
    ``used_resources`` hold every MiB of ``gpu_mem`` and no whole GPU; the next one
    queues with a reason naming the share.
    """
    ids = [client.submit(BODY)["id"] for _ in range(SHARES)]

    def running():
        jobs = {j["id"]: j for j in client.jobs()}
        ended = [
            jobs[i] for i in ids if jobs[i]["state"] in ("finished", "failed", "killed", "lost")
        ]
        # a job that ended can never be seen running: say why at once instead of timing out
        assert not ended, (
            f"{len(ended)} share job(s) ended: {ended[0]['state']}: {ended[0]['message']}"
        )
        return all(jobs[i]["state"] == "running" for i in ids) and jobs

    # 128 stand-in executors start on a 2-core machine; the jobs hold, so a loaded machine
    # only makes this slower, never wrong: the bound only catches a stuck launch
    try:
        jobs = wait_for(running, timeout=600.0, what=f"{SHARES} shares running")
    except AssertionError:
        # say which jobs are stuck where and why, so a failure can be read, not just seen
        shown = {j["id"]: j for j in client.jobs()}
        stuck: dict[tuple[str, str], int] = {}
        for i in ids:
            if shown[i]["state"] != "running":
                key = (shown[i]["state"], (shown[i].get("message") or "")[:160])
                stuck[key] = stuck.get(key, 0) + 1
        raise AssertionError(
            f"shares not running after 600 s, by state and message: {stuck}"
        ) from None
    per_gpu: dict[tuple[str, int], int] = {}
    for job_id in ids:
        (task,) = jobs[job_id]["tasks"]
        assert task["gpu_ids"] == [] and task["share_memory_mib"] == 4096, task
        key = (task["agent_id"], task["share_gpu"])
        per_gpu[key] = per_gpu.get(key, 0) + 1
    assert len({agent for agent, _ in per_gpu}) == AGENTS
    assert sorted(per_gpu.values()) == [8] * (AGENTS * GPUS), per_gpu
    last = client.submit(BODY)["id"]
    # the first answer is "waiting for the first offers"; the next offer tells why
    queued = wait_for(
        lambda: "GiB" in ((j := client.show(last)).get("message") or "") and j,
        what="a reason naming the share",
    )
    assert queued["state"] == "queued"
    assert "no GPU has a share of 4 GiB left" in queued["message"], queued["message"]
    with urllib.request.urlopen(f"{master_url}/master/state", timeout=10) as resp:
        agents = json.load(resp)["slaves"]
    assert len(agents) == AGENTS
    for agent in agents:
        used = agent["used_resources"]
        # eight 4 GiB shares fill each GPU; no whole GPU was taken
        assert amounts(parse_ranges_text(used[GPU_MEM])) == dict.fromkeys(range(GPUS), GPU_MEM_MIB)
        assert not used.get("gpus")


def test_128_memory_shares_on_two_agents_run_at_once_and_the_129th_queues(tmp_path):
    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path), api_port=0, executor_command=STAND_IN,
        gpu_mem_mib=GPU_MEM_MIB, agents=AGENTS,
    )  # fmt: skip
    cluster = LocalCluster(config).start()
    try:
        hosts = {a["hostname"] for a in cluster.emulator.state()["slaves"]}
        assert hosts == {"127.0.0.1", "127.0.0.2"}
        check_share_split(ApiClient(cluster.service.api_url, cluster.admin_token),
                          cluster.emulator.url)  # fmt: skip
    finally:
        cluster.stop()
