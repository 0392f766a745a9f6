"""At most so many queued jobs considered per offer round, taken in turns (issue 26).

At openb scale one offer round placed about 1,000 shares in its first round (each reading
every agent with room and scoring it) and visited some 9,000 queued jobs in every later
one; a round's time grew with the queue. :class:`RoundCap` bounds the jobs one round
*considers* (hands to placement, whether placement runs or a cache answers) to ``limit``:

* the first half of the limit goes to the head of the queue in its order (priority, quota
  and fair-share order as :func:`~dlc.scheduler.quotas.plan` made it), every round: a job
  that comes first is never kept waiting by the rotation;
* the other half goes, in turns, to the rest: the jobs whose last turn is oldest go first
  (a job counts from the round before it first queued), ties in queue order. A job the cap skips
  keeps its place and comes before every job considered since, so with ``n`` jobs behind the
  head each is considered within ``ceil(n / (limit - limit // 2))`` rounds: no starvation,
  whatever is submitted meanwhile (a new job queues behind every older one in the turns);
* the jobs chosen are placed in queue order; a job holding a reservation is always chosen.

A job the budget (:class:`~dlc.scheduler.shape_cache.ShapeBudget`) defers has not had its
turn: it keeps its place here too. Jobs not considered keep the reason of their last turn
(:data:`CAP_PREFIX` when they never had one) and are not counted as passed over (they do not
reserve agents). Skipping jobs never changes what a considered job may take: placement is
in queue order, so a later job sitting out can only leave more room for earlier ones.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat

import numpy as np

from dlc.errors import ConfigError
from dlc.scheduler.jobs import Job

#: how a reason of a job the cap has not yet considered starts
CAP_PREFIX = "not considered yet"

#: queued jobs one offer round considers by default (docs/scheduler.md has the figures)
DEFAULT_JOBS_PER_ROUND = 32


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

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(
                "max_jobs_per_round", f"must be at least 1 (or none for all), not {self.limit}"
            )

    def choose(
        self, queue: Sequence[Job], keep: Collection[str] = (), ids: list[str] | None = None
    ) -> list[Job]:
        """The jobs of ``queue`` (in queue order) this round considers: the head, the
        longest-waiting others, and every job in ``keep`` (a reservation's holder).
        ``ids``: the job ids of ``queue`` in its order, when the caller has them."""
        self._round += 1
        turns, now = self._turns, self._round
        # a new job has waited since before this round: it goes before the jobs that have
        # their turn now, and after the ones still waiting from earlier rounds (the passes
        # over 10,000 queued jobs run in C: they were a fixed part of every round, issue 26)
        ids = list(map(_job_id, queue)) if ids is None else ids
        last = list(map(turns.get, ids, repeat(now - 1)))  # each job's turn, read once
        self._turns = dict(zip(ids, last, strict=True))
        if self.limit is None or len(queue) <= self.limit:
            return list(queue)
        head = self.limit // 2
        picked = _oldest(last[head:], self.limit - head)
        if keep:
            picked.update(compress(count(), map(keep.__contains__, ids[head:])))
        return list(queue[:head]) + [queue[head + i] for i in sorted(picked)]

    def had_turn(self, job_ids: Iterable[str]) -> None:
        """Record that these jobs were considered this round (placed or answered)."""
        now = self._round
        turns = self._turns
        for job_id in job_ids:
            if job_id in turns:
                turns[job_id] = now

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
