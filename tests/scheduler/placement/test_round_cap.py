"""At most so many queued jobs considered per offer round, in turns (issue 26).

:class:`~dlc.scheduler.placement.round_cap.RoundCap`: the head of the queue every round, the others
by whose turn is oldest; the jobs chosen are placed in queue order.
"""

from __future__ import annotations

import math

import pytest

from dlc.mesos.offers import offer_view
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.decide import DecideRequest, decide
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import OfferView, PlacementConfig
from dlc.scheduler.placement.round_cap import CAP_PREFIX, RoundCap
from dlc.scheduler.placement.shape_cache import ShapeBudget
from dlc.store.sqlite import JobStore

from ..helpers import offer

CONFIG = PlacementConfig("first-fit")


def _job(n: int, cpus: float, priority: int = 0, user: str = "ann") -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, "cpus": cpus, "priority": priority})
    return Job(f"j{n:02d}", user, spec, submitted_at=float(n + 1))


def _views(cpus: float = 4.0, agents: int = 2) -> list[OfferView]:
    return [offer_view(offer(f"o{a}", f"a{a}", cpus=cpus)) for a in range(agents)]


def _round(queue, cap: RoundCap, budget: ShapeBudget | None = None):
    # distinct shapes (cpus 5.0, 5.1, ...) so that no cache answers for another job
    return decide(
        DecideRequest(
            queue=queue,
            inventory=Inventory(),
            offers=_views(),
            config=CONFIG,
            now=0.0,
            cap=cap,
            budget=budget or ShapeBudget(limit=1000),
        )
    )


def test_a_round_with_more_jobs_than_the_cap_considers_at_most_the_cap():
    queue = [_job(n, 5.0 + n / 10) for n in range(20)]  # none fits 4-cpu agents
    decision = _round(queue, RoundCap(6))
    assert len(decision.waiting) == 6 and len(decision.skipped) == 14
    assert set(decision.waiting).isdisjoint(decision.skipped)
    # without a cap every job is considered
    assert len(_round(queue, RoundCap(None)).waiting) == 20


def test_skipped_jobs_go_first_next_round_and_none_starves():
    queue = [_job(n, 5.0 + n / 10) for n in range(20)]
    cap = RoundCap(4)  # the head's 2 every round, 2 others in turns
    considered = [set(_round(queue, cap).waiting) for _ in range(10)]
    head = {"j00", "j01"}
    assert all(head <= seen for seen in considered)
    # the others in queue order, two a round, each once before any has a second turn
    turns = [sorted(seen - head) for seen in considered]
    assert turns[:3] == [["j02", "j03"], ["j04", "j05"], ["j06", "j07"]]
    rounds = math.ceil(18 / 2)
    assert set().union(*considered[:rounds]) == {j.job_id for j in queue}
    assert turns[rounds] == ["j02", "j03"]  # then round again


def test_a_new_job_waits_behind_the_jobs_skipped_before_it():
    queue = [_job(n, 5.0 + n / 10) for n in range(8)]
    cap = RoundCap(4)
    assert sorted(set(_round(queue, cap).waiting)) == ["j00", "j01", "j02", "j03"]
    late = _job(50, 5.05)  # queued now: behind the jobs waiting since earlier rounds
    assert sorted(set(_round([*queue, late], cap).waiting)) == ["j00", "j01", "j04", "j05"]
    assert sorted(set(_round([*queue, late], cap).waiting)) == ["j00", "j01", "j06", "j07"]
    # j02 and j03 have waited since round 1, the late job since round 2
    assert sorted(set(_round([*queue, late], cap).waiting)) == ["j00", "j01", "j02", "j03"]
    assert "j50" in _round([*queue, late], cap).waiting


def test_the_head_of_the_queue_is_considered_every_round_and_placed_first():
    # priority order: a high-priority job queued last is at the head, so it is considered
    # at once and placed before the low-priority jobs also chosen
    queue = [_job(n, 1.0) for n in range(10)]
    urgent = _job(99, 1.0, priority=5)
    ordered = sorted([*queue, urgent], key=lambda j: (-j.spec.priority, j.submitted_at))
    one_agent = [offer_view(offer("o1", "a1", gpus=[0], cpus=4.0))]
    decision = decide(
        DecideRequest(
            queue=ordered,
            inventory=Inventory(),
            offers=one_agent,
            config=CONFIG,
            now=0.0,
            cap=RoundCap(4),
        )
    )
    assert decision.placed_jobs == ["j99"]
    assert "j00" in decision.waiting and len(decision.skipped) == 7


