"""Red-team finding 52 (docs/security.md): consolidation counted GPUs only.

A CPU-only job (``--gpus 0``) holds an agent's CPUs and memory and is never moved (it frees no
GPU), and the placer steers CPU-only work onto GPU agents whose GPUs are busy: the agents
consolidation clears. Clearing such an agent stopped GPU jobs for a set the waiting job could
not take anyway (its CPUs were held), and a moved job could be sent to an agent whose CPUs
were gone. A plan now counts the CPUs and memory DLC's live tasks hold on each agent.
"""

from __future__ import annotations

from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.consolidation import (
    AgentGpus,
    ConsolidationRequest,
    NoPlan,
    RunningJob,
    plan_consolidation,
)

from ..helpers import offer
from .test_consolidation_core import (
    fragment,
    fragmented_offers,
    make_core,
    status,
    submit,
)


def _want(agents, jobs, cpus: float) -> ConsolidationRequest:
    """The waiting job: 8 GPUs, ``cpus`` CPUs and 1,088 MiB (executor included)."""
    return ConsolidationRequest(job_id="w", gpus=8, priority=0, agents=agents, running=jobs,
                                moves_left=4, cpus=cpus, mem_mib=1088.0)  # fmt: skip


def _half_free(agent_id: str, cpus: float | None, mem: float | None = 100000.0) -> AgentGpus:
    """An 8-GPU agent with GPUs 4-7 free and ``cpus``/``mem`` free (``None``: not known)."""
    return AgentGpus(
        agent_id=agent_id, free=frozenset(range(4, 8)), total=8, cpus_free=cpus, mem_free=mem
    )


def _running(job_id, agent_id, ids, cpus=1.1, mem=1088.0) -> RunningJob:
    return RunningJob(job_id=job_id, agent_id=agent_id, gpu_ids=tuple(ids), lost_gpu_h=1.0,
                      cpus=cpus, mem_mib=mem)  # fmt: skip


def test_an_agent_whose_cpus_a_cpu_only_job_holds_is_not_cleared(tmp_path):
    core = make_core(tmp_path, moves_per_hour=4)
    a, b, c, d = fragment(core)
    # mallory's CPU-only job takes 61 of a2's 64 CPUs (B and C hold 1.1 each)
    x = core.submit("mallory", JobSpec.from_dict({"image": "busybox", "gpus": 0, "cpus": 61}))
    core.on_offers([offer("ox", "a2", [6, 7], cpus=61.8, mem=200000)])
    core.on_status(status(f"{x.job_id}.0.0", "TASK_RUNNING", "a2"))
    assert core.visible_job(x.job_id, "mallory").state is JobState.RUNNING
    w = submit(core, 8, cpus=4)  # a2 cleared of B and C would have 2.9 CPUs free
    actions = core.on_offers(fragmented_offers(1))
    assert actions.kills == []  # before the fix: B and C were stopped for nothing
    for job in (a, b, c, d):
        assert core.visible_job(job.job_id, "alice").state is JobState.RUNNING
    assert core.visible_job(w.job_id, "alice").state is JobState.QUEUED


def test_the_planner_does_not_clear_an_agent_without_the_waiting_jobs_cpus():
    agents = [_half_free("a1", cpus=2.0), _half_free("a2", cpus=60.0)]
    jobs = [_running("j1", "a1", [0, 1, 2, 3])]
    want = _want(agents, jobs, 4.1)
    # a1 cleared of j1 would have 3.1 CPUs: less than the 4.1 the waiting job needs
    assert isinstance(plan_consolidation(want), NoPlan)
    roomy = [_half_free("a1", cpus=3.0), agents[1]]
    plan = plan_consolidation(_want(roomy, jobs, 4.1))
    assert not isinstance(plan, NoPlan) and plan.agent_id == "a1"


def test_a_moved_job_needs_cpus_and_memory_where_it_goes():
    # a2: four free GPUs but no memory left for j1
    agents = [_half_free("a1", cpus=50.0), _half_free("a2", cpus=50.0, mem=500.0)]
    jobs = [_running("j1", "a1", [0, 1, 2, 3])]
    plan = plan_consolidation(_want(agents, jobs, 1.1))
    assert isinstance(plan, NoPlan)


def test_unknown_room_is_not_checked_as_before():
    agents = [_half_free("a1", cpus=None, mem=None), _half_free("a2", cpus=None, mem=None)]
    jobs = [_running("j1", "a1", [0, 1, 2, 3])]
    plan = plan_consolidation(_want(agents, jobs, 4.1))
    assert not isinstance(plan, NoPlan)
