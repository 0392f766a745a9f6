"""The core's one picture of the cluster: per agent and per GPU, facts and states."""

from __future__ import annotations

from dataclasses import replace

from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.placement.cluster import GPU_DRAINING, GPU_FREE, GPU_TAKEN, WHOLE_GPU_MILLI
from dlc.store.memory import MemoryJobStore
from dlc.topology.node_config import agent_attributes

from ..helpers import offer, pairs_topology


def _core():
    return SchedulerCore(MemoryJobStore(), resolver=lambda s: (s.image, None), clock=lambda: 7.0)


def _topology():
    topo = pairs_topology(4, {(0, 1), (2, 3)}, model="H100")
    gpus = tuple(
        replace(g, uuid=f"GPU-{g.index}", minor=10 + g.index, memory_mib=81559) for g in topo.gpus
    )
    return replace(topo, gpus=gpus, driver_version="550.54")


def test_agents_gpus_with_facts_states_and_free_amounts():
    core = _core()
    attrs = agent_attributes(_topology())
    job = core.submit("alice", replace(_job_spec(), gpus=2))
    actions = core.on_offers([offer("o1", "a1", [0, 1, 2, 3], cpus=8, mem=4096, attrs=attrs)])
    assert actions.accepts
    (agent,) = core.cluster()
    assert agent.agent_id == "a1" and agent.hostname == "host-a1"
    assert (agent.free_cpus, agent.free_mem_mib, agent.offered_at) == (8, 4096, 7.0)
    assert agent.gpu_ids == {0, 1, 2, 3}
    gpu0 = agent.gpu(0)
    assert (gpu0.uuid, gpu0.minor, gpu0.model, gpu0.memory_mib) == ("GPU-0", 10, "H100", 81559)
    assert dict(gpu0.links)[1].startswith("NV") and dict(gpu0.links)[2] == "SYS"
    taken = agent.in_state(GPU_TAKEN)
    assert len(taken) == 2 and {g.holder.job_id for g in taken} == {job.job_id}
    assert all(g.free_compute_milli == 0 and g.free_memory_mib == 0 for g in taken)
    free = agent.in_state(GPU_FREE)
    assert len(free) == 2
    assert all(g.free_compute_milli == WHOLE_GPU_MILLI and g.free_memory_mib == 81559 for g in free)
    assert core.cluster_agent("a1") == agent and core.cluster_agent("nope") is None


def test_a_task_that_ended_without_proof_leaves_its_gpus_draining():
    core = _core()
    job = core.submit("alice", _job_spec())
    core.on_offers([offer("o1", "a1", [0, 1])])
    task = core.visible_job(job.job_id, "alice").tasks[0]
    core.on_status(
        {
            "task_id": {"value": task.task_id},
            "agent_id": {"value": "a1"},
            "state": "TASK_LOST",
            "reason": "REASON_AGENT_DISCONNECTED",
        }
    )
    (agent,) = core.cluster()
    states = {g.index: g.state for g in agent.gpus}
    assert states[task.gpu_ids[0]] == GPU_DRAINING
    assert GPU_FREE in states.values()


def test_master_totals_and_agents_known_only_from_the_master():
    core = _core()
    core.update_agents(
        [
            {
                "id": "a9",
                "hostname": "h9",
                "active": True,
                "resources": {"cpus": 32.0, "mem": 1024.0, "gpu_ids": "{0, 1}"},
                "attributes": {"gpu_model": "V100"},
            }
        ]
    )
    (agent,) = core.cluster()
    assert agent.exact and agent.cpus == 32.0 and agent.model == "V100"
    assert agent.free_cpus is None and agent.topology is None
    assert [g.state for g in agent.gpus] == [GPU_FREE, GPU_FREE] and agent.gpus[0].uuid is None


def _job_spec():
    from dlc.scheduler.jobs.job import JobSpec

    return JobSpec.from_dict({"image": "busybox", "gpus": 1, "cpus": 1, "mem_mib": 64})
