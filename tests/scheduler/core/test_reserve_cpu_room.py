"""Red-team finding 53 (docs/security.md): the queue's one reservation went to the agent
with the most free GPUs, and a CPU-only job (``--gpus 0``) that holds an agent's CPUs leaves
its GPUs free: a big GPU job held that agent for the whole hold (30 minutes) without ever
having room there, and no other job could reserve meanwhile. An agent whose GPU-less tasks
leave too few CPUs or too little memory for the job is now held last."""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec, JobState

from ..helpers import offer
from .test_consolidation_core import make_core, status, submit


def _run(core, user, spec, agent, gpus, cpus=16.0):
    job = core.submit(user, JobSpec.from_dict({"image": "busybox", **spec}))
    core.on_offers([offer(f"o-{job.job_id}", agent, gpus, cpus=cpus, mem=200000)])
    core.on_status(status(f"{job.job_id}.0.0", "TASK_RUNNING", agent))
    assert core.visible_job(job.job_id, user).state is JobState.RUNNING
    return job


def test_reservation_skips_an_agent_whose_cpus_a_cpu_only_job_holds(tmp_path):
    core = make_core(tmp_path, moves_per_hour=0)  # max_skips 0: it reserves when passed over
    # a1: mallory's CPU-only job holds 61 of 64 CPUs, all 8 GPUs free;
    # a2: a 2-GPU job (6 GPUs free); a3: a 4-GPU job (4 free)
    _run(core, "mallory", {"gpus": 0, "cpus": 61}, "a1", list(range(8)), cpus=64)
    _run(core, "alice", {"gpus": 2}, "a2", list(range(8)))
    _run(core, "alice", {"gpus": 4}, "a3", list(range(8)))
    w = submit(core, 8, cpus=4)
    core.on_offers([offer("f1", "a1", list(range(8)), cpus=2.9),
                    offer("f2", "a2", list(range(2, 8))),
                    offer("f3", "a3", list(range(4, 8)))])  # fmt: skip
    # before the fix: "reserving agent a1: 8 of 8 GPUs free", where it can never start
    assert "reserving agent a2: 6 of 8 GPUs free" in core.queue_reason(w.job_id)


def test_an_agent_whose_gpu_jobs_hold_its_cpus_is_still_held_first(tmp_path):
    core = make_core(tmp_path, moves_per_hour=0)
    # a1's CPUs are held by a GPU job: they come back when it ends, with its GPUs
    _run(core, "alice", {"gpus": 1, "cpus": 60}, "a1", list(range(8)), cpus=64)
    _run(core, "alice", {"gpus": 2}, "a2", list(range(8)))
    _run(core, "alice", {"gpus": 4}, "a3", list(range(8)))
    w = submit(core, 8, cpus=4)
    core.on_offers([offer("f1", "a1", list(range(1, 8)), cpus=3.9),
                    offer("f2", "a2", list(range(2, 8))),
                    offer("f3", "a3", list(range(4, 8)))])  # fmt: skip
    assert "reserving agent a1: 7 of 8 GPUs free" in core.queue_reason(w.job_id)