def test_a_job_the_budget_defers_keeps_its_turn():
    # each job a little smaller than the one before: no failure answers for the next
    queue = [_job(n, 6.0 - n / 10) for n in range(10)]
    cap, budget = RoundCap(6), ShapeBudget(limit=4)
    first = _round(queue, cap, budget)
    deferred = sorted(j for j, r in first.waiting.items() if r.startswith("not tried"))
    assert deferred == ["j04", "j05"]
    second = _round(queue, cap, budget)
    assert {"j04", "j05"} <= set(second.waiting) and "not tried" not in second.waiting["j04"]


def test_a_reservation_holder_is_always_considered():
    queue = [_job(n, 5.0 + n / 10) for n in range(10)]
    decision = decide(
        DecideRequest(
            queue=queue,
            inventory=Inventory(),
            offers=_views(),
            config=CONFIG,
            now=0.0,
            reserved={"a0": "j09"},
            cap=RoundCap(4),
        )
    )
    assert "j09" in decision.waiting


def _slave(agent: str) -> dict:
    return {"id": agent, "hostname": agent, "active": True,
            "resources": {"cpus": 4.0, "mem": 65536.0, "gpus": 8.0,
                          "gpu_ids": "{0, 1, 2, 3, 4, 5, 6, 7}"}}  # fmt: skip


@pytest.fixture
def core(tmp_path):
    store = JobStore(tmp_path / "db")
    for n in range(12):
        job = _job(n, 0.5)  # 12 fit the agent: the cap alone spreads them over rounds
        store.add_job(Job(job.job_id, "ann", job.spec, JobState.QUEUED, job.submitted_at))
    core = SchedulerCore(store, CoreConfig(placement=CONFIG, max_jobs_per_round=4))
    core.update_agents([_slave("a1")])
    yield core
    store.close()


def test_the_core_places_a_long_queue_over_rounds_in_queue_order(core):
    placed = []
    for rnd in range(3):
        actions = core.on_offers([offer(f"o{rnd}", "a1", cpus=4.0)])
        placed.append([info["name"].split()[1] for _, infos in actions.accepts for info in infos])
    assert placed == [["j00", "j01", "j02", "j03"], ["j04", "j05", "j06", "j07"],
                      ["j08", "j09", "j10", "j11"]]  # fmt: skip


def test_a_job_never_considered_says_so_and_is_not_passed_over(core):
    core.on_offers([offer("o1", "a9", gpus=[], cpus=4.0)])  # nothing fits: all wait
    assert CAP_PREFIX in core.queue_reason("j11") and CAP_PREFIX not in core.queue_reason("j00")
    assert core.state.reservations.skips("j11") == 0 and core.state.reservations.skips("j00") == 1


def test_a_limit_below_one_is_refused_in_one_line():
    from dlc.errors import ConfigError

    with pytest.raises(ConfigError, match="max_jobs_per_round: must be at least 1"):
        RoundCap(0)
    queue = [_job(n, 5.0 + n / 10) for n in range(3)]
    cap = RoundCap(1)  # no head: one job a round, in turns
    assert [sorted(_round(queue, cap).waiting) for _ in range(4)] == [["j00"], ["j01"], ["j02"],
                                                                       ["j00"]]  # fmt: skip


def test_a_capped_round_asks_its_offers_back_at_once_and_a_full_one_does_not(core):
    # 12 wait and the cap takes 4: the unused offers must return at the master's next
    # allocation, or the skipped jobs would wait out every agent's refuse filter
    actions = core.on_offers([offer("o1", "a1", cpus=4.0), offer("o2", "a2", gpus=[], cpus=4.0)])
    assert actions.declines == ["o2"] and actions.soon
    core.on_offers([offer("o3", "a1", cpus=4.0)])
    last = core.on_offers([offer("o4", "a1", cpus=4.0), offer("o5", "a2", gpus=[], cpus=4.0)])
    assert last.declines == ["o5"] and not last.soon  # the last 4: nobody was passed over


def test_a_backlog_that_had_its_turns_keeps_the_refuse_filter(core):
    # nothing fits agent a9: once every job had a turn, a capped round is no reason to have
    # every offer back at the next allocation (a big cluster would run full rounds for nothing)
    soon = [core.on_offers([offer(f"o{r}", "a9", gpus=[], cpus=4.0)]).soon for r in range(6)]
    assert soon[0] and not soon[-1], soon
    assert all(CAP_PREFIX not in core.queue_reason(f"j{n:02d}") for n in range(12))


