"""A CPU-only job (``gpus: 0``) through SchedulerCore: placed beside GPU agents on one
without GPUs, launched with no GPU resource, run to the end; a waiting one holds an agent
without GPUs rather than a GPU agent."""

from __future__ import annotations

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer
from .test_core import resolver, slave, status, submit


def test_a_cpu_only_job_runs_on_an_agent_without_gpus_and_asks_no_gpu(tmp_path):
    core = SchedulerCore(JobStore(tmp_path / "db"), CoreConfig(), resolver)
    job = submit(core, gpus=0, cpus=2)  # the framework's CUDA image runs on CPUs as well
    actions = core.on_offers([offer("o1", "gpu1", [0, 1]), offer("o2", "cpu1", [])])
    assert actions.declines == ["o1"]
    [(offer_ids, [info])] = actions.accepts
    assert offer_ids == ["o2"]
    assert [r["name"] for r in info["resources"]] == ["cpus", "mem"]
    assert info["name"] == f"dlc {job.job_id} pytorch:2.3 cpu only"
    staged = core.store.get_job(job.job_id)
    assert staged.message == "launching on host-cpu1 (CPU only)" and staged.gpu_ids == ()
    task_id = f"{job.job_id}.0.0"
    for state in ("TASK_RUNNING", "TASK_FINISHED"):
        core.on_status(status(task_id, state, agent="cpu1"))
    assert core.store.get_job(job.job_id).state is JobState.FINISHED


def test_a_waiting_cpu_only_job_reserves_an_agent_without_gpus(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_skips=0)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    core.update_agents([slave("gpu1", gpus=8), slave("cpu1", gpus=0)])
    job = submit(core, gpus=0, cpus=12)
    core.on_offers([offer("o1", "gpu1", list(range(8)), cpus=4), offer("o2", "cpu1", [], cpus=4)])
    message = core.store.get_job(job.job_id).message
    assert message == "waiting: reserving agent cpu1: 4 of 16 cpus free (30 min left)"


def test_an_elastic_cpu_only_gang_grows_onto_agents_without_gpus(tmp_path):
    """A parameter-server style gang (``--gpus 0 --nodes 1:3``) starts on one node and grows;
    every member holds no GPU (consolidation, on here, passes it by)."""
    config = CoreConfig(placement=PlacementConfig("first-fit"), consolidation_moves_per_hour=5)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, resolver)
    gang = submit(core, gpus=0, nodes="1:3", cpus=2)
    first = core.on_offers([offer("o1", "c1", []), offer("o2", "g1", [0, 1], cpus=1)])
    assert [info["name"] for _, infos in first.accepts for info in infos] == [
        f"dlc {gang.job_id} pytorch:2.3 cpu only node 1/1:3"
    ]
    core.on_status(status(f"{gang.job_id}.0.0", "TASK_RUNNING", agent="c1"))
    grown = core.on_offers([offer("o3", "c2", []), offer("o4", "c3", [])])
    names = sorted(info["name"] for _, infos in grown.accepts for info in infos)
    assert names == [f"dlc {gang.job_id} pytorch:2.3 cpu only node {n}/1:3" for n in (2, 3)]
    tasks = core.store.get_job(gang.job_id).tasks
    assert [t.gpu_ids for t in tasks] == [(), (), ()]


def test_held_gpus_are_not_what_a_waiting_cpu_only_job_is_told_it_waits_for(tmp_path):
    core = SchedulerCore(JobStore(tmp_path / "db"), CoreConfig(), resolver)
    gpu_job = submit(core, gpus=2, retries=1)
    core.on_offers([offer("o1", "a1", [0, 1])])
    old = f"{gpu_job.job_id}.0.0"
    core.on_status(status(old, "TASK_RUNNING"))
    core.on_status(status(old, "TASK_LOST", reason="REASON_AGENT_DISCONNECTED"))
    cpu_job = submit(core, gpus=0, cpus=64)
    core.on_offers([offer("o2", "a1", [0, 1])])
    assert core.draining_gpus("a1") == {0, 1}  # the GPU job's retry waits for them
    assert "confirmed gone" in core.store.get_job(gpu_job.job_id).message
    message = core.store.get_job(cpu_job.job_id).message
    assert message.startswith("waiting: no offer has 64 cpus") and "GPU" not in message
