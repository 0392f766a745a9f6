"""What the real Mesos master (and so its web UI) shows of DLC: framework name, webui_url
linking to the dashboard, task names, status messages; and the dashboard reading the real
master's agent list and metrics. Marker ``mesos``: FAILS (never skips) without the real master.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dlc.api.client import ApiClient
from dlc.app.service import SchedulerService, ServiceConfig
from dlc.scheduler.tasks.launch import ExecutorConfig
from dlc.topology.discovery.discover import discover
from dlc.topology.node_config import node_config
from tests.real_mesos import real_mesos_master

pytestmark = pytest.mark.mesos

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"
STAND_IN = ROOT / "tests" / "scheduler" / "stand_in_executor.py"
TOKEN = "mesos-ui-admin-token"


@pytest.fixture
def real_master(tmp_path):
    """``host:port`` of a real Mesos 1.11 master whose one agent advertises a DGX-1."""
    agent = node_config(discover(from_file=DGX1), cpus=4, mem_mib=4096)
    mesos_vars = {
        "MESOS_RESOURCES": agent.resources + ";disk:10240",
        "MESOS_ATTRIBUTES": agent.attributes_text,
    }
    with real_mesos_master(tmp_path / "mesos", **mesos_vars) as mesos:
        yield mesos.address


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_mesos_ui_shows_dlc_recognisably(real_master, tmp_path):
    service = SchedulerService(
        ServiceConfig(master=real_master, db=str(tmp_path / "db"), api_port=0, admin_token=TOKEN,
                      executor=ExecutorConfig(command=f"{sys.executable} {STAND_IN}"))
    )  # fmt: skip
    service.start()
    try:
        assert service.framework.registered.wait(30), "no registration with the real master"
        client = ApiClient(service.api_url, TOKEN)
        # the idle agent is on the dashboard before any offer (read from /master/slaves)
        request = urllib.request.Request(
            service.api_url + "/v1/dashboard", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            [agent] = json.loads(resp.read())["agents"]
        assert (agent["total"], agent["has_topology"]) == (8, True)

        job = client.submit({"framework": "pytorch:2.3.1", "gpus": 2, "command": ["echo", "ok"]})
        deadline = time.monotonic() + 60
        while client.show(job["id"])["state"] not in ("finished", "failed", "lost"):
            assert time.monotonic() < deadline, client.show(job["id"])
            time.sleep(0.3)
        done = client.show(job["id"])
        assert done["state"] == "finished", done["message"]
        gpus = ",".join(map(str, done["tasks"][0]["gpu_ids"]))

        state = get_json(f"http://{real_master}/master/state")
        [fw] = [f for f in state["frameworks"] if f["id"] == service.core.framework_id]
        assert fw["name"] == "dlc"
        assert fw["webui_url"] == service.api_url + "/"
        with urllib.request.urlopen(fw["webui_url"], timeout=10) as resp:
            assert b"/static/dashboard.js" in resp.read()  # the UI's link opens the dashboard
        [task] = fw["completed_tasks"]
        assert task["name"] == f"dlc {job['id']} pytorch:2.3.1 gpus {gpus}"
        assert [s["state"] for s in task["statuses"]][-1] == "TASK_FINISHED"
        # status messages reach DLC (the master's state JSON does not carry them)
        messages = [h["message"] for h in done["history"]]
        assert f"launching on {done['tasks'][0]['hostname']} GPUs {gpus}" in messages
        assert all(m and not m.startswith("TASK_") for m in messages), messages

        with urllib.request.urlopen(service.api_url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
        assert found["dlc_agent_gpus"].value == 8
        assert found["dlc_offers_received_total"].value >= 1
        assert found["dlc_queue_wait_seconds_count"].value == 1
    finally:
        service.stop()