def _reference_choose(turns: dict[str, int], now: int, limit: int, queue, keep) -> list:
    """The cap's choice as first written (a step of Python per job, ``heapq.nsmallest``):
    the pass in C must choose the very same jobs."""
    import heapq

    ids = [j.job_id for j in queue]
    turns = {job_id: turns.get(job_id, now - 1) for job_id in ids}
    if len(queue) <= limit:
        return list(queue)
    head = limit // 2
    rest = queue[head:]
    ages = [turns[job_id] for job_id in ids[head:]]
    picked = set(heapq.nsmallest(limit - head, range(len(rest)), key=ages.__getitem__))
    picked.update(i for i, job_id in enumerate(ids[head:]) if job_id in keep)
    return list(queue[:head]) + [rest[i] for i in sorted(picked)]


@pytest.mark.parametrize("seed", range(6))
def test_the_choice_equals_the_step_by_step_one_over_many_rounds(seed):
    import random

    rng = random.Random(seed)
    cap = RoundCap(rng.choice([1, 2, 5, 8, 32]))
    queue = [_job(n, 1.0) for n in range(rng.randrange(1, 60))]
    made = len(queue)
    for _ in range(40):
        before = dict(cap._turns)  # noqa: SLF001 - the state the reference starts from
        keep = {j.job_id for j in rng.sample(queue, min(len(queue), rng.randrange(0, 3)))}
        want = _reference_choose(before, cap._round + 1, cap.limit, queue, keep)  # noqa: SLF001
        chosen = cap.choose(queue, keep)
        assert [j.job_id for j in chosen] == [j.job_id for j in want]
        cap.had_turn(j.job_id for j in chosen if rng.random() < 0.8)  # some deferred
        # launches leave the queue, submits join it (ties in turns: many new jobs at once)
        for job in rng.sample(chosen, rng.randrange(0, len(chosen) + 1)):
            queue.remove(job)
        for _ in range(rng.randrange(0, 6)):
            queue.append(_job(made, 1.0))
            made += 1


@pytest.mark.parametrize("seed", range(6))
def test_turns_kept_across_rounds_choose_as_reading_the_whole_queue(seed):
    """With each round's delta (the jobs that entered or left the queue since the last pin,
    which are runnable) the cap keeps its turns in a heap instead of reading the queue: over
    many rounds of launches, submits, jobs coming back (preempted), impossible jobs, budget
    deferrals, reservations and a pin whose delta no round saw, it chooses what reading the
    whole queue each round chooses."""
    import random

    from dlc.scheduler.jobs.queue import queue_key
    from dlc.scheduler.placement.round_cap import TurnDelta

    rng = random.Random(seed)
    jobs = {j.job_id: j for j in (_job(n, 1.0, priority=n % 3) for n in range(90))}
    queued = set(rng.sample(sorted(jobs), 60))
    bad: set[str] = set()
    kept, full = RoundCap(8), RoundCap(8)
    reads = []  # the rounds that read the whole queue (and start the heap again)
    start = kept._keep_heap
    kept._keep_heap = lambda *a: (reads.append(pin), start(*a))[1]  # type: ignore[method-assign]
    pin, changed = 0, []
    for n in range(80):
        pin += 1
        runnable = sorted((jobs[j] for j in queued if j not in bad), key=queue_key)
        delta = TurnDelta(
            before=pin - 1, after=pin, changed=changed,
            runnable=lambda j: j in queued and j not in bad, job_of=jobs.__getitem__,
        )  # fmt: skip
        changed = []
        if n % 17 == 5:  # an idle round: pinned, no decision (its delta is lost)
            continue
        keep = {rng.choice(runnable).job_id} if n % 4 == 1 and runnable else set()
        if n % 13 == 7:  # a round with a job held out (a drain): no delta, the whole queue
            runnable = runnable[1:]
        got = kept.choose(
            runnable, keep, [j.job_id for j in runnable], None if n % 13 == 7 else delta
        )
        want = full.choose(runnable, keep)
        assert [j.job_id for j in got] == [j.job_id for j in want]
        turned = [j.job_id for j in got if rng.random() < 0.8]  # the rest deferred
        kept.had_turn(turned)
        full.had_turn(turned)
        for job_id in rng.sample(sorted(queued), min(len(queued), rng.randrange(0, 5))):
            queued.discard(job_id)  # launched or killed
            changed.append(job_id)
        for job_id in rng.sample(sorted(jobs), 4):  # submitted, or back (preempted)
            if job_id not in queued:
                queued.add(job_id)
                changed.append(job_id)
        if rng.random() < 0.2:  # a job new to the queue is impossible
            job_id = rng.choice(changed or sorted(queued))
            bad.add(job_id)
            changed.append(job_id)
    decided = [n for n in range(80) if n % 17 != 5]
    lost = {n for n in range(80) if n % 17 == 5 or n % 13 == 7}  # rounds that lose a delta
    after = sorted({min(m for m in decided if m > n) for n in lost if n < decided[-1]})
    assert reads == [1] + [m + 1 for m in after]  # the pin of the next round deciding
