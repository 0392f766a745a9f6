"""CPU-only jobs (``gpus: 0``): placed on CPUs, memory, disk and ports alone, with no GPU,
on agents with or without GPUs (those without first), and admitted on agents without GPUs."""

from __future__ import annotations

import pytest

from dlc.scheduler.placement import gpu_choice
from dlc.scheduler.placement.gpu_choice import CPU_ONLY_POLICY
from dlc.scheduler.placement.inventory import AgentTotals, Inventory

from ..helpers import job, offer, place


@pytest.fixture
def no_allocator(monkeypatch):
    """The allocator fails the test if asked: a CPU-only job never needs it."""

    def refuse(*args, **kwargs):
        raise AssertionError("the allocator was asked for a CPU-only job's GPUs")

    monkeypatch.setattr(gpu_choice, "allocate", refuse)


def test_a_cpu_only_job_takes_no_gpu_on_an_agent_without_gpus(no_allocator):
    result = place([offer("o1", "a1", [], cpus=8)], [job("j1", gpus=0, cpus=4)])
    [launch] = result.launches
    assert (launch.agent_id, launch.gpu_ids, launch.policy) == ("a1", (), CPU_ONLY_POLICY)
    assert launch.share is None and not launch.gpu_take.mem and not launch.gpu_take.core
    assert result.waiting == {}


def test_agents_without_gpus_go_first_then_those_with_none_free_then_best_fit(no_allocator):
    busy = {"gpu_model": "V100"}  # an agent with GPUs, none of them offered now
    offers = [
        offer("o1", "a1", [0, 1]),  # free GPUs: kept for GPU jobs
        offer("o2", "a2", [], attrs=busy),
        offer("o3", "a3", []),  # no GPU at all
    ]
    first = place(offers, [job("j1", gpus=0)])
    assert [x.agent_id for x in first.launches] == ["a3"]
    second = place(offers[:2], [job("j1", gpus=0)])
    assert [x.agent_id for x in second.launches] == ["a2"]


def test_a_cpu_only_job_and_a_gpu_job_share_an_agent_without_taking_its_gpus():
    offers = [offer("o1", "a1", [0, 1], cpus=8)]
    result = place(offers, [job("cpu", gpus=0, cpus=2), job("gpu", gpus=2, cpus=2)])
    assert {x.job_id: x.gpu_ids for x in result.launches} == {"cpu": (), "gpu": (0, 1)}


def test_a_cpu_only_job_waits_for_cpus_and_the_reason_speaks_of_them():
    result = place([offer("o1", "a1", [0], cpus=2)], [job("j1", gpus=0, cpus=4)])
    reason = result.waiting["j1"]
    assert reason.startswith("no offer has 4 cpus/1024 MiB free (+0.1 cpus")
    assert "GPU" not in reason
    assert result.declined == ["o1"]


def test_a_cpu_only_job_with_a_cuda_image_runs_beside_an_old_driver(no_allocator):
    """No GPU is used, so the driver is no constraint (a CUDA build of PyTorch runs on CPU)."""
    old = {"nvidia_driver": "v400.1"}
    result = place([offer("o1", "a1", [0], attrs=old)], [job("j1", gpus=0, cuda_version="12.1")])
    assert [x.agent_id for x in result.launches] == ["a1"]


def test_a_cpu_only_gang_takes_one_port_per_node_and_no_gpu(no_allocator):
    offers = [offer("o1", "a1", []), offer("o2", "a2", [])]
    result = place(offers, [job("j1", gpus=0, nodes=2)])
    assert sorted(x.agent_id for x in result.launches) == ["a1", "a2"]
    assert all(x.gpu_ids == () and len(x.ports) == 1 for x in result.launches)
    assert len(result.launches[0].peers) == 2


def test_a_reserved_agent_with_room_is_named_for_a_cpu_only_job():
    offers = [offer("o1", "a1", [], cpus=8), offer("o2", "a2", [], cpus=1)]
    result = place(offers, [job("j1", gpus=0, cpus=4)], reserved={"a1": "big"})
    assert result.waiting["j1"] == "waiting behind job big which reserves agent host-a1"


def _inventory(*agents: AgentTotals) -> Inventory:
    inventory = Inventory()
    inventory.replace_agents(list(agents))
    return inventory


def test_admission_takes_a_cpu_only_job_on_a_cluster_of_agents_without_gpus():
    inventory = _inventory(AgentTotals("a1", "h1", cpus=16, mem_mib=65536, exact=True))
    spec = job("j1", gpus=0, cpus=8, cuda_version="12.1").spec
    assert inventory.impossible(spec) is None
    assert [a.agent_id for a in inventory.able_agents(spec)] == ["a1"]
    too_big = job("j2", gpus=0, cpus=64).spec
    error = inventory.impossible(too_big)
    assert error is not None and error.field == "cpus"
    assert "no agent has more than 16 for a job" in str(error)


def test_admission_ignores_an_old_driver_for_a_cpu_only_job():
    old = AgentTotals("a1", "h1", frozenset({0}), 16, 65536, attributes={"nvidia_driver": "400.1"},
                      exact=True)  # fmt: skip
    inventory = _inventory(old)
    assert inventory.impossible(job("j1", gpus=0, cuda_version="12.1").spec) is None
    assert inventory.impossible(job("j2", gpus=1, cuda_version="12.1").spec) is not None
