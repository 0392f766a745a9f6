"""Whole-GPU jobs go where fragmentation grows least (the measure the simulator's replay
credits), on agents with or without ``dlc_topo``, against the queued and running mix."""

from __future__ import annotations

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.jobs.queue import queue_order
from dlc.scheduler.placement.model import NO_TOPOLOGY_POLICY, PlacementConfig
from dlc.scheduler.placement.whole_score import counted_mix, demand_mix
from dlc.store.memory import MemoryJobStore
from tests.scheduler.helpers import place

from ..helpers import job, offer


def _bare_offers():
    """Two agents without dlc_topo: a1 has 2 GPUs free, a2 has 3."""
    return [offer("o1", "a1", [0, 1]), offer("o2", "a2", [0, 1, 2])]


def test_a_single_keeps_pairs_whole_where_best_fit_would_split_one():
    # best fit put the 1-GPU job on a1 (fewest free), leaving 1 + 3 GPUs: one pair fits, the
    # other waits. Scored against the queue (pairs), a2 takes it: 2 + 2, both pairs fit.
    queue = [job("single", gpus=1, at=1), job("pair1", gpus=2, at=2), job("pair2", gpus=2, at=3)]
    result = place(_bare_offers(), queue_order(queue), PlacementConfig("first-fit"))
    where = {x.job_id: x.agent_id for x in result.launches}
    assert where == {"single": "a2", "pair1": "a1", "pair2": "a2"}, result.waiting
    assert {x.policy for x in result.launches} == {NO_TOPOLOGY_POLICY}  # GPUs still first-fit


def test_equal_growth_falls_back_to_best_fit():
    # only singles expected: no agent state fragments for them, so the fewest free GPUs wins
    result = place(_bare_offers(), [job("single", gpus=1)], PlacementConfig("first-fit"))
    assert [(x.agent_id, x.gpu_ids) for x in result.launches] == [("a1", (0,))]


def test_the_core_scores_against_its_running_tasks_too():
    store = MemoryJobStore(clock=lambda: 10.0)
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    core = SchedulerCore(store, config, lambda spec: (spec.image, None), clock=lambda: 10.0)

    def submit(gpus: int) -> str:
        spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": 1})
        return core.submit("alice", spec).job_id

    pairs = [submit(2), submit(2)]
    first = core.on_offers([offer("o0", "c", [0, 1, 2, 3])])  # both pairs run on agent c
    assert sum(len(infos) for _, infos in first.accepts) == len(pairs)
    single = submit(1)
    # the queue alone (one single) ties everywhere; the running pairs make a1's last pair
    # worth keeping, so the single goes to a2
    actions = core.on_offers(_bare_offers())
    placed = [(i["agent_id"]["value"], i["task_id"]["value"]) for _, xs in actions.accepts
              for i in xs]  # fmt: skip
    assert placed == [("a2", f"{single}.0.0")]


def test_demand_mix_keeps_the_common_shapes():
    demands = [(1000, 1000, 1)] * 60 + [(2000, 1000, 2)] * 38 + [(500, 300, 1)] * 2
    mix = demand_mix(demands)
    shapes = {
        (s.cpu_milli, s.gpu_milli, s.num_gpus): w
        for s, w in zip(mix.shapes, mix.weights, strict=True)
    }
    assert shapes == {(1000, 1000, 1): 60.0, (2000, 1000, 2): 38.0}  # 98% covers >= 95%
    assert demand_mix([]) is None


def test_demand_mix_keeps_rare_shapes_that_ask_many_gpus():
    # 3% of the tasks but 20% of the GPUs: without it nothing keeps an 8-GPU agent whole
    demands = [(1000, 1000, 1)] * 95 + [(8000, 1000, 8)] * 3 + [(500, 300, 1)] * 2
    mix = demand_mix(demands)
    shapes = {
        (s.cpu_milli, s.gpu_milli, s.num_gpus): w
        for s, w in zip(mix.shapes, mix.weights, strict=True)
    }
    assert shapes == {(1000, 1000, 1): 95.0, (8000, 1000, 8): 3.0}  # weighted by count


def test_a_cpu_only_job_goes_where_its_cpu_costs_the_mix_fewest_gpus():
    # a1 has 2 GPUs free beside 10 CPUs, a2 4 GPUs beside 40. Best fit (fewest free GPUs)
    # would put the 4-CPU job on a1, leaving 6 CPUs there: a1's 2 GPUs could no longer host a
    # queued pair (8 CPUs). Scored against the queue, it goes to a2 (36 CPUs left, no loss),
    # and the pair then takes a1 whole.
    offers = [offer("o1", "a1", [0, 1], cpus=10), offer("o2", "a2", [0, 1, 2, 3], cpus=40)]
    queue = [job("cpu", gpus=0, cpus=4, at=1), job("pair", gpus=2, cpus=8, at=2)]
    config = PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0)
    result = place(offers, queue_order(queue), config)
    where = {x.job_id: (x.agent_id, x.gpu_ids) for x in result.launches}
    assert where == {"cpu": ("a2", ()), "pair": ("a1", (0, 1))}, result.waiting


def test_a_cpu_only_job_takes_an_agent_without_gpus_among_equals():
    # neither agent loses a pair's host: equal growth, so the fewest free GPUs wins
    offers = [offer("o1", "a1", [0, 1], cpus=40), offer("o0", "a0", [], cpus=8)]
    queue = [job("cpu", gpus=0, cpus=4, at=1), job("pair", gpus=2, cpus=8, at=2)]
    config = PlacementConfig("first-fit", executor_cpus=0.0, executor_mem_mib=0.0)
    result = place(offers, queue_order(queue), config)
    where = {x.job_id: (x.agent_id, x.gpu_ids) for x in result.launches}
    assert where == {"cpu": ("a0", ()), "pair": ("a1", (0, 1))}, result.waiting


def test_the_last_empty_8_gpu_agent_stays_whole_while_others_take_a_single():
    # gpushare40/60/80 mid-load in small (docs/simulator.md, "The gpushare mid-load gap"): the
    # 8-GPU pods are rare, so FGD's measure charges a 1-GPU pod on an empty 8-GPU agent less
    # than one 40-thousandth bucket, and the CPU cap on shares makes the CPU-poorer agents
    # dearer: the single took a0, the last agent with 8 GPUs free, and the 8-GPU pod waited.
    # Its hosts counted against the agents the single fits on (7 for 1), a0 is kept whole.
    mix = counted_mix({(11000, 1000, 1): 500, (8000, 500, 1): 300, (64000, 1000, 8): 8})
    offers = [offer("o0", "a0", list(range(8)), cpus=96, mem=393216)]
    offers += [offer(f"o{k}", f"a{k}", [0, 1], cpus=14) for k in range(1, 7)]
    queue = [
        job("single", gpus=1, cpus=11, mem_mib=1024, at=1),
        job("big", gpus=8, cpus=64, mem_mib=262144, at=2),
    ]
    result = place(offers, queue_order(queue), PlacementConfig("first-fit"), mix=mix)
    where = {x.job_id: x.agent_id for x in result.launches}
    assert where == {"single": "a1", "big": "a0"}, result.waiting
