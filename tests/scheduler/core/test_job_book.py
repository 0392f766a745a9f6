"""Submits, kills of queued jobs and job reads do not wait for an offer round (the job book,
issue 26), and a job killed while a round decides is neither launched nor brought back."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

from ..helpers import offer

#: how long another thread may take for what must not wait for the round (generous: a
#: shared CI machine), far below "forever", which is what waiting for the round would be
_PROMPT_S = 10.0


@pytest.fixture
def core(tmp_path) -> SchedulerCore:
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    return SchedulerCore(JobStore(tmp_path / "db"), config)


def _submit(core: SchedulerCore, gpus: int = 1, user: str = "alice") -> Job:
    return core.submit(user, JobSpec.from_dict({"image": "busybox", "gpus": gpus}))


def _during_round(core: SchedulerCore, action: Callable[[], object]) -> list[object]:
    """Run ``action`` on another thread while the next offer round holds the core's lock,
    after the round took its queue and before it applies; returns what ``action`` returned
    (empty when it did not finish within :data:`_PROMPT_S`: it waited for the round)."""
    done: list[object] = []
    tenancy_ops = core.tenancy_ops  # the offer round plans its queue through it
    real = tenancy_ops.plan_queue

    def hooked(*args, **kwargs):
        tenancy_ops.plan_queue = real  # once
        worker = threading.Thread(target=lambda: done.append(action()))
        worker.start()
        worker.join(_PROMPT_S)
        return real(*args, **kwargs)

    tenancy_ops.plan_queue = hooked
    return done


def test_a_job_killed_while_the_round_decides_is_not_launched_and_its_offer_declined(core):
    victim = _submit(core, gpus=2)
    other = _submit(core, gpus=2)
    done = _during_round(core, lambda: core.kill(victim.job_id, "alice"))

    actions = core.on_offers([offer("o1", "a1", [0, 1]), offer("o2", "a2", [0, 1])])

    assert done, "the kill of a queued job waited for the offer round"
    killed, _ = done[0]
    assert killed.state is JobState.KILLED
    launched = [info["task_id"]["value"] for _, infos in actions.accepts for info in infos]
    assert launched == [f"{other.job_id}.0.0"]  # the other job still starts
    # the victim's agent was placed on, then not used: its offer goes back, none is lost
    accepted = {o for ids, _ in actions.accepts for o in ids}
    assert sorted(accepted | set(actions.declines)) == ["o1", "o2"]
    assert not accepted & set(actions.declines)
    stored = core.store.get_job(victim.job_id)
    assert (stored.state, stored.tasks, stored.message) == (JobState.KILLED, (), "killed")
    assert core.store.get_job(other.job_id).state is JobState.STAGING


def test_a_waiting_job_killed_during_the_round_keeps_its_end(core):
    core.on_offers([offer("o0", "a0", list(range(8)))])  # an 8-GPU agent is known
    big = _submit(core, gpus=8)
    done = _during_round(core, lambda: core.kill(big.job_id, "alice"))

    actions = core.on_offers([offer("o1", "a0", [0, 1])])  # too small: it would wait

    assert done and actions.accepts == [] and actions.declines == ["o1"]
    stored = core.store.get_job(big.job_id)
    assert stored.state is JobState.KILLED and stored.message == "killed"  # no "waiting: ..."
    assert core.queue_reason(big.job_id) is None
    assert not core.has_queued()


def test_submits_and_reads_during_a_round_do_not_wait_and_queue_for_the_next(core):
    first = _submit(core)
    done = _during_round(
        core, lambda: (_submit(core, user="bob"), core.get_job(first.job_id), core.queued_jobs())
    )

    actions = core.on_offers([offer("o1", "a1", [0, 1])])

    assert done, "a submit waited for the offer round"
    late, seen, queued = done[0]
    assert seen.job_id == first.job_id and [j.job_id for j in queued] == [
        first.job_id,
        late.job_id,
    ]
    launched = [info["task_id"]["value"] for _, infos in actions.accepts for info in infos]
    assert launched == [f"{first.job_id}.0.0"]  # the round decided on its own queue
    assert not actions.suppress  # the late job still waits: offers keep coming
    assert core.queue_reason(late.job_id) == "position 1 of 1; waiting for the first offers"
    again = core.on_offers([offer("o2", "a1", [1])])
    assert [i["task_id"]["value"] for _, infos in again.accepts for i in infos] == [
        f"{late.job_id}.0.0"
    ]


def test_the_per_user_cap_counts_what_the_book_holds(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=2)
    core = SchedulerCore(JobStore(tmp_path / "db"), config)
    a = _submit(core)
    _submit(core)
    with pytest.raises(Exception, match="already has 2 jobs queued"):
        _submit(core)
    core.kill(a.job_id, "alice")
    _submit(core)  # a killed job leaves room


def test_concurrent_submits_share_writes_and_keep_the_cap(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=5)
    core = SchedulerCore(JobStore(tmp_path / "db"), config)
    gate = threading.Barrier(24)
    outcomes: list[object] = []

    def one(i: int) -> None:
        gate.wait()
        try:
            outcomes.append(_submit(core, user="alice" if i % 2 else f"u{i}"))
        except Exception as exc:  # noqa: BLE001 - the cap's refusals are counted below
            outcomes.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_PROMPT_S)
    jobs = [o for o in outcomes if isinstance(o, Job)]
    refused = [o for o in outcomes if not isinstance(o, Job)]
    assert len(outcomes) == 24
    assert sum(j.user == "alice" for j in jobs) == 5  # 12 tried, the cap let 5 in
    assert len(jobs) == 17 and all("already has 5 jobs queued" in str(e) for e in refused)
    assert len({j.job_id for j in jobs}) == 17
    assert {j.job_id for j in core.queued_jobs()} == {j.job_id for j in jobs}
    assert {j.job_id for j in core.store.list_jobs()} == {j.job_id for j in jobs}


def test_the_book_lists_the_jobs_that_left_the_queue_since_the_pin_only(tmp_path):
    """An offer round finds the jobs killed while it decided from this list, not from a
    pass over the whole queue: a job that left before the pin is not on it, one that left
    after it stays on it though the round's own saves take the left ids meanwhile, and
    nothing is kept once the round is over."""
    from dataclasses import replace

    from dlc.scheduler.core.job_book import JobBook

    store = JobStore(tmp_path / "db")
    book = JobBook(store, clock=lambda: 1.0)
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1})
    early, late, after = (book.add(Job("", "alice", spec)) for _ in range(3))
    book.track(replace(early, state=JobState.KILLED))

    book.pin()
    book.track(replace(late, state=JobState.KILLED))
    assert book.take_left() == [early.job_id, late.job_id]  # a save in the round takes them
    assert book.left_since_pin() == (late.job_id,)
    book.unpin()
    book.track(replace(after, state=JobState.KILLED))
    assert book.left_since_pin() == ()
    book.pin()
    assert book.left_since_pin() == ()
    store.close()


def test_the_pinned_ids_are_the_pinned_queues_ids_in_its_order(tmp_path):
    """The round reads the queue's ids from the pin: they are the pinned jobs' ids in their
    order (a priority job queued later goes first), a kill or submit after the pin changes
    neither, and none are kept once the round is over."""
    from dataclasses import replace

    from dlc.scheduler.core.job_book import JobBook

    store = JobStore(tmp_path / "db")
    times = iter(range(1, 100))
    book = JobBook(store, clock=lambda: float(next(times)))
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1})
    first, gone = (book.add(Job("", "alice", spec), stamp=True) for _ in range(2))
    urgent = book.add(Job("", "bob", replace(spec, priority=5)), stamp=True)
    book.ordered()  # the order is kept from here on: later changes update it
    book.track(replace(gone, state=JobState.KILLED))
    late = book.add(Job("", "alice", spec), stamp=True)

    _, jobs = book.pin()
    want = [urgent.job_id, first.job_id, late.job_id]
    assert [j.job_id for j in jobs] == want
    assert book.pinned_ids() == want
    book.add(Job("", "alice", spec), stamp=True)
    book.track(replace(first, state=JobState.KILLED))
    assert book.pinned_ids() == want
    book.unpin()
    assert book.pinned_ids() is None
    _, jobs = book.pin()
    assert (
        book.pinned_ids()
        == [j.job_id for j in jobs]
        == [urgent.job_id, late.job_id] + [jobs[-1].job_id]
    )
    store.close()


def test_the_pin_lists_the_jobs_that_entered_or_left_the_queue_since_the_pin_before(tmp_path):
    """A round applies these to what it keeps per queued job (the round cap's turns): every
    job that entered or left between two pins is listed with the later one (a submit or kill
    during a round goes with the next pin), and a reload skips a pin number, so no round
    takes the queue after it for a change of the one before."""
    from dataclasses import replace

    from dlc.scheduler.core.job_book import JobBook

    store = JobStore(tmp_path / "db")
    book = JobBook(store, clock=lambda: 1.0)
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1})
    a, b = (book.add(Job("", "alice", spec)) for _ in range(2))
    book.pin()
    first, changed = book.pinned_changes()
    assert changed == [a.job_id, b.job_id]
    c = book.add(Job("", "alice", spec))  # during the round: the next pin's
    book.track(replace(a, state=JobState.KILLED))
    book.track(replace(b, message="saved again, still queued"))  # not a change of the queue
    assert book.pinned_changes() == (first, changed)
    book.unpin()
    book.pin()
    assert book.pinned_changes() == (first + 1, [c.job_id, a.job_id])
    book.unpin()
    book.pin()
    assert book.pinned_changes() == (first + 2, [])
    book.unpin()
    book.clear()
    book.pin()
    assert book.pinned_changes()[0] == first + 4
    store.close()


def test_the_order_kept_by_each_change_is_the_sorted_queue(tmp_path):
    """The book keeps the queue's order (ids and jobs at the same positions) by putting a
    job in or taking it out at its place as it changes, never sorting or filtering the whole
    queue: after random submits, kills, launches, jobs coming back and saves of queued jobs,
    it is the queue sorted by queue key, with the jobs as the book holds them now."""
    import random
    from dataclasses import replace

    from dlc.scheduler.core.job_book import JobBook
    from dlc.scheduler.jobs.queue import queue_key

    rng = random.Random(7)
    store = JobStore(tmp_path / "db")
    times = iter(range(1, 10_000))
    book = JobBook(store, clock=lambda: float(next(times) % 7))  # ties: submit order
    specs = [JobSpec.from_dict({"image": "busybox", "gpus": 1, "priority": p}) for p in (0, 3)]
    gone: list[Job] = []
    for step in range(300):
        queued = list(book.queued.values())
        pick = rng.random()
        if pick < 0.4 or not queued:
            book.add(Job("", "alice", rng.choice(specs)), stamp=True)
        elif pick < 0.6:
            job = rng.choice(queued)
            book.track(replace(job, state=JobState.STAGING))
            gone.append(job)
        elif pick < 0.7 and gone:
            book.track(gone.pop(rng.randrange(len(gone))))  # back in the queue (preempted)
        elif pick < 0.85:
            book.track(replace(rng.choice(queued), message=f"saved {step}"))
        else:
            book.track(replace(rng.choice(queued), state=JobState.KILLED))
        if step == 5:
            book.ordered()  # from here on the order is kept
        if step > 5:
            want = sorted(book.queued.values(), key=queue_key)
            got = book.ordered()
            assert [j.job_id for j in got] == [j.job_id for j in want]
            assert all(a is b for a, b in zip(got, want, strict=True))
            book.pin()
            assert book.pinned_ids() == [j.job_id for j in want]
            book.unpin()
    store.close()
