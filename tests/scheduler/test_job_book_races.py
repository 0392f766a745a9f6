"""Red-team races on the job book (issue 26, docs/scheduler.md "Fifth pass").

Submits, kills of queued jobs and job reads take only the book's lock while offer rounds hold
the core's: these tests race them from many threads (a hostile user with a valid token, or
bad luck in timing) and check the book's promises. A job is never launched twice, nor after
its kill was acknowledged; an acknowledged submit is never lost; one user's concurrent
submits never pass ``max_queued_per_user``; a store failure in a batch leaves no job the
submitter was told failed; a reload (HA takeover) during submits leaves memory and store
agreeing; the placement-mix book equals a recount. Threads are bounded and every wait has a
deadline (barriers, events, or a condition polled until a deadline).
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from dlc.errors import DlcError, StoreError
from dlc.mesos.codec import MesosCodec
from dlc.scheduler.core.facade import Actions, CoreConfig, SchedulerCore
from dlc.scheduler.core.mix_book import MixBook
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.jobs.queue import queue_key
from dlc.scheduler.placement import inventory
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.launch import TaskLaunch
from dlc.store import postgres
from dlc.store.memory import MemoryJobStore
from dlc.store.sqlite import JobStore
from tests.services import Postgres

from .helpers import offer

#: the longest any one wait may take (a shared, slow CI machine; a hang fails, not stalls)
_DEADLINE_S = 8.0


def _config(cap: int | None = None) -> CoreConfig:
    return CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=cap)


def _spec(gpus: int = 1, nodes: int = 1) -> JobSpec:
    return JobSpec.from_dict({"image": "busybox", "gpus": gpus, "nodes": nodes})


def _run_all(targets: Sequence[Callable[[], None]]) -> None:
    """Run each target on a thread of its own, all released at once; fail on a hang."""
    gate = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def body(target: Callable[[], None]) -> None:
        try:
            gate.wait(_DEADLINE_S)
            target()
        except BaseException as exc:  # noqa: BLE001 - reported on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(t,), daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + _DEADLINE_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock or lost wake-up)"
    assert not errors, errors


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds, at most :data:`_DEADLINE_S`."""
    deadline = time.monotonic() + _DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def _launched(actions: Actions) -> list[str]:
    """The job ids of the round's launched tasks (one entry per task)."""
    return [i["task_id"]["value"].split(".")[0] for _, infos in actions.accepts for i in infos]


def _status(task_id: str, state: str, agent: str) -> dict[str, Any]:
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}}


def _check_agrees(core: SchedulerCore) -> None:
    """The book's memory equals the store's live jobs, its counters and order are right, and
    the mix book equals a recount from the live jobs."""
    book = core.state.book
    with book.lock:
        stored = {
            j.job_id: j
            for j in core.store.list_jobs(
                states={JobState.QUEUED, JobState.STAGING, JobState.RUNNING, JobState.PREEMPTED}
            )
        }
        queued = {i for i, j in stored.items() if j.state is JobState.QUEUED}
        assert set(book.queued) == queued
        assert set(book.active) == set(stored) - queued
        for job_id, job in {**book.queued, **book.active}.items():
            assert (job.state, job.tasks, job.kill_requested) == (
                stored[job_id].state,
                stored[job_id].tasks,
                stored[job_id].kill_requested,
            )
        users = {j.user for j in stored.values()}
        for user in users:
            mine = sum(j.user == user for j in book.queued.values())
            assert book.queued_count(user) == mine, user
        assert [j.job_id for j in book.ordered()] == [
            j.job_id for j in sorted(book.queued.values(), key=queue_key)
        ]
        recount = MixBook()
        for job_id in set(book.queued) | set(book.active):
            recount.moved((None, None), (book.queued.get(job_id), book.active.get(job_id)))
        assert book.mix._whole == recount._whole
        assert book.mix._shares == recount._shares


class _Gate:
    """A store with a hook run inside ``add_jobs``'s transaction (before the insert: it may
    raise to fail the batch, or check what the store holds)."""

    hook: Callable[[Sequence[Job]], None] | None = None

    def add_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        with self._tx("the test's batch"):  # type: ignore[attr-defined]
            if self.hook is not None:
                self.hook(jobs)
            return super().add_jobs(jobs)  # type: ignore[misc]


