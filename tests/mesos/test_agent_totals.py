"""The master's ``/master/slaves`` entries as the core's agent totals (dlc/mesos/agents.py):
what is reserved for another role is not DLC's."""

from __future__ import annotations

import pytest

from dlc.mesos.agents import agent_totals, decode_agents, domain_names
from dlc.mesos.codec import MesosCodec
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.inventory import AgentTotals, Inventory

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
    totals = agent_totals(SLAVE, roles)
    assert totals.gpu_ids == frozenset(gpu_ids)
    assert totals.cpus == cpus
    assert totals.gpu_memory == gpu_memory
    assert totals.role == role


def test_admission_refuses_gpus_only_another_role_holds():
    inventory = Inventory()
    inventory.replace_agents(decode_agents([SLAVE], ("dlc",)))
    error = inventory.impossible(JobSpec.from_dict({"image": "x", "gpus": 3}))
    assert error is not None and "no agent has more than 2" in str(error)
    assert inventory.impossible(JobSpec.from_dict({"image": "x", "gpus": 2})) is None


def test_an_entry_becomes_the_exact_totals_of_its_agent():
    entry = {
        "id": "S1", "hostname": "h1",
        "total_resources": {"cpus": 8.0, "mem": 65536.0, "disk": 2048.0, "gpus": 2.0,
                            "gpu_ids": "{0, 1}", "gpu_mem": "[0-1023, 1048576-2097151]"},
        "resources": {"cpus": 1.0},  # total_resources win over resources
        "attributes": {"gpu_model": "vA100", "dlc_rack": 3.0, "weight": 1.5},
        "domain": {"fault_domain": {"region": {"name": "eu"}, "zone": {"name": "eu-1a"}}},
    }  # fmt: skip
    assert agent_totals(entry) == AgentTotals(
        agent_id="S1",
        hostname="h1",
        gpu_ids=frozenset({0, 1}),
        cpus=8.0,
        mem_mib=65536.0,
        disk_mib=2048.0,
        attributes={"gpu_model": "vA100", "dlc_rack": "3", "weight": "1.5"},  # as offers say
        exact=True,
        gpu_memory={0: 1024, 1: 1048576},
        domain=("eu", "eu-1a"),
    )


@pytest.mark.parametrize(
    ("entry", "gpu_ids", "gpu_memory"),
    [
        pytest.param({"resources": {"gpu_ids": [0, "1"]}}, {0, 1}, {}, id="ids-as-a-list"),
        pytest.param({"resources": {"gpu_ids": "{}"}}, set(), {}, id="no-ids"),
        pytest.param(
            {"resources": {"gpu_ids": "{0}", "gpu_mem": "[9-"}},
            {0},
            {},
            id="bad-gpu-mem-takes-no-shares",
        ),  # fmt: skip
        pytest.param({}, set(), {}, id="no-resources"),
    ],
)
def test_odd_resources_of_an_agent_are_read_as_far_as_they_go(entry, gpu_ids, gpu_memory):
    totals = agent_totals({"id": "S1", **entry})
    assert totals is not None and totals.exact
    assert (totals.gpu_ids, totals.gpu_memory) == (frozenset(gpu_ids), gpu_memory)


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param({"id": "S1", "active": False}, id="inactive"),
        pytest.param({"hostname": "no-id"}, id="no-id"),
        pytest.param({"id": "S1", "resources": {"cpus": "lots"}}, id="bad-amount"),
        pytest.param({"id": "S1", "resources": {"gpu_ids": "{0, x}"}}, id="bad-gpu-id"),
        pytest.param({"id": "S1", "attributes": ["not", "a", "dict"]}, id="odd-attributes"),
    ],
)
def test_inactive_and_malformed_entries_are_left_out(entry):
    assert agent_totals(entry) is None
    good = {"id": "S2", "hostname": "h2"}
    assert [a.agent_id for a in decode_agents([entry, good])] == ["S2"]


@pytest.mark.parametrize(
    ("domain", "names"),
    [
        ({"fault_domain": {"region": {"name": "eu"}, "zone": {"name": "eu-1a"}}}, ("eu", "eu-1a")),
        ({"fault_domain": {"region": {"name": "eu"}}}, ("eu", "")),
        ({"fault_domain": "eu"}, ("", "")),
        (None, ("", "")),
        ("eu", ("", "")),
    ],
)
def test_a_fault_domain_is_read_or_left_blank(domain, names):
    assert domain_names(domain) == names


def test_the_mesos_codec_decodes_agents_in_their_order():
    entries = [{"id": "S2", "hostname": "h2"}, SLAVE, {"id": "S3", "active": False}]
    assert MesosCodec().decode_agents(entries, ("dlc",)) == [
        agent_totals(entries[0], ("dlc",)),
        agent_totals(SLAVE, ("dlc",)),
    ]
