"""The AIStation split on `dlc local`: one simulated agent of 8 x 32 GiB GPUs takes 64 jobs
of --gpu-memory 4G at the same time, eight per GPU; the 65th queues with a reason.

Executors are the stand-in (no Docker): each runs `sleep` as a plain process.
"""

from __future__ import annotations

import json
import time
import urllib.request

from dlc.api.client import ApiClient
from dlc.app.local import LocalCluster, LocalConfig
from dlc.topology.gpu_shares import GPU_MEM, amounts, parse_ranges_text
from tests.app.test_local import DGX1, STAND_IN

SHARES = 64


def _wait(predicate, timeout=75.0, what=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_64_memory_shares_run_at_once_and_the_65th_queues(tmp_path):
    config = LocalConfig(
        simulate=str(DGX1), work_dir=str(tmp_path), api_port=0, executor_command=STAND_IN,
        gpu_mem_mib=32768,
    )  # fmt: skip
    cluster = LocalCluster(config).start()
    try:
        client = ApiClient(cluster.service.api_url, cluster.admin_token)
        body = {"image": "none", "gpu_memory": "4G", "cpus": 0.1, "mem_mib": 64,
                "command": ["sleep", "60"]}  # fmt: skip
        ids = [client.submit(body)["id"] for _ in range(SHARES)]

        def running():
            jobs = {j["id"]: j for j in client.jobs()}
            return all(jobs[i]["state"] == "running" for i in ids) and jobs

        jobs = _wait(running, what=f"{SHARES} shares running")
        per_gpu: dict[int, int] = {}
        for job_id in ids:
            (task,) = jobs[job_id]["tasks"]
            assert task["gpu_ids"] == [] and task["share_memory_mib"] == 4096
            per_gpu[task["share_gpu"]] = per_gpu.get(task["share_gpu"], 0) + 1
        assert per_gpu == dict.fromkeys(range(8), 8)
        last = client.submit(body)["id"]
        # the first answer is "waiting for the first offers"; the next offer tells why
        queued = _wait(
            lambda: "GiB" in ((j := client.show(last)).get("message") or "") and j,
            what="a reason naming the share",
        )
        assert queued["state"] == "queued"
        assert "no GPU has a share of 4 GiB left" in queued["message"], queued["message"]
        with urllib.request.urlopen(f"{cluster.emulator.url}/master/state", timeout=10) as r:
            (agent,) = json.load(r)["slaves"]
        used = agent["used_resources"]
        # eight 4 GiB shares fill each GPU; no whole GPU was taken
        assert amounts(parse_ranges_text(used[GPU_MEM])) == dict.fromkeys(range(8), 32768)
        assert not used.get("gpus")
    finally:
        cluster.stop()
