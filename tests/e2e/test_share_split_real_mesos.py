"""The AIStation split on the REAL Mesos 1.11 master: two agents of 8 x 32 GiB GPUs.

The agents advertise exactly what `dlc local --simulate dgx1-v100.txt --gpu-mem 32768` offers
(the same :func:`dlc.app.local.agent_spec`, so both masters see one machine), started with
``MESOS_NUM_SLAVES=2``. DLC's scheduler service places 128 jobs of ``--gpu-memory 4G``; the
master accounts every share in ``gpu_mem`` and the 129th queues with a reason. The check itself
is the one `dlc local --agents 2` passes (tests/app/test_local_shares.py). Executors are the
stand-in (no Docker) running ``sleep``.
"""

from __future__ import annotations

import pytest

from dlc.api.client import ApiClient
from dlc.app.local import LocalConfig, agent_spec
from dlc.app.service import SchedulerService, ServiceConfig
from dlc.scheduler.tasks.launch import ExecutorConfig
from tests.app.test_local import DGX1, STAND_IN
from tests.app.test_local_shares import AGENTS, GPU_MEM_MIB, check_share_split
from tests.e2e.gang_cluster import wait_agents
from tests.real_mesos import real_mesos_master

pytestmark = pytest.mark.mesos

TOKEN = "share-split-admin-token"


def test_128_memory_shares_on_two_real_agents_and_the_129th_queues(tmp_path):
    spec, _ = agent_spec(LocalConfig(simulate=str(DGX1), gpu_mem_mib=GPU_MEM_MIB))
    mesos_vars = {
        "MESOS_RESOURCES": spec.resources,
        "MESOS_ATTRIBUTES": spec.attributes,
        "MESOS_NUM_SLAVES": str(AGENTS),
    }
    with real_mesos_master(tmp_path / "mesos", **mesos_vars) as mesos:
        wait_agents(mesos.address, AGENTS)  # admission reads the agents once at registration
        config = ServiceConfig(
            master=mesos.address,
            db=str(tmp_path / "db"),
            api_port=0,
            executor=ExecutorConfig(command=STAND_IN),
            admin_token=TOKEN,
        )
        service = SchedulerService(config)
        service.start()
        try:
            assert service.framework.registered.wait(30), "framework did not register"
            check_share_split(ApiClient(service.api_url, TOKEN), f"http://{mesos.address}")
        finally:
            service.stop()
