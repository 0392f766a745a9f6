"""Jobs that allow only some GPU models (``gpu_model: T4``, ``gpu_model: V100M16|V100M32``).

A job may allow several models; placement, the core's attribute match and the direct openb
replay honour every one of them and no other. The mix placement scores fragmentation against
keeps each shape's allowed models (as FGD's target workload does), so jobs that may run
anywhere leave the agents of a model that restricted jobs need.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.allocator.shares import ShareRequest, WorkloadMix
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.whole_score import counted_mix
from dlc.sim.cluster import ClusterState
from dlc.sim.openb_jobs import spec_of
from dlc.sim.policies.base import ClusterView
from dlc.sim.policies.engine import EnginePolicy
from dlc.sim.trace import NodeSpec, PodSpec
from dlc.store.memory import MemoryJobStore
from tests.scheduler.helpers import job, offer, place
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job


@pytest.mark.parametrize(
    ("wanted", "model", "ok"),
    [
        ("V100M16|V100M32", "V100M32", True),
        ("V100M16|V100M32", "V100M16", True),
        ("V100M16|V100M32", "G2", False),
        ("T4|A10", "NVIDIA_A10", True),
        ("V100", "Tesla_V100-SXM2", True),
    ],
)
def test_a_model_matches_any_of_the_allowed_ones(wanted, model, ok):
    assert model_matches(wanted, model) is ok


def test_several_models_are_a_valid_spec_and_a_bad_part_names_the_field():
    JobSpec(image="busybox", gpus=1, gpu_model="V100M16|V100M32").check()
    for bad in ("V100|", "|T4", "V100|.*"):
        with pytest.raises(JobSpecError) as err:
            JobSpec(image="busybox", gpus=1, gpu_model=bad).check()
        text = str(err.value)
        assert text.startswith("gpu_model") and "\n" not in text, text


def test_placement_uses_only_an_allowed_model():
    offers = [
        offer("o1", "a1", [0, 1], attrs={"gpu_model": "G2"}),
        offer("o2", "a2", [0, 1], attrs={"gpu_model": "V100M32"}),
    ]
    pair = job("v", gpus=1, gpu_model="V100M16|V100M32")
    result = place(offers, [pair], PlacementConfig("first-fit"))
    assert [x.agent_id for x in result.launches] == ["a2"]
    result = place(offers[:1], [pair], PlacementConfig("first-fit"))
    assert result.launches == [] and "v" in result.waiting


def test_the_core_launches_a_job_of_several_models_on_one_of_them_only():
    store = MemoryJobStore(clock=lambda: 10.0)
    core = SchedulerCore(
        store, CoreConfig(placement=PlacementConfig("first-fit")),
        lambda spec: (spec.image, None), clock=lambda: 10.0,
    )  # fmt: skip
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, "cpus": 1, "gpu_model": "P100|T4"})
    job_id = core.submit("alice", spec).job_id
    actions = core.on_offers(
        [
            offer("o1", "g2", [0, 1], attrs={"gpu_model": "G2"}),
            offer("o2", "t4", [0, 1], attrs={"gpu_model": "T4"}),
        ]
    )
    placed = [(i["agent_id"]["value"], i["task_id"]["value"]) for _, xs in actions.accepts
              for i in xs]  # fmt: skip
    assert placed == [("t4", f"{job_id}.0.0")]


def test_the_mix_keeps_the_allowed_models_of_each_shape():
    mix = counted_mix({(1000, 1000, 1, ("T4",)): 5, (1000, 1000, 1): 5})
    assert mix is not None
    assert {s.gpu_models for s in mix.shapes} == {frozenset({"T4"}), frozenset()}


def _scarce_model_offers():
    """A T4 agent first in every order (agent id, offer order), a G2 agent alike after it."""
    return [
        offer("o1", "a-t4", [0, 1], cpus=8, attrs={"gpu_model": "T4"}),
        offer("o2", "b-g2", [0, 1], cpus=8, attrs={"gpu_model": "G2"}),
    ]


def test_a_job_that_may_run_anywhere_leaves_the_model_restricted_jobs_need():
    # the expected workload is mostly T4-only pairs: the T4 agent is the one to keep whole
    mix = counted_mix({(1000, 1000, 2, ("T4",)): 9, (1000, 1000, 1): 1})
    result = place(
        _scarce_model_offers(), [job("any", gpus=1, cpus=1)], PlacementConfig("first-fit"),
        mix=mix,
    )  # fmt: skip
    assert [x.agent_id for x in result.launches] == ["b-g2"]


def _with_model(body: dict, model: str) -> dict:
    body["attributes"].append({"name": "gpu_model", "type": "TEXT", "text": {"value": model}})
    return body


def test_a_share_that_may_run_anywhere_leaves_the_model_restricted_jobs_need():
    mix = counted_mix({(1000, 1000, 2, ("T4",)): 9, (100, 500, 1): 1})
    offers = [
        _with_model(ranged_offer("o1", "a-t4", gpus=2), "T4"),
        _with_model(ranged_offer("o2", "b-g2", gpus=2), "G2"),
    ]
    result = place(offers, [share_job("any", gpus=0.5)], PlacementConfig("first-fit"), mix=mix)
    assert [x.agent_id for x in result.launches] == ["b-g2"]


def test_without_restricted_shapes_the_model_changes_nothing():
    mix = counted_mix({(1000, 1000, 2): 9, (1000, 1000, 1): 1})
    result = place(
        _scarce_model_offers(), [job("any", gpus=1, cpus=1)], PlacementConfig("first-fit"),
        mix=mix,
    )  # fmt: skip
    assert [x.agent_id for x in result.launches] == ["a-t4"]  # a tie: the first agent id


def test_an_openb_pod_of_several_models_is_a_job_of_those_models():
    pod = PodSpec("p", 1000, 1024, 1, 1000, gpu_models=frozenset({"V100M32", "V100M16"}))
    spec = spec_of(pod)
    assert spec is not None and spec.gpu_model == "V100M16|V100M32"


def test_the_direct_replay_never_places_a_pod_on_a_model_it_does_not_allow():
    nodes = [
        NodeSpec("n-g2", 16000, 65536, 2, "G2"),
        NodeSpec("n-v16", 16000, 65536, 2, "V100M16"),
        NodeSpec("n-v32", 16000, 65536, 2, "V100M32"),
    ]
    cluster = ClusterState(nodes)
    view = ClusterView(cluster, None)  # type: ignore[arg-type]  # the engine reads no frag
    policy, rng = EnginePolicy(), np.random.default_rng(0)
    allowed = frozenset({"V100M16", "V100M32"})
    where = []
    for k in range(5):
        pod = PodSpec(f"p{k}", 1000, 1024, 1, 1000, gpu_models=allowed)
        at = policy(pod, view, rng)
        if at is not None:
            cluster.place(pod, at)
            where.append(cluster.model_names[int(cluster.model[at.node])])
    assert sorted(where) == ["V100M16", "V100M16", "V100M32", "V100M32"]


def _mix(weights: dict[tuple[int, int, int, tuple[str, ...]], float]) -> WorkloadMix:
    """A mix of exactly these shapes (counted_mix leaves out a shape this rare)."""
    shapes = tuple(
        ShareRequest(cpu, 0, gpus, milli, frozenset(models)) for cpu, milli, gpus, models in weights
    )
    return WorkloadMix(shapes, tuple(weights.values()))


def test_a_tie_of_the_measure_goes_to_the_model_least_needed_by_restricted_jobs():
    # a P100-only shape is 2% of the mix: less than one tie bucket of the measure, so alone
    # the best-fit tie-break took the first agent (the P100 one); the model's pressure
    # (restricted demand per agent of the model) sends the job to the G2 agent instead
    mix = _mix({(1000, 1000, 1, ("P100",)): 1, (1000, 1000, 1, ()): 50})
    offers = [
        offer("o1", "a-p100", [0, 1], cpus=8, attrs={"gpu_model": "P100"}),
        offer("o2", "b-g2", [0, 1], cpus=8, attrs={"gpu_model": "G2"}),
    ]
    result = place(offers, [job("any", gpus=1, cpus=1)], PlacementConfig("first-fit"), mix=mix)
    assert [x.agent_id for x in result.launches] == ["b-g2"]
    share = share_job("s", gpus=0.5)
    mix = _mix({(1000, 500, 1, ("P100",)): 1, (100, 500, 1, ()): 50})
    offers = [
        _with_model(ranged_offer("o1", "a-p100", gpus=2), "P100"),
        _with_model(ranged_offer("o2", "b-g2", gpus=2), "G2"),
    ]
    result = place(offers, [share], PlacementConfig("first-fit"), mix=mix)
    assert [x.agent_id for x in result.launches] == ["b-g2"]


def test_the_pressure_counts_only_agents_that_can_host_the_job():
    # the direct replay offers only the agents a pod fits, the core every agent with room: the
    # agents of a model that cannot host the job (too few CPUs) must not change the choice
    mix = _mix({(1000, 1000, 1, ("P100",)): 0.5, (1000, 1000, 1, ("G2",)): 0.75,
                (4000, 1000, 1, ()): 50})  # fmt: skip
    hosts = [
        offer("o1", "b-g2", [0, 1], cpus=8, attrs={"gpu_model": "G2"}),
        offer("o2", "z-p100", [0, 1], cpus=8, attrs={"gpu_model": "P100"}),
    ]
    short = [
        offer(f"o{k}", f"{name}-g2", [0, 1], cpus=0.5, attrs={"gpu_model": "G2"})
        for k, name in ((3, "c"), (4, "d"))
    ]
    config = PlacementConfig("first-fit")
    alone = place(hosts, [job("any", gpus=1, cpus=4)], config, mix=mix)
    offered = place(hosts + short, [job("any", gpus=1, cpus=4)], config, mix=mix)
    assert [x.agent_id for x in alone.launches] == ["z-p100"]  # G2: 0.75 per host, P100: 0.5
    assert [x.agent_id for x in offered.launches] == ["z-p100"]