class _GatedStore(_Gate, JobStore):
    """The SQLite store with :class:`_Gate`'s hook."""


class _GatedPgStore(_Gate, postgres.JobStore):
    """The PostgreSQL store with :class:`_Gate`'s hook."""


@pytest.fixture(scope="module")
def pg_server():
    """A PostgreSQL server for this module (scripts/postgres.sh; fails, never skips)."""
    server = Postgres()
    yield server
    server.remove()


@pytest.fixture(params=["sqlite", "postgresql"])
def gated_store(request, tmp_path):
    """A fresh gated store of each engine."""
    if request.param == "sqlite":
        store: Any = _GatedStore(tmp_path / "db")
    else:
        store = _GatedPgStore(request.getfixturevalue("pg_server").new_db())
    yield store
    store.close()


# -- the per-user queue cap and unique ids ------------------------------------------------


def test_one_user_racing_submits_and_kills_never_passes_the_cap(gated_store):
    cap = 5
    store = gated_store
    core = SchedulerCore(store, _config(cap))
    peaks: list[int] = []

    def queued_in_store(jobs: Sequence[Job]) -> None:  # before the batch is inserted
        row = store._db.execute(
            "SELECT COUNT(*) FROM jobs WHERE user='mallory' AND state='queued'"
        ).fetchone()
        peaks.append(row[0] + sum(j.user == "mallory" for j in jobs))

    store.hook = queued_in_store
    accepted: list[Job] = []
    refused: list[DlcError] = []

    def attacker() -> None:
        for _ in range(6):
            try:
                accepted.append(core.submit("mallory", _spec()))
            except DlcError as exc:
                refused.append(exc)

    def killer() -> None:  # frees room at random moments: the cap must hold at each
        rng = random.Random(7)
        for _ in range(12):
            live = [j.job_id for j in core.state.book.live() if j.user == "mallory"]
            if live:
                core.kill(rng.choice(live), "mallory")

    bystanders = [lambda i=i: accepted.append(core.submit(f"u{i}", _spec())) for i in range(8)]
    _run_all([attacker] * 16 + [killer] * 2 + bystanders)

    assert max(peaks) <= cap  # the store never held more than the cap queued at once
    assert refused and all("already has" in str(e) for e in refused)
    assert len({j.job_id for j in accepted}) == len(accepted)  # ids unique
    assert {j.job_id for j in accepted} <= {j.job_id for j in store.list_jobs()}
    _check_agrees(core)


# -- a store failure in a batch --------------------------------------------------------


def _hold_first_write(core: SchedulerCore, waiting: int) -> None:
    """Make the first writer wait until ``waiting`` submits are pending: they are one batch."""
    book = core.state.book
    real = book._write_pending
    first = [True]

    def gated() -> None:
        if first[0]:
            first[0] = False
            _wait_for(lambda: len(book._pending) >= waiting, f"{waiting} pending submits")
        real()

    book._write_pending = gated  # type: ignore[method-assign]


def test_a_batch_failing_half_way_in_sqlite_leaves_no_job_anywhere(tmp_path):
    store = _GatedStore(tmp_path / "db")
    core = SchedulerCore(store, _config(cap=3))
    before = core.submit("alice", _spec())
    real_ids = store._fresh_ids

    def clashing(count: int) -> list[str]:  # the 3rd insert of the batch hits a stored id
        ids = real_ids(count)
        if count >= 3:
            ids[2] = before.job_id
        return ids

    store._fresh_ids = clashing
    _hold_first_write(core, 6)
    outcomes: list[object] = []

    def one(user: str) -> Callable[[], None]:
        def submit() -> None:
            try:
                outcomes.append(core.submit(user, _spec()))
            except StoreError as exc:
                outcomes.append(exc)

        return submit

    _run_all([one("alice"), one("alice"), one("bob"), one("bob"), one("carol"), one("dan")])

    assert len(outcomes) == 6 and all(isinstance(o, StoreError) for o in outcomes)
    assert [j.job_id for j in store.list_jobs()] == [before.job_id]  # all rolled back
    assert list(core.state.book.queued) == [before.job_id]  # no ghost in memory
    assert core.state.book._pending == [] and core.state.book._pending_by_user == {}
    store._fresh_ids = real_ids
    core.submit("alice", _spec())  # the failed submits hold no room under the cap
    core.submit("alice", _spec())
    _check_agrees(core)


