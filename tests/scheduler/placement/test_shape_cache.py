"""A hostile queue of distinct job shapes costs a bounded number of placement attempts.

Red-team finding 3 (docs/security.md): the failure cache keyed on exact cpus/mem/disk, so
1,000 jobs asking for ``--cpus 5.999, 5.998, ...`` each went through placement on every
agent. These tests count placement attempts (``placement._place_job`` calls), not time.
"""

from __future__ import annotations

import pytest

from dlc.errors import ConfigError
from dlc.mesos.offers import offer_view
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement import placer as placement
from dlc.scheduler.placement.decide import DecideRequest, Decision, decide
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import OfferView, PlacementConfig
from dlc.scheduler.placement.shape_cache import DEFERRED_PREFIX, FailedShapes, ShapeBudget
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import place

from ..helpers import offer

AGENTS = 20
LIMIT = 4


@pytest.fixture
def attempts(monkeypatch) -> list[str]:
    """Job ids in the order placement tried them."""
    tried: list[str] = []
    real = placement._place_job

    def counting(job, *args, **kwargs):
        tried.append(job.job_id)
        return real(job, *args, **kwargs)

    monkeypatch.setattr(placement, "_place_job", counting)
    return tried


def views(cpus: float = 4.0) -> list[OfferView]:
    return [offer_view(offer(f"o{a}", f"a{a}", cpus=cpus)) for a in range(AGENTS)]


def _round(
    queue: list[Job],
    offers: list[OfferView],
    *,
    now: float,
    config: PlacementConfig = PlacementConfig("first-fit"),
    inventory: Inventory | None = None,
    **fields,
) -> Decision:
    """One :func:`decide` round; ``fields`` are the request's other fields, by name."""
    return decide(DecideRequest(queue=queue, inventory=inventory or Inventory(), offers=offers,
                                config=config, now=now, **fields))  # fmt: skip


def cpu_job(i: int, cpus: float, user: str = "mallory", gpus: int = 1) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": gpus, "cpus": cpus})
    return Job(f"j{i:04d}", user, spec, submitted_at=float(i))


def descending(n: int, user: str = "mallory") -> list[Job]:
    """Each job asks for a little less than the one before: no earlier failure covers it."""
    return [cpu_job(i, round(5.0 + (n - i) / 1000, 3), user) for i in range(n)]


def test_distinct_cpus_cost_the_budget_not_one_attempt_each(attempts):
    queue = descending(200)
    out = place(views(), queue, PlacementConfig("first-fit"), budget=ShapeBudget(LIMIT))
    assert len(attempts) == LIMIT  # the exact-key cache tried all 200
    assert len(out.waiting) == 200 and not out.launches
    deferred = [r for r in out.waiting.values() if r.startswith(DEFERRED_PREFIX)]
    assert len(deferred) == 200 - LIMIT


def test_a_larger_job_of_the_same_kind_is_skipped_after_a_smaller_one_failed(attempts):
    ascending = [cpu_job(i, 5.0 + i / 1000) for i in range(200)]
    out = place(views(), ascending, PlacementConfig("first-fit"))  # no budget at all
    assert attempts == ["j0000"]
    assert "5 cpus" in out.waiting["j0000"]
    assert "needs no more than this one" in out.waiting["j0150"]


def test_a_smaller_job_after_a_failed_larger_one_is_still_placed(attempts):
    queue = [cpu_job(0, 5.5), cpu_job(1, 5.0), cpu_job(2, 3.0), cpu_job(3, 6.0)]
    out = place(views(), queue, PlacementConfig("first-fit"))
    assert out.placed_jobs == ["j0002"]  # feasible: never skipped
    assert attempts == ["j0000", "j0001", "j0002", "j0003"]  # a launch empties the cache


