"""The consolidation planner (pure): all-or-nothing moves, cheapest plan, budget."""

from __future__ import annotations

from dlc.scheduler.placement.consolidation import (
    AgentGpus,
    ConsolidationPlan,
    ConsolidationRequest,
    MoveBudget,
    NoPlan,
    RunningJob,
    plan_consolidation,
)


def agent(agent_id: str, free: set[int], total: int = 8) -> AgentGpus:
    return AgentGpus(
        agent_id=agent_id, free=frozenset(free), total=total, hostname=f"host-{agent_id}"
    )


def running(job_id, agent_id, ids, lost=1.0, **kw) -> RunningJob:
    return RunningJob(job_id=job_id, agent_id=agent_id, gpu_ids=tuple(ids), lost_gpu_h=lost, **kw)


def request(agents, jobs, gpus=8, moves=4, priority=0) -> ConsolidationRequest:
    return ConsolidationRequest(
        job_id="w", gpus=gpus, priority=priority, agents=agents, running=jobs, moves_left=moves
    )


def fragmented():
    """a1: 6 free + j1 (2 GPUs); a2: 6 busy (j2: 4, j3: 2) + 2 free; a3: 4 free + j4 (4)."""
    agents = [agent("a1", set(range(2, 8))), agent("a2", {6, 7}), agent("a3", {4, 5, 6, 7})]
    jobs = [
        running("j1", "a1", [0, 1], lost=5.0),
        running("j2", "a2", [0, 1, 2, 3], lost=1.0),
        running("j3", "a2", [4, 5], lost=1.0),
        running("j4", "a3", [0, 1, 2, 3], lost=2.0),
    ]
    return agents, jobs


def test_a_fragmented_cluster_gets_the_cheapest_joint_plan():
    agents, jobs = fragmented()
    plan = plan_consolidation(request(agents, jobs))
    assert isinstance(plan, ConsolidationPlan)
    # j4 (2.0 GPU-hours) on a3 is cheaper than j1 (5.0) on a1 or j2+j3 (2.0, two moves)
    assert (plan.agent_id, [m.job_id for m in plan.moves]) == ("a3", ["j4"])
    assert plan.gpu_ids == tuple(range(8))
    (move,) = plan.moves
    assert move.to_agent == "a1" and len(move.gpu_ids) == 4
    assert plan.lost_gpu_h == 2.0
    assert plan.reason() == (
        "moved to make room for job w (consolidation; 8 GPUs on one node, host-a3)"
    )


def test_refuses_when_one_moved_job_has_no_place():
    # a1: j1 (4) + j2 (2) + 2 free; a2: 3 free; a3: 3 free. Clearing a1 needs both moved:
    # j2 fits on a2 or a3, but j1 (4 GPUs) fits nowhere, so nothing moves, not even j2.
    agents = [agent("a1", {6, 7}), agent("a2", {0, 1, 2}, 4), agent("a3", {0, 1, 2}, 4)]
    jobs = [running("j1", "a1", [0, 1, 2, 3]), running("j2", "a1", [4, 5])]
    plan = plan_consolidation(request(agents, jobs))
    assert isinstance(plan, NoPlan)
    assert "all find a place" in plan.reason


def test_places_are_checked_jointly_not_one_by_one():
    # Each of j1, j2 (2 GPUs) alone fits a2's 3 free GPUs; both together do not. a3 has 1
    # more free. One by one would say yes; jointly the plan must refuse.
    agents = [agent("a1", {4, 5, 6, 7}), agent("a2", {0, 1, 2}, 4), agent("a3", {0}, 4)]
    jobs = [running("j1", "a1", [0, 1]), running("j2", "a1", [2, 3])]
    assert isinstance(plan_consolidation(request(agents, jobs)), NoPlan)
    # one free GPU more on a3 and both have a place at once: j1 -> a2, j2 -> a3 (or so)
    agents[2] = agent("a3", {0, 1}, 4)
    plan = plan_consolidation(request(agents, jobs))
    assert isinstance(plan, ConsolidationPlan)
    destinations = [(m.to_agent, m.gpu_ids) for m in plan.moves]
    assert len({(a, i) for a, ids in destinations for i in ids}) == 4  # no GPU given twice


