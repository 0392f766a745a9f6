"""Agent totals on a shared cluster: what is reserved for another role is not DLC's."""

from __future__ import annotations

import pytest

from dlc.scheduler.inventory import Inventory, agent_from_master

#: a /master/slaves entry as the real 1.11 master renders it for an agent started with
#: gpus(spark):2;gpu_ids(spark):{0,1};gpus(dlc):2;gpu_ids(dlc):{2,3};cpus(spark):1;cpus:3;...
SLAVE = {
    "id": "S0",
    "hostname": "gpu1",
    "active": True,
    "resources": {"cpus": 4.0, "mem": 4096.0, "disk": 1000.0, "gpus": 4.0,
                  "gpu_ids": "{0, 1, 2, 3}",
                  "gpu_mem": "[0-99, 1048576-1048675, 2097152-2097251, 3145728-3145827]"},
    "reserved_resources": {
        "spark": {"cpus": 1.0, "mem": 0.0, "disk": 0.0, "gpus": 2.0, "gpu_ids": "{0, 1}",
                  "gpu_mem": "[0-99, 1048576-1048675]"},
        "dlc": {"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 2.0, "gpu_ids": "{2, 3}",
                "gpu_mem": "[2097152-2097251, 3145728-3145827]"},
    },
    "attributes": {},
}  # fmt: skip


@pytest.mark.parametrize(
    ("roles", "gpu_ids", "cpus", "gpu_memory", "role"),
    [
        (("dlc",), {2, 3}, 3.0, {2: 100, 3: 100}, "dlc"),
        (("dlc", "spark"), {0, 1, 2, 3}, 4.0, {0: 100, 1: 100, 2: 100, 3: 100}, "dlc"),
        ((), set(), 3.0, {}, None),  # as '*': only unreserved GPUs (none here)
        (("spark/dlc",), {0, 1}, 4.0, {0: 100, 1: 100}, "spark"),  # a parent's reservation
    ],
)
def test_other_roles_reservations_are_left_out(roles, gpu_ids, cpus, gpu_memory, role):
    totals = agent_from_master(SLAVE, roles)
    assert totals.gpu_ids == frozenset(gpu_ids)
    assert totals.cpus == cpus
    assert totals.gpu_memory == gpu_memory
    assert totals.role == role


def test_admission_refuses_gpus_only_another_role_holds():
    inventory = Inventory(roles=("dlc",))
    inventory.update_from_master([SLAVE])
    from dlc.scheduler.jobs import JobSpec

    error = inventory.impossible(JobSpec.from_dict({"image": "x", "gpus": 3}))
    assert error is not None and "no agent has more than 2" in str(error)
    assert inventory.impossible(JobSpec.from_dict({"image": "x", "gpus": 2})) is None