def test_another_kind_is_not_covered():
    failed = FailedShapes()
    failed.add(("k1",), (5.0, 100.0, 0.0), "no room")
    assert failed.known(("k1",), (5.0, 100.0, 0.0)) == "no room"
    assert failed.known(("k1",), (6.0, 100.0, 1.0)).startswith("no room (found for a job")
    assert failed.known(("k1",), (6.0, 99.0, 0.0)) is None  # less memory: not covered
    assert failed.known(("k2",), (6.0, 100.0, 0.0)) is None


def test_other_users_are_not_held_by_one_users_budget(attempts):
    queue = [*descending(100), cpu_job(500, 2.0, user="bob"), cpu_job(501, 5.5, user="bob")]
    out = place(views(), queue, PlacementConfig("first-fit"), budget=ShapeBudget(LIMIT))
    assert out.placed_jobs == ["j0500"]
    # bob's 5.5-cpu job is not tried: a smaller job of its kind failed earlier in the round,
    # and j0500's launch only shrank an agent (CarriedFailures.known_now)
    assert len(attempts) == LIMIT + 1
    assert "needs no more than this one" in out.waiting["j0501"]


def test_deferred_jobs_go_first_next_round_so_every_job_is_tried(attempts):
    inventory = Inventory()
    budget = ShapeBudget(LIMIT)
    queue = descending(10)
    tried_by_round = []
    for _ in range(3):
        attempts.clear()
        _round(queue, views(), now=0.0, inventory=inventory, budget=budget)
        tried_by_round.append(list(attempts))
    # round 3 tries the last two first; the smallest failing covers all the rest
    assert [len(t) for t in tried_by_round] == [4, 4, 2]
    assert set(tried_by_round[0]) | set(tried_by_round[1]) | set(tried_by_round[2]) == {
        j.job_id for j in queue
    }


def test_a_fitting_job_behind_failing_shapes_starts_within_two_rounds(attempts):
    budget = ShapeBudget(LIMIT)
    queue = [*descending(6), cpu_job(99, 2.0, gpus=2)]
    first = _round(queue, views(), now=0.0, budget=budget)
    assert first.waiting["j0099"].startswith(DEFERRED_PREFIX)
    second = _round(queue, views(), now=0.0, budget=budget)
    assert second.placed_jobs == ["j0099"]


def _slave(agent: str) -> dict:
    return {"id": agent, "hostname": agent, "active": True,
            "resources": {"cpus": 64.0, "mem": 65536.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"}}  # fmt: skip


def test_core_round_with_a_hostile_queue_tries_a_bounded_number_of_shapes(tmp_path, attempts):
    store = JobStore(tmp_path / "db")
    for job in descending(300):
        store.add_job(Job(job.job_id, job.user, job.spec, JobState.QUEUED, job.submitted_at))
    config = CoreConfig(
        placement=PlacementConfig("first-fit", shape_tries_per_user=LIMIT), max_jobs_per_round=None
    )  # the budget alone (round cap: test_round_cap)
    core = SchedulerCore(store, config)
    core.update_agents([_slave(f"a{a}") for a in range(AGENTS)])
    rounds = []
    for rnd in range(3):
        attempts.clear()
        core.on_offers([offer(f"o{rnd}-{a}", f"a{a}", cpus=4.0) for a in range(AGENTS)])
        rounds.append(list(attempts))
    assert [len(r) for r in rounds] == [LIMIT] * 3
    assert len({j for r in rounds for j in r}) == 3 * LIMIT  # in turn: never the same twice
    messages = [j.message for j in core.queued_jobs()]
    assert all(m.startswith("waiting: ") for m in messages)
    # the rest wait their turn, but for jobs larger than one that failed (its answer holds)
    assert sum(DEFERRED_PREFIX in m for m in messages) >= 300 - 4 * LIMIT
    # a job the budget did not try is not "passed over": it never reserves agents
    assert core.state.reservations.active is None
    store.close()


def test_the_bound_must_be_at_least_one():
    with pytest.raises(ConfigError, match="shape_tries_per_user: must be at least 1, not 0"):
        PlacementConfig(shape_tries_per_user=0)