def test_never_moves_non_preemptible_or_higher_priority_jobs():
    agents, jobs = fragmented()
    pinned = [
        RunningJob(job_id=j.job_id, agent_id=j.agent_id, gpu_ids=j.gpu_ids, lost_gpu_h=j.lost_gpu_h,
                   preemptible=j.job_id != "j4", priority=5 if j.job_id == "j1" else 0)
        for j in jobs
    ]  # fmt: skip
    plan = plan_consolidation(request(agents, pinned))
    # j4 may not move, j1 outranks the waiting job: only a2's two jobs are left to move
    assert isinstance(plan, ConsolidationPlan)
    assert plan.agent_id == "a2" and sorted(m.job_id for m in plan.moves) == ["j2", "j3"]
    # j1 (priority 5) is the only way to clear a1: moved for a waiting job of 5, not of 0
    a1_only = [agents[0], agent("a2", {0, 1}, 2)]
    assert isinstance(plan_consolidation(request(a1_only, pinned[:1])), NoPlan)
    plan = plan_consolidation(request(a1_only, pinned[:1], priority=5))
    assert [m.job_id for m in plan.moves] == ["j1"]


def test_respects_the_move_budget():
    agents, jobs = fragmented()
    only_a2 = [j for j in jobs if j.agent_id == "a2"]  # clearing a2 takes two moves
    assert isinstance(plan_consolidation(request(agents, only_a2, moves=2)), ConsolidationPlan)
    no_plan = plan_consolidation(request(agents, only_a2, moves=1))
    assert isinstance(no_plan, NoPlan)
    assert isinstance(plan_consolidation(request(agents, jobs, moves=0)), NoPlan)


def test_nothing_moves_when_the_set_fits_or_too_few_gpus_are_free():
    agents, jobs = fragmented()
    fits = plan_consolidation(request(agents + [agent("a4", set(range(8)))], jobs))
    assert isinstance(fits, NoPlan) and "fit on one agent already" in fits.reason
    # 14 GPUs free in all: a 16-GPU set is beyond any moving
    scarce = plan_consolidation(request(agents, jobs, gpus=16))
    assert isinstance(scarce, NoPlan)


def test_a_topology_chooser_can_refuse_a_set_that_spans_two_nvlink_groups():
    # a1's GPUs are two NVLink groups {0-3} and {4-7}; a 4-GPU job wants one group.
    def one_group(agent_id, free, count):
        for group in (set(range(4)), set(range(4, 8))):
            if len(free & group) >= count:
                return tuple(sorted(free & group)[:count])
        return None

    agents = [agent("a1", {0, 1, 4}), agent("a2", {0, 1}, 2), agent("a3", {0, 1}, 2)]
    jobs = [
        running("j1", "a1", [2, 5], lost=0.5),  # cheapest, but its GPUs span both groups
        running("j2", "a1", [6, 7], lost=3.0),
        running("j3", "a1", [3], lost=3.0),
    ]
    by_count = plan_consolidation(
        ConsolidationRequest(
            job_id="w", gpus=4, priority=0, agents=agents, running=jobs, moves_left=4
        )
    )
    assert [m.job_id for m in by_count.moves] == ["j1"]  # 5 free GPUs, but in two groups
    plan = plan_consolidation(
        ConsolidationRequest(
            job_id="w",
            gpus=4,
            priority=0,
            agents=agents,
            running=jobs,
            moves_left=4,
            choose=one_group,
        )
    )
    assert isinstance(plan, ConsolidationPlan)
    assert sorted(m.job_id for m in plan.moves) == ["j1", "j2"]
    assert plan.gpu_ids == (4, 5, 6, 7)


def test_move_budget_rolls_over_an_hour():
    budget = MoveBudget(3)
    budget.spend(100.0, 2)
    assert budget.left(200.0) == 1
    budget.spend(200.0, 1)
    assert budget.left(3699.0) == 0
    assert budget.left(3700.0) == 2  # the two moves at t=100 are an hour old
    assert MoveBudget(0).left(0.0) == 0
