"""The model reserve (``mix_models.reserved``): a whole-GPU job that may run on other models
tries last the agents of a GPU model whose free room is below the part of the expected GPU
demand that jobs restricted to it make (docs/simulator.md, "Model reserve")."""

from __future__ import annotations

import numpy as np

from dlc.scheduler.allocator.mix_models import reserved
from dlc.scheduler.allocator.shares import MixArrays, ShareRequest, WorkloadMix
from dlc.scheduler.placement import whole_score
from dlc.scheduler.placement.model import PlacementConfig
from tests.scheduler.helpers import job, offer, place


def _mix(weights: dict[tuple[int, int, int, tuple[str, ...]], float]) -> WorkloadMix:
    """A mix of exactly these shapes: (CPU thousandths, GPU thousandths, GPUs, models)."""
    shapes = tuple(
        ShareRequest(cpu, 0, gpus, milli, frozenset(models)) for cpu, milli, gpus, models in weights
    )
    return WorkloadMix(shapes, tuple(weights.values()))


#: P100-only single GPUs make 3000 of 16000 expected GPU thousandths (19%); pairs that may run
#: anywhere, 60% of the pods, make the measure favour filling a half-used agent
MIX = _mix({
    (1000, 1000, 1, ("P100",)): 3, (1000, 1000, 1, ()): 1, (1000, 1000, 2, ()): 6,
})  # fmt: skip


def _offers() -> list[dict]:
    """A P100 agent with one of its two GPUs free (1000 of the 9000 free thousandths, 11%, under
    the P100-only jobs' 19%), first by agent id; an empty 8-GPU G2 agent."""
    return [
        offer("o1", "a-p100", [1], cpus=8, attrs={"gpu_model": "P100"}),
        offer("o2", "b-g2", list(range(8)), cpus=64, attrs={"gpu_model": "G2"}),
    ]


def test_a_job_that_may_run_elsewhere_leaves_a_kept_model_even_where_the_measure_prefers_it():
    # filling the P100 agent's last GPU lowers the measure (its lone GPU was fragmented for
    # pairs: -600) more than a GPU of the G2 agent does (fragmented for the P100-only shape:
    # -300), by more than a tie bucket: before the reserve the job took the P100's last GPU
    result = place(_offers(), [job("any", gpus=1, cpus=1)], PlacementConfig("first-fit"), mix=MIX)
    assert [x.agent_id for x in result.launches] == ["b-g2"]


def test_a_job_restricted_to_the_kept_model_still_goes_there():
    restricted = job("p100", gpus=1, cpus=1, gpu_model="P100")
    result = place(_offers(), [restricted], PlacementConfig("first-fit"), mix=MIX)
    assert [x.agent_id for x in result.launches] == ["a-p100"]


def test_a_kept_model_still_takes_a_job_that_fits_nowhere_else():
    offers = _offers()[:1] + [offer("o2", "b-g2", [], cpus=64, attrs={"gpu_model": "G2"})]
    result = place(offers, [job("any", gpus=1, cpus=1)], PlacementConfig("first-fit"), mix=MIX)
    assert [x.agent_id for x in result.launches] == ["a-p100"]


def test_the_reserve_marks_a_model_only_below_its_restricted_part_of_the_demand():
    arrays = MixArrays(MIX, ["", "P100", "G2"])
    rows = np.array([1, 2])
    # P100: 1000 of 9000 free (11%) under its 19% of the demand; G2 serves no restricted shape
    assert reserved(arrays, rows, np.array([1000, 8000])).tolist() == [True, False]
    # 3000 of 11000 (27%) is room enough
    assert reserved(arrays, rows, np.array([3000, 8000])).tolist() == [False, False]
    # only the agents that can host the job count: without the G2 agent the P100 has all room
    hosts = np.array([True, False])
    assert reserved(arrays, rows, np.array([1000, 8000]), hosts).tolist() == [False, False]


def test_without_restricted_shapes_nothing_is_kept():
    arrays = MixArrays(_mix({(1000, 1000, 1, ()): 1, (1000, 1000, 2, ()): 1}), ["", "P100"])
    assert not reserved(arrays, np.array([1, 1]), np.array([0, 1000])).any()


def test_rare_restricted_shapes_make_the_mix_only_when_asked(monkeypatch):
    # 2 P100-only pods of 201 are in POPULARITY's tail: left out by default (the reserve
    # then sees no P100 need); whole_score.RESTRICTED_ALL keeps them (an experiment, off)
    counts = {(1000, 1000, 1): 199, (1000, 1000, 1, ("P100",)): 2}
    assert whole_score.RESTRICTED_ALL == 0.0
    assert not any(s.gpu_models for s in whole_score.counted_mix(counts).shapes)
    monkeypatch.setattr(whole_score, "RESTRICTED_ALL", 1.0)
    mix = whole_score.counted_mix(counts)
    assert [sorted(s.gpu_models) for s in mix.shapes] == [[], ["P100"]]
    assert mix.weights == (199.0, 2.0)
