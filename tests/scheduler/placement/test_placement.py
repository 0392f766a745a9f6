"""Offers as JSON data + queued jobs -> expected launches and declines."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dlc.app.local import LocalConfig
from dlc.app.service import ServiceConfig
from dlc.errors import ConfigError, OfferError
from dlc.mesos.offers import offer_view
from dlc.scheduler.allocator import POLICY_MODULES
from dlc.scheduler.placement.model import NO_TOPOLOGY_POLICY, PlacementConfig
from tests.scheduler.helpers import place

from ..helpers import job, offer, pairs_topology

FF = PlacementConfig(policy="first-fit")

CASES = [
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3])],
        [job("j1", gpus=2)],
        [("j1", "a1", (0, 1))],
        [],
        id="one-job-one-offer-lowest-ids",
    ),
    pytest.param(
        [offer("o1", "a1", [1, 3])],
        [job("j1", gpus=2)],
        [("j1", "a1", (1, 3))],
        [],
        id="takes-exactly-the-offered-ids",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3])],
        [job("j1", gpus=2), job("j2", gpus=1), job("j3", gpus=1)],
        [("j1", "a1", (0, 1)), ("j2", "a1", (2,)), ("j3", "a1", (3,))],
        [],
        id="several-jobs-share-one-offer",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1]), offer("o2", "a2", [0, 1, 2, 3])],
        [job("j1", gpus=4)],
        [("j1", "a2", (0, 1, 2, 3))],
        ["o1"],
        id="unused-agent-declined",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3]), offer("o2", "a2", [5])],
        [job("j1", gpus=1)],
        [("j1", "a2", (5,))],
        ["o1"],
        id="best-fit-keeps-big-hole-open",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1]), offer("o2", "a1", [2, 3])],
        [job("j1", gpus=4)],
        [("j1", "a1", (0, 1, 2, 3))],
        [],
        id="offers-of-one-agent-merged",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3], cpus=1.05)],
        [job("j1", gpus=1, cpus=1)],
        [],
        ["o1"],
        id="executor-overhead-counted",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3], mem=2000)],
        [job("j1", gpus=1, mem_mib=4096), job("j2", gpus=1, mem_mib=1024)],
        [("j2", "a1", (0,))],
        [],
        id="small-job-backfills-around-big-one",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1, 2, 3], gpus_scalar=1)],
        [job("j1", gpus=2)],
        [],
        ["o1"],
        id="gpus-scalar-also-limits",
    ),
    pytest.param(
        [offer("o1", "a1", []), offer("o2", "a2", [0])],
        [job("j1", gpus=1)],
        [("j1", "a2", (0,))],
        ["o1"],
        id="agent-without-gpu-ids-unused",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1]), offer("o2", "a2", [0, 1]), offer("o3", "a3", [0])],
        [job("j1", gpus=2, nodes=2)],
        [("j1", "a1", (0, 1)), ("j1", "a2", (0, 1))],
        ["o3"],
        id="gang-on-distinct-agents",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1]), offer("o2", "a2", [0])],
        [job("j1", gpus=2, nodes=2), job("j2", gpus=1)],
        [("j2", "a2", (0,))],
        ["o1"],
        id="gang-all-or-nothing-releases-partial",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1], attrs={"gpu_model": "Tesla-P100"})],
        [job("j1", gpus=1, gpu_model="V100")],
        [],
        ["o1"],
        id="gpu-model-attribute-mismatch",
    ),
    pytest.param(
        [
            offer("o1", "a1", [0, 1], attrs={"gpu_model": "Tesla-P100"}),
            offer("o2", "a2", [0, 1], attrs={"gpu_model": "vTesla_V100-SXM2-16GB"}),
        ],
        [job("j1", gpus=2, gpu_model="v100")],
        [("j1", "a2", (0, 1))],
        ["o1"],
        id="node-config-model-attribute-matches-ignoring-case",
    ),
    pytest.param(
        [offer("o1", "a1", [0, 1])],
        [job("lo", gpus=2, priority=0, at=1), job("hi", gpus=2, priority=5, at=2)],
        [("hi", "a1", (0, 1))],
        [],
        id="queue-order-is-callers-order",
    ),
]


@pytest.mark.parametrize("offers, queue, launches, declined", CASES)
def test_place(offers, queue, launches, declined):
    # the queue is given in the order placement must follow
    queue = sorted(queue, key=lambda j: (-j.spec.priority, j.submitted_at))
    result = place(offers, queue, FF)
    assert [(x.job_id, x.agent_id, x.gpu_ids) for x in result.launches] == launches
    assert result.declined == declined


def test_task_ids_carry_job_attempt_and_rank():
    result = place([offer("o1", "a1"), offer("o2", "a2")], [job("j9", gpus=8, nodes=2)], FF)
    assert [x.task_id for x in result.launches] == ["j9.0.0", "j9.0.1"]
    assert [x.rank for x in result.launches] == [0, 1]


def test_waiting_reason_names_the_shortage():
    result = place([offer("o1", "a1", [0, 1])], [job("j1", gpus=4)], FF)
    assert result.launches == []
    assert "4 free GPUs" in result.waiting["j1"]


def test_reserved_agent_takes_only_its_holder_others_backfill_elsewhere():
    queue = [job("big", gpus=4, at=1), job("small", gpus=1, at=2), job("tiny", gpus=1, at=3)]
    offers = [offer("o1", "a1", [0, 1]), offer("o2", "a2", [0])]
    free = place(offers, queue, FF)
    held = place(offers, queue, FF, reserved={"a1": "big"})
    assert [(x.job_id, x.agent_id) for x in free.launches] == [("small", "a2"), ("tiny", "a1")]
    assert [(x.job_id, x.agent_id) for x in held.launches] == [("small", "a2")]
    assert held.declined == ["o1"]
    assert held.waiting == {
        "big": "no offer has 4 free GPUs",
        "tiny": "waiting behind job big which reserves agent host-a1",
    }


def test_topology_models_restrict_gpus():
    # GPUs 0-1 are P100, 2-3 V100 on one mixed machine: the model filter picks 2-3.
    topo = pairs_topology(4, set(), model="Tesla P100")
    gpus = tuple(g if g.index < 2 else type(g)(g.index, model="Tesla V100") for g in topo.gpus)
    mixed = type(topo)(gpus, topo.links)
    attrs = {"dlc_topo": "x"}
    result = place(
        [offer("o1", "a1", [0, 1, 2, 3], attrs=attrs)],
        [job("j1", gpus=2, gpu_model="V100")],
        FF,
        topology_of=lambda a: mixed if a.get("dlc_topo") else None,
    )
    assert [x.gpu_ids for x in result.launches] == [(2, 3)]


@pytest.mark.parametrize(
    "driver, ok, launched",
    [
        pytest.param("550.54.14", True, True, id="new-driver-runs"),
        pytest.param("418.40.04", False, False, id="old-driver-skipped"),
    ],
)
def test_driver_constraint(driver, ok, launched):
    seen = []

    def driver_ok(drv, cuda):
        seen.append((drv, cuda))
        return ok

    result = place(
        [offer("o1", "a1", [0], attrs={"nvidia_driver": "v" + driver})],
        [job("j1", gpus=1, cuda_version="12.1")],
        FF,
        driver_ok=driver_ok,
    )
    assert seen == [(driver, "12.1")]
    assert bool(result.launches) is launched


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda name: PlacementConfig(policy=name), id="placement-config"),
        pytest.param(lambda name: ServiceConfig(master="m:5050", policy=name), id="service-config"),
        pytest.param(lambda name: LocalConfig(policy=name), id="local-config"),
    ],
)
def test_unknown_policy_is_refused_where_configured(make):
    with pytest.raises(ConfigError) as err:
        make("no-such")
    text = str(err.value)
    assert text.startswith("policy: unknown placement policy 'no-such'; pass --policy one of ")
    assert all(name in text for name in POLICY_MODULES) and "\n" not in text


def test_agent_without_topology_gets_first_fit_visibly(caplog):
    caplog.set_level(logging.WARNING, logger="dlc.scheduler.placement.gpu_choice")
    tree = PlacementConfig(policy="tree")
    agent = f"bare-{id(caplog)}"  # fresh id: the warning is once per agent per process
    for round_ in range(2):
        result = place([offer(f"o{round_}", agent, [2, 3])], [job("j1")], tree)
        assert [(x.gpu_ids, x.policy) for x in result.launches] == [((2,), NO_TOPOLOGY_POLICY)]
    warnings = [r for r in caplog.records if agent in r.getMessage()]
    assert len(warnings) == 1 and "first-fit" in warnings[0].getMessage()


def test_agent_with_topology_reports_the_configured_policy():
    topo = pairs_topology(4, {(2, 3)})
    result = place(
        [offer("o1", "a1", [0, 1, 2, 3])], [job("j1", gpus=2)],
        PlacementConfig(policy="tree"), topology_of=lambda attrs: topo,
    )  # fmt: skip
    assert [(x.gpu_ids, x.policy) for x in result.launches] == [((2, 3), "tree")]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"agent_id": {"value": "a"}}, id="no-id"),
        pytest.param(
            {
                "id": {"value": "o"},
                "agent_id": {"value": "a"},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {}}],
            },
            id="scalar-without-value",
        ),
        pytest.param(
            {
                "id": {"value": "o"},
                "agent_id": {"value": "a"},
                "resources": [{"name": "gpu_ids", "type": "SET", "set": {"item": ["x"]}}],
            },
            id="non-numeric-gpu-id",
        ),
    ],
)
def test_malformed_offer_raises(bad):
    with pytest.raises(OfferError):
        offer_view(bad)


def test_scalar_attributes_rendered_as_text():
    view = offer_view(
        {
            **offer("o1", "a1"),
            "attributes": [{"name": "rack", "type": "SCALAR", "scalar": {"value": 3.0}}],
        }
    )
    assert view.attributes == {"rack": "3"}


DGX1 = Path(__file__).resolve().parents[3] / "examples" / "topologies" / "dgx1-v100.txt"


@pytest.mark.parametrize(
    "free, count",
    [
        pytest.param(list(range(8)), 2, id="dgx1-all-free-2"),
        pytest.param([0, 1, 4, 6, 7], 2, id="dgx1-fragmented-2"),
        pytest.param(list(range(8)), 4, id="dgx1-all-free-4"),
    ],
)
def test_agent_topology_attribute_drives_the_tree_policy(free, count):
    """The offer's dlc_topo attribute (node-config's encoding) reaches the allocator."""
    from dlc.scheduler.allocator import allocate
    from dlc.topology.discovery.discover import discover
    from dlc.topology.node_config import node_config

    topo = discover(from_file=DGX1)
    attrs = node_config(topo).attributes
    result = place(
        [offer("o1", "a1", free, attrs=attrs)], [job("j1", gpus=count)], PlacementConfig("tree")
    )
    [launch] = result.launches
    assert launch.gpu_ids == tuple(allocate(topo, set(free), count, policy="tree"))
    assert all(link.nvlinks > 0 for link in topo.pairs(set(launch.gpu_ids)))


def test_waiting_reason_speaks_in_the_users_numbers():
    # 64 cpus asked: the message says 64 (not 64.1) and names the executor's share apart
    result = place([offer("o1", "a1", [0, 1], cpus=32)], [job("j1", gpus=1, cpus=64)], FF)
    reason = result.waiting["j1"]
    assert "has 64 cpus/" in reason and "64.1" not in reason
    assert "+0.1 cpus/64 MiB for DLC's executor" in reason