class _FlakyMemoryStore(MemoryJobStore):
    """A store without ``add_jobs`` (the book writes a batch one job at a time) whose
    ``add_job`` fails for the jobs of one user."""

    def add_job(self, job: Job) -> Job:
        if job.user == "unlucky":
            raise StoreError("the test's store refuses this job", path=":memory:", kind="io")
        return super().add_job(job)


def test_a_batch_written_job_by_job_tells_each_submitter_its_own_outcome():
    store = _FlakyMemoryStore()
    core = SchedulerCore(store, _config())
    _hold_first_write(core, 4)
    outcomes: dict[str, object] = {}

    def one(user: str) -> Callable[[], None]:
        def submit() -> None:
            try:
                outcomes[user] = core.submit(user, _spec())
            except StoreError as exc:
                outcomes[user] = exc

        return submit

    _run_all([one("a"), one("b"), one("unlucky"), one("c")])

    told_stored = {u for u, o in outcomes.items() if isinstance(o, Job)}
    in_store = {j.user for j in store.list_jobs()}
    # whoever was told "failed" has no job in the store (it would run after a restart, and
    # the user, told it failed, submits again: two runs), and whoever was told "queued" has
    assert told_stored == in_store == {"a", "b", "c"}
    assert isinstance(outcomes["unlucky"], StoreError)
    _check_agrees(core)


# -- reload (HA takeover) while submits are in flight -----------------------------------


def test_reload_during_submits_and_kills_leaves_memory_and_store_agreeing(gated_store):
    store = gated_store
    core = SchedulerCore(store, _config(cap=1000))
    acked: list[Job] = []
    killed: list[str] = []

    def submitter(user: str) -> Callable[[], None]:
        def run() -> None:
            for _ in range(15):
                acked.append(core.submit(user, _spec()))

        return run

    def reloader() -> None:
        for _ in range(10):
            core.reload()

    def killer() -> None:
        rng = random.Random(3)
        for _ in range(20):
            queued = core.queued_jobs()
            if queued:
                job = rng.choice(queued)
                core.kill(job.job_id, job.user)
                killed.append(job.job_id)

    _run_all([submitter(u) for u in ("a", "b", "c", "d")] + [reloader, killer])

    assert len({j.job_id for j in acked}) == len(acked) == 60
    stored = {j.job_id: j for j in store.list_jobs()}
    assert {j.job_id for j in acked} == set(stored)  # every acknowledged submit is stored
    queued = {j.job_id for j in core.queued_jobs()}
    assert queued == {i for i in stored if i not in killed}  # and queued unless killed
    _check_agrees(core)


# -- kills racing the offer round --------------------------------------------------------


#: (the core's component, its method) at which each kill starts
_HOOKS = [("tenancy_ops", "plan_queue"), ("offer_round", "_still_queued"),
          ("offer_round", "_carry_out"), ("offer_round", "_note_reasons")]  # fmt: skip


@pytest.mark.parametrize(("part", "hook"), _HOOKS)
def test_a_kill_at_each_point_of_the_round_is_never_followed_by_a_launch(tmp_path, part, hook):
    """The kill starts on another thread at ``hook`` (before the apply, or while the round
    holds the book's lock): whatever it answers, a job whose kill was acknowledged as
    "killed while queued" is never launched, and a job launched first gets its task killed."""
    core = SchedulerCore(JobStore(tmp_path / "db"), _config())
    victims = [core.submit("alice", _spec()) for _ in range(3)]
    answers: list[tuple[Job, Actions]] = []
    started = threading.Event()
    owner = getattr(core, part)
    real = getattr(owner, hook)

    def hooked(*args: Any, **kwargs: Any) -> Any:
        setattr(owner, hook, real)  # once

        def kill_all() -> None:
            started.set()
            for v in victims:
                answers.append(core.kill(v.job_id, "alice"))

        threading.Thread(target=kill_all, daemon=True).start()
        assert started.wait(_DEADLINE_S)
        return real(*args, **kwargs)

    setattr(owner, hook, hooked)
    actions = core.on_offers([offer("o1", "a1", [0, 1]), offer("o2", "a2", [0])])
    _wait_for(lambda: len(answers) == 3, "the kills' answers")
    launched = _launched(actions)
    for job, kill_actions in answers:
        if job.state is JobState.KILLED and not job.tasks:  # "killed while queued"
            assert job.job_id not in launched
        else:  # launched before the kill: the kill names its task and is stored
            assert job.job_id in launched and job.kill_requested
            assert [t for t, _ in kill_actions.kills] == [f"{job.job_id}.0.0"]
    # nothing killed is launched later, and nothing is launched twice
    again = core.on_offers([offer("o3", "a3", [0, 1, 2, 3])])
    assert _launched(again) == []
    assert len(launched) == len(set(launched))
    _check_agrees(core)


