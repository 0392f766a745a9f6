"""At most so many queued jobs considered per offer round, taken in turns (issue 26).

At openb scale one offer round placed about 1,000 shares in its first round (each reading
every agent with room and scoring it) and visited some 9,000 queued jobs in every later
one; a round's time grew with the queue. :class:`RoundCap` bounds the jobs one round
*considers* (hands to placement, whether placement runs or a cache answers) to ``limit``:

* the first half of the limit goes to the head of the queue in its order (priority, quota
  and fair-share order as :func:`~dlc.scheduler.tenancy.quotas.plan` made it), every round: a job
  that comes first is never kept waiting by the rotation;
* the other half goes, in turns, to the rest: the jobs whose last turn is oldest go first
  (a job counts from the round before it first queued), ties in queue order. A job the cap skips
  keeps its place and comes before every job considered since, so with ``n`` jobs behind the
  head each is considered within ``ceil(n / (limit - limit // 2))`` rounds: no starvation,
  whatever is submitted meanwhile (a new job queues behind every older one in the turns);
* the jobs chosen are placed in queue order; a job holding a reservation is always chosen.

Rounds of the core that decide on the queue as the job book pinned it (no tenancy policy,
nothing held) keep the turns from round to round (:class:`TurnDelta`): the jobs that entered
or left the queue since the last round are applied to them, and the longest-waiting jobs are
the first of a heap ordered by (turn, queue key), the queue's own order among equal turns;
so such a round reads the ~64 jobs that changed and the ~32 it picks, not the 10,000 queued.
Every other round reads the whole queue as before, and the next one starts the heap again.

A job the budget (:class:`~dlc.scheduler.placement.shape_cache.ShapeBudget`) defers has not had its
turn: it keeps its place here too. Jobs not considered keep the reason of their last turn
(:data:`CAP_PREFIX` when they never had one) and are not counted as passed over (they do not
reserve agents). Skipping jobs never changes what a considered job may take: placement is
in queue order, so a later job sitting out can only leave more room for earlier ones.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat

import numpy as np

from dlc.errors import ConfigError
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.jobs.queue import queue_key

#: how a reason of a job the cap has not yet considered starts
CAP_PREFIX = "not considered yet"

#: queued jobs one offer round considers by default (docs/scheduler.md has the figures)
DEFAULT_JOBS_PER_ROUND = 32


#: a turn-heap entry: (the turn, the job's queue key, the job id)
_Entry = tuple[int, tuple[int, float, str], str]


@dataclass(frozen=True)
class TurnDelta:
    """How this round's runnable jobs differ from those of the round before, when both are
    the pinned queue less its impossible jobs (:func:`~dlc.scheduler.placement.decide.decide` makes
    it).

    ``before``/``after``: marks of the two queues (the book's pin number and the inventory
    version): the delta applies only to turns kept at ``before``. ``changed``: every job id
    that entered or left the queue in between (repeats allowed); ``runnable``: whether a job
    id is runnable this round; ``job_of``: a runnable job by id."""

    before: Hashable
    after: Hashable
    changed: Sequence[str]
    runnable: Callable[[str], bool]
    job_of: Callable[[str], Job]


@dataclass
class RoundCap:
    """Chooses the jobs of each offer round (``limit``: ``None`` for no bound).

    One object lives in the core across rounds: :meth:`choose` begins a round and returns
    the jobs to consider; :meth:`had_turn` records the jobs that got an answer. A limit of 1
    has no head: its one job a round goes in turns.

    Raises:
        ConfigError: a limit below 1.
    """

    limit: int | None = DEFAULT_JOBS_PER_ROUND
    _round: int = 0
    #: queued job id -> the round of its last turn (or the round it first queued)
    _turns: dict[str, int] = field(default_factory=dict)
    #: the mark (:attr:`TurnDelta.after`) of the queue :attr:`_turns` holds, while the heap
    #: and keys below are kept for it (``None``: the next round reads the whole queue)
    _mark: Hashable | None = None
    #: (turn, queue key, id) of each runnable job, and stale entries (skipped when popped)
    _heap: list[_Entry] = field(default_factory=list)
    #: runnable job id -> its queue key
    _keys: dict[str, tuple[int, float, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(
                "max_jobs_per_round", f"must be at least 1 (or none for all), not {self.limit}"
            )

    def choose(
        self,
        queue: Sequence[Job],
        keep: Collection[str] = (),
        ids: list[str] | None = None,
        delta: TurnDelta | None = None,
    ) -> list[Job]:
        """The jobs of ``queue`` (in queue order) this round considers: the head, the
        longest-waiting others, and every job in ``keep`` (a reservation's holder).
        ``ids``: the job ids of ``queue`` in its order, when the caller has them; ``delta``:
        how ``queue`` (in queue-key order) differs from the last round's, when it does."""
        self._round += 1
        if delta is not None and delta.before == self._mark and self._mark is not None:
            chosen = self._choose_kept(queue, keep, ids, delta)
            if chosen is not None:
                return chosen
        turns, now = self._turns, self._round
        # a new job has waited since before this round: it goes before the jobs that have
        # their turn now, and after the ones still waiting from earlier rounds (the passes
        # over 10,000 queued jobs run in C: they were a fixed part of every round, issue 26)
        ids = list(map(_job_id, queue)) if ids is None else ids
        last = list(map(turns.get, ids, repeat(now - 1)))  # each job's turn, read once
        self._turns = dict(zip(ids, last, strict=True))
        self._mark = None
        if delta is not None:  # the next round may apply its delta to these turns
            self._keep_heap(queue, ids, last, delta.after)
        if self.limit is None or len(queue) <= self.limit:
            return list(queue)
        head = self.limit // 2
        picked = _oldest(last[head:], self.limit - head)
        if keep:
            picked.update(compress(count(), map(keep.__contains__, ids[head:])))
        return list(queue[:head]) + [queue[head + i] for i in sorted(picked)]

    def _keep_heap(
        self, queue: Sequence[Job], ids: list[str], last: list[int], mark: Hashable
    ) -> None:
        """Start the heap and keys of the turns just read (once after each full read)."""
        keys = list(map(queue_key, queue))
        self._keys = dict(zip(ids, keys, strict=True))
        self._heap = list(zip(last, keys, ids, strict=True))
        heapq.heapify(self._heap)
        self._mark = mark

    def _choose_kept(
        self, queue: Sequence[Job], keep: Collection[str], ids: list[str] | None,
        delta: TurnDelta,
    ) -> list[Job] | None:  # fmt: skip
        """:meth:`choose` from the kept turns and heap with ``delta`` applied; ``None``
        (nothing kept any more) when they do not hold ``queue``'s jobs after all."""
        turns, keys, heap, now = self._turns, self._keys, self._heap, self._round
        for job_id in dict.fromkeys(delta.changed):
            if not delta.runnable(job_id):
                turns.pop(job_id, None)
                keys.pop(job_id, None)
                continue
            key = queue_key(delta.job_of(job_id))
            turn = turns.setdefault(job_id, now - 1)  # new: waited since before this round
            if keys.get(job_id) != key:
                keys[job_id] = key
                heapq.heappush(heap, (turn, key, job_id))
        self._mark = None
        if len(turns) != len(queue):  # not the queue the delta says: read it afresh
            return None
        if len(heap) > 2 * len(turns) + 1024:  # mostly stale entries: start it again
            self._heap = heap = [(t, keys[j], j) for j, t in turns.items()]
            heapq.heapify(heap)
        self._mark = delta.after
        if self.limit is None or len(queue) <= self.limit:
            return list(queue)
        head = self.limit // 2
        first = set(map(_job_id, queue[:head]))
        picked = self._pop_oldest(first, self.limit - head)
        picked.update(j for j in keep if j in turns and j not in first)
        return list(queue[:head]) + [delta.job_of(j) for j in sorted(picked, key=keys.__getitem__)]

    def _pop_oldest(self, skip: set[str], n: int) -> set[str]:
        """The ``n`` jobs not in ``skip`` first by (turn, queue key): the heap's valid
        entries, read in order and put back (stale ones are dropped)."""
        turns, keys, heap = self._turns, self._keys, self._heap
        read: list[_Entry] = []
        seen: set[str] = set()
        picked: set[str] = set()
        while heap and len(picked) < n:
            entry = heapq.heappop(heap)
            turn, key, job_id = entry
            if job_id in seen or turns.get(job_id) != turn or keys.get(job_id) != key:
                continue  # stale: the job had a turn since, left, or came back
            seen.add(job_id)
            read.append(entry)
            if job_id not in skip:
                picked.add(job_id)
        for entry in read:
            heapq.heappush(heap, entry)
        return picked

    def had_turn(self, job_ids: Iterable[str]) -> None:
        """Record that these jobs were considered this round (placed or answered)."""
        now = self._round
        turns = self._turns
        kept = self._mark is not None
        for job_id in job_ids:
            if job_id in turns and turns[job_id] != now:
                turns[job_id] = now
                if kept:  # its entry in the heap is stale now: a new one
                    heapq.heappush(self._heap, (now, self._keys[job_id], job_id))

    def reason(self) -> str:
        """Why a job that never had a turn waits."""
        return (
            f"{CAP_PREFIX}: an offer round considers {self.limit} queued jobs (the head of "
            "the queue and the longest-waiting others, in turns); its turn comes"
        )


_job_id = operator.attrgetter("job_id")


def _oldest(turns: list[int], n: int) -> set[int]:
    """The positions of the ``n`` smallest of ``turns`` (ties: the earlier position first),
    as ``heapq.nsmallest(n, range(len(turns)), key=turns.__getitem__)`` picks them (``n``
    below ``len(turns)``), without a step of Python per job."""
    ages = np.fromiter(turns, dtype=np.int64, count=len(turns))
    cut = ages[np.argpartition(ages, n - 1)[:n]].max()  # the n-th smallest turn
    near = np.flatnonzero(ages <= cut)  # every position up to it, in order
    return set(near[np.argsort(ages[near], kind="stable")][:n].tolist())
