"""The job book: queued and active jobs in memory, written through to the store, under its
own short lock.

:class:`~dlc.scheduler.core.facade.SchedulerCore` serialises offer rounds, status updates and kills
of running jobs with one lock, and an offer round holds it for its whole duration (hundreds
of milliseconds at openb scale). What users do most—submit a job, cancel one that still
waits, read a job—touches only the book, so it takes only :attr:`JobBook.lock`, held for a
store write at most (issue 26: a submit used to wait for the whole round).

Lock order, everywhere: the core's lock, then :attr:`JobBook.lock`, then the store's own
lock. Nothing that holds the book's lock takes the core's (a kill of a running job leaves
the book before it waits for the core), so the three never deadlock.

What may change the queue while the core's lock is held by an offer round (the round
decides on a copy, :meth:`JobBook.pin`):

* a submit adds a job: it waits for the next round;
* a kill of a queued job removes it: the round, applying under the book's lock, launches
  only jobs still queued (:meth:`JobBook.holds`), and a save of a queued job the book no
  longer holds is refused (:meth:`JobBook.save`), so a cancelled job is never launched or
  brought back. Nothing else changes a queued job outside the core's lock.

A pin also hands the round the queue's ids in its order (:meth:`JobBook.pinned_ids`) and
the ids that entered or left the queue since the pin before (:meth:`JobBook.
pinned_changes`): what a round keeps per queued job (impossibility answers, the round cap's
turns) is updated from those, not by reading every queued job each round.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import cast

from dlc.scheduler.core.mix_book import MixBook
from dlc.scheduler.core.ports import JobStore
from dlc.scheduler.jobs.job import Job, JobState
from dlc.scheduler.jobs.queue import queue_key

#: a queued job's id -> the job, frozen (a copy the book never changes)
QueueView = Mapping[str, Job]

#: at most so many submits in one write
_BATCH = 256


class _Ticket:
    """One submit on its way to the store."""

    __slots__ = ("done", "error", "job")

    def __init__(self, job: Job):
        self.job = job
        self.done = False
        self.error: BaseException | None = None


class JobBook:
    """Queued and active jobs, per-user queue counters and the queue's order.

    Args:
        store: where every change is written before the book shows it.
        clock: the submit clock (:meth:`submit_time`).
    """

    def __init__(self, store: JobStore, clock: Callable[[], float]):
        self.store = store
        self._clock = clock
        #: held for a dict update and at most one store write (or an offer round's apply)
        self.lock = threading.RLock()
        #: job id -> queued job (not kill-requested); read under :attr:`lock`
        self.queued: dict[str, Job] = {}
        #: job id -> staging, running or preempted job; changed under the core's lock too
        self.active: dict[str, Job] = {}
        #: the queued and running jobs by shape, kept by :meth:`track` (core/mix_book.py)
        self.mix = MixBook()
        #: user -> how many of :attr:`queued` are theirs (the per-user cap at submit, O(1))
        self._by_user: dict[str, int] = {}
        #: the queued ids in placement order, the jobs at the same positions and each one's
        #: queue key (``None`` until first read: then kept by :meth:`track`, a job put in or
        #: taken out at its bisected position, so no round filters or maps 10,000 ids)
        self._order: list[str] | None = None
        self._order_jobs: list[Job] = []
        self._order_keys: dict[str, tuple[int, float, str]] = {}
        #: the latest submit time handed out: each submit gets a later one (the tie order)
        self._last_submit = -math.inf
        #: ids that left the queue since :meth:`take_left` (the core forgets their reasons)
        self._left: list[str] = []
        #: ids that left the queue since :meth:`pin` (:meth:`left_since_pin`); ``None``
        #: while no round holds a pin (nothing is kept then)
        self._left_since_pin: list[str] | None = None
        #: the ids of the pinned queue, in its order (:meth:`pinned_ids`)
        self._pinned_ids: list[str] | None = None
        #: the number of the latest pin (:meth:`pinned_changes`; a reload skips one, so no
        #: round takes the queue after it for the one before)
        self._pins = 0
        #: ids that entered or left the queue since the latest pin, and those of the pinned
        #: queue against the pin before it
        self._changed: list[str] = []
        self._pinned_changed: list[str] | None = None
        #: a frozen copy of :attr:`queued`, made on demand after a change
        self._view: QueueView | None = None
        #: submits waiting to be written, and how many of them each user has
        self._pending: list[_Ticket] = []
        self._pending_by_user: dict[str, int] = {}
        #: whether a thread is writing pending submits, and the signal that it has written
        #: (waiters sleep on it rather than queue on a lock: a lock passed from waiter to
        #: waiter, each to find its job written, cost a GIL hand-over each)
        self._writing = False
        self._written = threading.Condition(threading.Lock())

    # -- reading ----------------------------------------------------------------

    def find(self, job_id: str) -> Job | None:
        """The job from memory while queued or active, else ``None``."""
        with self.lock:
            return self.queued.get(job_id) or self.active.get(job_id)

    def holds(self, job_id: str) -> bool:
        """Whether the job is queued or active (a live job the book keeps)."""
        return job_id in self.queued or job_id in self.active

    def view(self) -> QueueView:
        """The queued jobs as a frozen mapping (copied once per change of the queue)."""
        with self.lock:
            if self._view is None:
                self._view = MappingProxyType(dict(self.queued))
            return self._view

    def ordered(self) -> list[Job]:
        """Queued jobs in placement order."""
        with self.lock:
            if self._order is None:
                self._order_jobs = sorted(self.queued.values(), key=queue_key)
                self._order = [j.job_id for j in self._order_jobs]
                self._order_keys = {j.job_id: queue_key(j) for j in self._order_jobs}
            return list(self._order_jobs)

    def pin(self) -> tuple[QueueView, list[Job]]:
        """The queue as one offer round decides on it: the jobs and their order, taken
        together so the two agree."""
        with self.lock:
            self._left_since_pin = []
            view, jobs = self.view(), self.ordered()
            self._pinned_ids = list(self._order or ())  # ordered() left it the jobs' ids
            self._pins += 1
            self._pinned_changed, self._changed = self._changed, []
            return view, jobs

    def pinned_ids(self) -> list[str] | None:
        """The ids of the jobs :meth:`pin` returned, in that order (``None`` while no round
        holds a pin): the round reads ids from here, not from 10,000 jobs."""
        return self._pinned_ids

    def pinned_changes(self) -> tuple[int, list[str]]:
        """The number of the latest pin, and every id that entered or left the queue between
        the pin before it and that one (repeats allowed): a round keeps what it derives
        per queued job by applying these, not by reading the queue again."""
        return self._pins, self._pinned_changed or []

    def live(self) -> list[Job]:
        """Every queued and active job (a copy)."""
        with self.lock:
            return [*self.queued.values(), *self.active.values()]

    def queued_count(self, user: str) -> int:
        """How many jobs ``user`` has queued, or submitted and being written."""
        return self._by_user.get(user, 0) + self._pending_by_user.get(user, 0)

    def take_left(self) -> list[str]:
        """The ids that left the queue since the last call (killed while queued, launched
        or gone otherwise)."""
        with self.lock:
            left, self._left = self._left, []
            return left

    def left_since_pin(self) -> tuple[str, ...]:
        """The ids that left the queue since :meth:`pin` (an offer round finds the jobs
        killed while it decided without a pass over the whole queue)."""
        with self.lock:
            return tuple(self._left_since_pin or ())

    def unpin(self) -> None:
        """The round that pinned the queue is over: stop keeping :meth:`left_since_pin`."""
        with self.lock:
            self._left_since_pin = None
            self._pinned_ids = None

    # -- writing ----------------------------------------------------------------

    def submit_time(self) -> float:
        """The clock, or just after the previous submit's time when the clock has not moved.

        The queue orders by priority, then submit time, then job id: with equal times the
        random job ids decided, so two submits in one clock tick (or a simulated batch at
        one virtual instant) ran in a random order. Unique times make the order the submit
        order, stored with the job (so it holds across restarts) and off by at most a few
        float steps (about 0.2 µs each at today's UNIX time) from the clock.
        """
        with self.lock:
            now = self._clock()
            if now <= self._last_submit:
                now = math.nextafter(self._last_submit, math.inf)
            self._last_submit = now
            return now

    def add(self, job: Job, room: Callable[[], None] | None = None, stamp: bool = False) -> Job:
        """Store a new job under a fresh id, then queue it; returns it as stored.

        ``room()`` (the per-user cap) runs under :attr:`lock` and may raise to refuse;
        ``stamp``: the job gets its submit time (:meth:`submit_time`) there too. The
        write is shared: the submits that arrive while one batch is written go into the
        next, in one transaction (a store without ``add_jobs`` writes them one by one), so
        a submit costs one lock hand-over and a share of one commit, not a commit of its
        own (each SQLite call lets the GIL go, and an offer round computing meanwhile took
        about 5 ms of it back each time).

        Raises:
            StoreError: the job's write failed (with ``add_jobs``, the whole batch's); it
                was neither stored nor queued.
        """
        ticket = _Ticket(job)
        with self.lock:
            if room is not None:
                room()
            if stamp:  # the submit time, in the same turn of the lock
                ticket.job = job = replace(job, submitted_at=self.submit_time())
            self._pending.append(ticket)
            self._count(job.user, 1, self._pending_by_user)
        while self._turn(ticket):  # one writer at a time; the others wait for their batch
            try:
                self._write_pending()
            finally:
                with self._written:
                    self._writing = False
                    self._written.notify_all()
        if ticket.error is not None:
            raise ticket.error
        return ticket.job

    def _turn(self, ticket: _Ticket) -> bool:
        """Wait until ``ticket`` is written (``False``) or no one writes (``True``: the
        caller writes now). Taken before :attr:`lock`, never under it."""
        with self._written:
            while not ticket.done:
                if not self._writing:
                    self._writing = True
                    return True
                self._written.wait()
            return False

    def _write_pending(self) -> None:
        """Write the pending submits in one go (by the one writer, :meth:`_turn`)."""
        with self.lock:
            batch, self._pending = self._pending[:_BATCH], self._pending[_BATCH:]
            try:
                outcomes = self._store_new([t.job for t in batch])
                for ticket, outcome in zip(batch, outcomes, strict=True):
                    self._count(ticket.job.user, -1, self._pending_by_user)
                    if isinstance(outcome, BaseException):
                        ticket.error = outcome
                    else:
                        ticket.job = self.track(outcome)
                    ticket.done = True
            except BaseException as exc:  # a store's odd answer (or a bug): each submitter
                for ticket in batch:  # still gets an answer, none waits for ever for its turn
                    if not ticket.done:
                        self._count(ticket.job.user, -1, self._pending_by_user)
                        ticket.error = exc
                        ticket.done = True

    def _store_new(self, jobs: list[Job]) -> list[Job | BaseException]:
        """Each job as stored, or why it was not. ``add_jobs`` writes them in one
        transaction: all or none. A store without it writes them one by one, so each gets
        its own outcome (one error for all would tell a submitter whose job was written,
        and would run after a restart, that it failed: submitted again, it ran twice)."""
        add_jobs = getattr(self.store, "add_jobs", None)
        if add_jobs is not None:
            try:
                return list(cast(list[Job], add_jobs(jobs)))
            except BaseException as exc:  # rolled back: none of them was written
                return [exc] * len(jobs)
        outcomes: list[Job | BaseException] = []
        for job in jobs:
            try:
                outcomes.append(self.store.add_job(replace(job, job_id=self.store.new_job_id())))
            except BaseException as exc:  # this one alone: the others' writes stand
                outcomes.append(exc)
        return outcomes

    def save(self, job: Job, event: str | None = None) -> Job | None:
        """Store ``job`` and keep the book in step; ``None`` (nothing written) when ``job``
        is queued but the book holds it neither queued nor active: a kill ended it after
        the caller (an offer round) read it, and writing the caller's copy would bring it
        back. (A job becomes queued only by :meth:`add` or from an active state.)"""
        with self.lock:
            if job.state is JobState.QUEUED and not self.holds(job.job_id):
                return None
            return self.track(self.store.save_job(job, event=event))

    def save_all(self, jobs: Sequence[Job]) -> list[Job]:
        """:meth:`save` for each of ``jobs``, in one store write where the store has
        ``save_jobs`` (an offer round's launches: one statement for all, not a write each);
        a queued job the book no longer holds is left out, as :meth:`save` refuses it.
        Returns the jobs written."""
        with self.lock:
            jobs = [j for j in jobs if j.state is not JobState.QUEUED or self.holds(j.job_id)]
            save_jobs = getattr(self.store, "save_jobs", None)
            if save_jobs is None:
                saved = [self.store.save_job(job) for job in jobs]
            else:
                saved = list(save_jobs(jobs)) if jobs else []
            return [self.track(job) for job in saved]

    def track(self, job: Job) -> Job:
        """Keep the queue and the active set in step with a stored job."""
        with self.lock:
            job_id = job.job_id
            before = (self.queued.get(job_id), self.active.get(job_id))
            self._track(job)
            self.mix.moved(before, (self.queued.get(job_id), self.active.get(job_id)))
            return job

    def _track(self, job: Job) -> None:
        """:meth:`track` without the mix book (under :attr:`lock`)."""
        job_id = job.job_id
        old = self.queued.pop(job_id, None)
        was_queued = old is not None
        if old is not None:
            self._count(old.user, -1, self._by_user)
            self._view = None
            self._leave_order(job_id)
        self.active.pop(job_id, None)
        if job.state is JobState.QUEUED and not job.kill_requested:
            self.queued[job_id] = job
            self._count(job.user, 1, self._by_user)
            self._view = None
            self._enter_order(job)
            if not was_queued:
                self._changed.append(job_id)
        elif was_queued:
            self._changed.append(job_id)
            self._left.append(job_id)
            if self._left_since_pin is not None:
                self._left_since_pin.append(job_id)
        if job.state.active:
            self.active[job_id] = job

    def clear(self) -> None:
        """Forget every job (a reload reads them again)."""
        with self.lock:
            self.queued.clear()
            self._by_user.clear()
            self.active.clear()
            self._order = None
            self._order_jobs = []
            self._order_keys = {}
            self._left.clear()
            self._changed.clear()
            self._pins += 1  # the next pin is not compared with the queue before this
            if self._left_since_pin is not None:
                self._left_since_pin.clear()
            self._view = None
            self.mix.clear()

    @staticmethod
    def _count(user: str, step: int, counts: dict[str, int]) -> None:
        count = counts.get(user, 0) + step
        if count:
            counts[user] = count
        else:
            counts.pop(user, None)

    def _enter_order(self, job: Job) -> None:
        """Put a queued job in its place in the order (a sort of 10,000 queued jobs each
        round that saw a submit cost more than the rest of the round's bookkeeping)."""
        if self._order is None:
            return
        key = self._order_keys[job.job_id] = queue_key(job)
        at = bisect.bisect_right(self._order, key, key=self._order_keys.__getitem__)
        self._order.insert(at, job.job_id)
        self._order_jobs.insert(at, job)

    def _leave_order(self, job_id: str) -> None:
        """Take a job that was queued out of the order, at its bisected position (a filter
        of the 10,000 ids after every round's launches was a fixed part of each round)."""
        if self._order is None:
            return
        keys = self._order_keys
        at = bisect.bisect_left(self._order, keys[job_id], key=keys.__getitem__)
        del self._order[at], self._order_jobs[at]
        del keys[job_id]