@pytest.mark.parametrize(
    "late", ["TASK_FAILED", "TASK_RUNNING", "TASK_LOST", "TASK_FINISHED", "TASK_STAGING"]
)
def test_a_late_update_of_an_old_run_does_not_bring_back_a_job_killed_while_queued(tmp_path, late):
    """Mesos re-sends an update until it is acknowledged: one of the run before a retry,
    arriving after the retried job was killed while queued (the book's lock only), must not
    queue, run or launch it again; an update saying the old task runs gets it killed."""
    core = SchedulerCore(JobStore(tmp_path / "db"), _config())
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, "retries": 3})
    job = core.submit("alice", spec)
    (task,) = _launched_tasks(core.on_offers([offer("o1", "a1", [0, 1])]))
    core.on_status(_status(task, "TASK_RUNNING", "a1"))
    core.on_status(_status(task, "TASK_FAILED", "a1"))
    assert core.get_job(job.job_id).state is JobState.QUEUED  # retried
    killed, _ = core.kill(job.job_id, "alice")
    assert killed.state is JobState.KILLED

    actions = core.on_status(_status(task, late, "a1"))

    assert core.get_job(job.job_id).state is JobState.KILLED
    assert not core.has_queued()
    assert _launched(core.on_offers([offer("o2", "a1", [0, 1])])) == []
    if late in ("TASK_RUNNING", "TASK_STAGING"):  # something of it runs: it is stopped
        assert actions.kills == [(task, "a1")]
    _check_agrees(core)


def _launched_tasks(actions: Actions) -> list[str]:
    return [i["task_id"]["value"] for _, infos in actions.accepts for i in infos]


def test_random_mix_of_submits_kills_rounds_and_updates_keeps_every_invariant(tmp_path):
    """Submitters and killers on threads, offer rounds and status updates on another, all
    at once; at the end: no task launched twice, no job launched after its acknowledged
    queued kill, every acknowledged submit stored, memory and store agreeing, the mix book
    equal to a recount.

    What happens in the race is up to the threads' interleaving, but each event the checks
    need happens whatever it is: one queued kill is made before the race, and the killers
    spare one user's jobs while the rounds go on until the submitters are done and a task
    was launched (bounded by the deadline). A round count alone did not ensure that: on a
    loaded machine the rounds thread ran all its rounds on an empty queue before a submit,
    or the killers took every job a round could launch."""
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, _config(cap=12))
    acked: list[Job] = []
    # one queued kill made before the race, so the "never launched" check below is never
    # empty: whether a killer thread also catches a job queued depends on the machine's
    # timing (on a loaded CI machine the rounds had placed every job first)
    early = core.submit("a", _spec(1, 1))
    acked.append(early)
    assert core.kill(early.job_id, "a")[0].state is JobState.KILLED
    queued_kills: set[str] = {early.job_id}
    launches: list[str] = []
    busy = threading.Semaphore(0)  # released once by each submitter that is done
    submitters = 4
    spared = "c"  # the killers leave this user's jobs: a round always has one to launch

    def submitter(user: str, seed: int) -> Callable[[], None]:
        def run() -> None:
            r = random.Random(seed)
            try:
                for _ in range(30):
                    spec = _spec(r.choice([1, 1, 2, 4]), r.choice([1, 1, 2]))
                    try:
                        acked.append(core.submit(user, spec))
                    except DlcError as exc:
                        assert "already has" in str(exc)
            finally:
                busy.release()

        return run

    def killer(seed: int) -> Callable[[], None]:
        def run() -> None:
            r = random.Random(seed)
            for n in range(2000):  # 60 kills, more until one was of a queued job
                if n >= 60 and len(queued_kills) > 1:
                    return
                queued = [j for j in core.queued_jobs() if j.user != spared]
                live = queued if queued and r.random() < 0.6 else core.state.book.live()
                live = [j for j in live if j.user != spared]
                if not live:
                    continue
                job = r.choice(live)
                done, _ = core.kill(job.job_id, job.user)
                if done.state is JobState.KILLED and not done.tasks:
                    queued_kills.add(done.job_id)

        return run

    def rounds() -> None:  # until the submitters are done and a task was launched
        r = random.Random(5)
        finished = 0
        deadline = time.monotonic() + _DEADLINE_S * 0.75  # before _run_all calls it a hang
        for n in itertools.count():
            assert time.monotonic() < deadline, f"no launch in {n} rounds"
            agents = r.randint(1, 3)
            actions = core.on_offers(
                [offer(f"o{n}.{a}", f"a{n % 5}{a}", [0, 1, 2, 3]) for a in range(agents)]
            )
            launches.extend(i["task_id"]["value"] for _, infos in actions.accepts for i in infos)
            for job in list(core.state.book.active.values()):
                for task in job.tasks:
                    state = r.choice(["TASK_RUNNING", "TASK_FINISHED", "TASK_FAILED", None])
                    if state is not None:
                        core.on_status(_status(task.task_id, state, task.agent_id))
            while busy.acquire(blocking=False):
                finished += 1
            if finished == submitters and n > 40 and launches:
                return

    users = [submitter(u, i) for i, u in enumerate(["a", "a", "b", spared])]
    _run_all([*users, killer(100), killer(101), rounds])

    assert launches and queued_kills  # the race did launch; queued kills to check
    assert len(launches) == len(set(launches)), "a task was launched twice"
    assert not {t.split(".")[0] for t in launches} & queued_kills
    stored = {j.job_id for j in store.list_jobs()}
    assert {j.job_id for j in acked} <= stored
    _check_agrees(core)


