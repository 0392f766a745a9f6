"""Share keep (``mix_models.share_keep_cost``): a share that may run on other models pays
``SHARE_KEEP_COST`` tie buckets on the agents of a GPU model whose free room is below the part
of the expected GPU demand that jobs restricted to it make (docs/simulator.md, "Share keep";
measured, off by default: the tests turn it on at 2 buckets, the measured setting)."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.scheduler.allocator import mix_models
from dlc.scheduler.allocator.mix_models import share_keep_cost
from dlc.scheduler.allocator.shares import MixArrays, ShareRequest, WorkloadMix
from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job

#: as imported, before the tests turn it on
DEFAULT_COST = mix_models.SHARE_KEEP_COST

#: P100-only half shares make 3 of the 7 expected half shares (43% of the GPU demand); the
#: other 4 may run anywhere
MIX = WorkloadMix(
    (
        ShareRequest(1000, 0, 1, 500, frozenset({"P100"})),
        ShareRequest(1000, 0, 1, 500, frozenset()),
    ),
    (3.0, 4.0),
)


def _offer(oid: str, agent: str, model: str, **room) -> dict:
    body = ranged_offer(oid, agent, mem_gib=16, **room)
    body["attributes"].append({"name": "gpu_model", "type": "TEXT", "text": {"value": model}})
    return body


def _offers(g2_taken: tuple[int, ...] = ()) -> list[dict]:
    """A 2-GPU P100 agent with one GPU free (1000 of the 9000 free thousandths, 11%, under
    the P100-only shares' 43%), first by agent id; an 8-GPU G2 agent, ``g2_taken`` GPUs of it
    taken whole."""
    return [
        _offer("o1", "a-p100", "P100", gpus=2, whole_taken=(0,)),
        _offer("o2", "b-g2", "G2", gpus=8, whole_taken=g2_taken),
    ]


@pytest.fixture(autouse=True)
def _keep_on(monkeypatch):
    monkeypatch.setattr(mix_models, "SHARE_KEEP_COST", 2.0)


def _placed(offers: list[dict], **spec) -> list[tuple[str, int]]:
    result = place(offers, [share_job("s", gpus=0.5, cpus=1, **spec)], mix=MIX)
    return [(x.agent_id, x.share.gpu_index) for x in result.launches]


def test_a_share_that_may_run_elsewhere_leaves_a_kept_model_the_measure_prefers_a_little():
    # the measure prefers the P100 by less than two tie buckets (the G2's free room counts as
    # fragmented for the P100-only shape either way): without share keep it takes the P100
    assert _placed(_offers()) == [("b-g2", 0)]


def test_it_is_a_cost_not_a_bar(monkeypatch):
    # at one bucket the measure's preference for the P100 still wins; at 0 (the default)
    # nothing is kept
    for cost in (1.0, 0.0):
        monkeypatch.setattr(mix_models, "SHARE_KEEP_COST", cost)
        assert _placed(_offers()) == [("a-p100", 1)]


def test_a_share_restricted_to_the_kept_model_still_goes_there():
    assert _placed(_offers(), gpu_model="P100") == [("a-p100", 1)]


def test_a_kept_model_still_takes_a_share_that_fits_nowhere_else():
    assert _placed(_offers(g2_taken=tuple(range(8)))) == [("a-p100", 1)]


@pytest.mark.parametrize("cost", [2.0, 0.5])
def test_the_cost_is_paid_only_on_kept_models(cost):
    arrays = MixArrays(MIX, ["", "P100", "G2"])
    rows, free = np.array([1, 2]), np.array([1000, 8000])
    assert share_keep_cost(arrays, rows, free, cost).tolist() == [cost, 0.0]
    # 1000 of 2000 free (50%) is the P100's part of the demand (43%) and more: nothing kept
    assert share_keep_cost(arrays, rows, np.array([1000, 1000]), cost).tolist() == [0.0, 0.0]
    assert share_keep_cost(arrays, rows, free, 0.0).tolist() == [0.0, 0.0]


def test_it_is_off_by_default():
    assert DEFAULT_COST == 0.0