class _ShortStore(JobStore):
    """A store whose ``add_jobs`` answers one job too few (a store bug)."""

    def add_jobs(self, jobs: Sequence[Job]) -> list[Job]:
        return super().add_jobs(jobs)[:-1]


def test_a_store_answering_a_batch_oddly_leaves_no_submitter_waiting(tmp_path):
    core = SchedulerCore(_ShortStore(tmp_path / "db"), _config(cap=2))
    _hold_first_write(core, 3)
    outcomes: list[object] = []

    def one(user: str) -> Callable[[], None]:
        def submit() -> None:
            try:
                outcomes.append(core.submit(user, _spec()))
            except ValueError as exc:  # the odd answer, told to the submit it concerns
                outcomes.append(exc)

        return submit

    _run_all([one("alice"), one("alice"), one("bob")])

    assert len(outcomes) == 3  # every submitter got an answer: none spins for its turn
    assert sum(isinstance(o, ValueError) for o in outcomes) == 1
    assert core.state.book._pending == [] and core.state.book._pending_by_user == {}


# -- admission facts shared by concurrent submits --------------------------------------


def test_refused_submits_of_distinct_specs_keep_the_admission_answers_bounded(
    tmp_path, monkeypatch
):
    """Admission answers are kept per spec until the agents change, and a submit the queue
    cap refuses was answered first: a user at the cap who loops over distinct specs (a
    hostile user) must not grow them without bound; submits sharing the facts' copy from
    many threads all get their answer."""
    monkeypatch.setattr(inventory, "ANSWERS_KEPT", 50)
    core = SchedulerCore(JobStore(tmp_path / "db"), _config(cap=2))
    core.on_offers([offer("o1", "a1", [0, 1])])  # a 2-GPU agent is known
    outcomes: list[object] = []

    def attacker(seed: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(60):
                body = {"image": "busybox", "gpus": 1, "mem_mib": 1000 + seed * 100 + i}
                try:
                    outcomes.append(core.submit("mallory", JobSpec.from_dict(body)))
                except DlcError as exc:
                    outcomes.append(exc)

        return run

    _run_all([attacker(s) for s in range(6)])

    refused = [o for o in outcomes if isinstance(o, DlcError)]
    assert len(outcomes) == 360 and len(refused) == 358
    assert all("already has 2 jobs queued" in str(e) for e in refused)
    assert len(core.state.admission.inventory._answers) <= 50
    with pytest.raises(DlcError, match="gpus"):  # answers still right after a clear
        core.submit("mallory", _spec(gpus=3))


# -- a commit whose answer is lost (PostgreSQL's retry) ---------------------------------


class _LostCommitConnection:
    """A connection whose first COMMIT commits, then fails as a dropped connection would
    (the server has the batch; the client never hears so)."""

    def __init__(self, real: Any):
        self._real = real
        self.dropped = False

    @property
    def in_transaction(self) -> bool:
        return self._real.in_transaction

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._real.execute(sql, *args)
        if sql == "COMMIT" and not self.dropped:
            self.dropped = True
            raise sqlite3.OperationalError("server closed the connection unexpectedly")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _RetryingStore(JobStore):
    """The SQLite engine behind the PostgreSQL store's batch write: ids drawn first, then
    the write retried while the server seems unreachable (``dlc.store.postgres``)."""

    new_job_ids = postgres._retrying(JobStore.new_job_ids)
    add_jobs_as = postgres._retrying(JobStore.add_jobs_as)
    add_jobs = postgres.JobStore.add_jobs

    def _error(self, exc: BaseException, action: str) -> StoreError:
        return StoreError(f"{action}: {exc}", path=self.path, kind="unavailable")

    def _reconnect(self) -> None:
        """Nothing to reconnect: the connection stayed."""


def test_a_submit_whose_commit_answer_is_lost_is_stored_once(tmp_path):
    store = _RetryingStore(tmp_path / "db")
    store._db = _LostCommitConnection(store._db)
    core = SchedulerCore(store, _config())

    acked = core.submit("alice", _spec())

    assert store._db.dropped
    assert [j.job_id for j in store.list_jobs()] == [acked.job_id]


def test_a_kill_between_building_the_launches_and_applying_them_wins(tmp_path):
    """The round builds its TaskInfos and staged jobs before it takes the book's lock; a kill
    acknowledged after that (and before the apply) still wins: the job is not launched, its
    offers are declined, and the store keeps it killed."""
    core = SchedulerCore(JobStore(tmp_path / "db"), _config())
    victim = core.submit("alice", _spec())
    real = core.offer_round.prepare_launch
    answers: list[tuple[Job, Actions]] = []

    def prepare_then_kill(*args: Any, **kwargs: Any) -> Any:
        prepared = real(*args, **kwargs)
        assert prepared is not None and [j.job_id for j in prepared.staged] == [victim.job_id]
        done = threading.Thread(target=lambda: answers.append(core.kill(victim.job_id, "alice")))
        done.start()
        done.join(_DEADLINE_S)  # the kill takes the book's lock only: the round holds none
        assert answers, "the kill waited for the round"
        return prepared

    core.offer_round.prepare_launch = prepare_then_kill  # type: ignore[method-assign]
    actions = core.on_offers([offer("o1", "a1", [0, 1])])
    assert _launched(actions) == []
    assert actions.declines == ["o1"]
    assert answers[0][0].state is JobState.KILLED and not answers[0][0].tasks
    assert core.store.get_job(victim.job_id).state is JobState.KILLED
    _check_agrees(core)


def test_a_submit_goes_through_while_the_round_builds_its_task_infos(tmp_path):
    """Building TaskInfos (and echoing them from the offers) holds neither the book's lock
    nor the store's: a submit made meanwhile is stored and answered before the round ends."""
    answered: list[Job] = []

    class Codec(MesosCodec):
        """The Mesos codec, submitting once from inside the round's first TaskInfo."""

        def encode(self, task: TaskLaunch) -> dict[str, Any]:
            if not answered:
                t = threading.Thread(target=lambda: answered.append(core.submit("bob", _spec())))
                t.start()
                t.join(_DEADLINE_S)
                assert answered, "the submit waited for the round's TaskInfos"
            return super().encode(task)

    core = SchedulerCore(JobStore(tmp_path / "db"), _config(), codec=Codec())
    core.submit("alice", _spec())
    actions = core.on_offers([offer("o1", "a1", [0, 1])])
    assert len(_launched(actions)) == 1
    assert core.store.get_job(answered[0].job_id).state is JobState.QUEUED
    _check_agrees(core)
