"""What one offer round already learned did not fit, and how many shapes a user may try.

Placement of one job over 1,000 agents costs milliseconds, so an offer round must not
try 1,000 jobs that all fail. Two parts keep a hostile queue (red-team finding 3 in
docs/security.md: ``--cpus 5.999, 5.998, ...``) within a small factor of an ordinary one:

* :class:`FailedShapes`, the round's failure cache. A job's *kind* is what placement
  compares exactly (GPUs, nodes, model, CUDA, vendor, ROCm, share size, exclusivity, a
  share's user); its *demand* is ``(cpus, mem, disk)``. A job is skipped only when a job of
  the same kind whose demand is no larger in every dimension already failed this round. Why
  that is sound: within a round the slots change only when a launch happens (the cache is then
  emptied), and every test placement makes on cpus/mem/disk is ``free >= demand`` on a
  slot, the rest not depending on them; so the set of slots that can hold a job shrinks
  as its demand grows, and a larger job fails wherever a smaller one of its kind did.
  Shares are the exception: their placement picks one GPU first and may then fail on that
  agent's ports or the share hold, so a larger share could land elsewhere; a share is
  skipped only after an equal one failed. No feasible job is ever skipped.
* :class:`ShapeBudget`, the bound for what the cache cannot cover (each job asking for a
  little *less* than the one before): at most ``limit`` failed placement attempts per
  user per round. A user's further jobs wait with :data:`DEFERRED_PREFIX` as their reason
  and go first among that user's jobs next round (:meth:`ShapeBudget.ordered`), so every
  job is tried within ``ceil(n / limit)`` rounds: no starvation. Placements that succeed
  cost nothing from the budget (they take resources, which quotas bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dlc.scheduler.jobs import Job

#: how a job deferred by the budget's reason starts (it was not passed over for lack of room)
DEFERRED_PREFIX = "not tried this offer round"

#: tolerance of the demand comparison (placement compares with the same 1e-9)
_EPS = 1e-9

#: failed attempts per user per round by default (see docs/scheduler.md for the figures)
DEFAULT_TRIES_PER_USER = 4


def kind_of(job: Job) -> tuple:
    """What placement compares exactly (jobs of one kind differ only in their demand). A
    share's user counts: exclusive placement may keep one user's share off a GPU. The vendor
    and ROCm release count too: without them one user's unplaceable AMD job kept every
    other user's like-sized NVIDIA job waiting (red-team 2026-11-26, docs/security.md). A
    gang that requires one switch fails where one that prefers it runs: the level counts."""
    spec = job.spec
    return (spec.gpus, spec.nodes, spec.gpu_model, spec.cuda_version, spec.gpu_fraction,
            spec.gpu_memory, spec.exclusive_per, spec.interactive, spec.gpu_vendor,
            spec.rocm_version, job.user if spec.is_share else None,
            spec.gang_topology)  # fmt: skip


def demand_of(job: Job) -> tuple[float, float, float]:
    """The dimensions placement compares with ``free >= demand``: cpus, mem, disk."""
    spec = job.spec
    return (float(spec.cpus), float(spec.mem_mib), float(spec.disk_mib))


def _covers(small: tuple[float, ...], big: tuple[float, ...]) -> bool:
    return all(s <= b + _EPS for s, b in zip(small, big, strict=True))


@dataclass
class FailedShapes:
    """The round's failures: exact ``(kind, demand)`` and, per kind that is not a share,
    the minimal failed demands (an antichain: none covers another)."""

    _exact: dict[tuple, str] = field(default_factory=dict)
    _minimal: dict[tuple, list[tuple[tuple[float, float, float], str]]] = field(
        default_factory=dict
    )

    def known(self, kind: tuple, demand: tuple[float, float, float]) -> str | None:
        """Why a job of ``kind`` and ``demand`` cannot fit this round, or ``None`` when no
        job of its kind needing no more in every dimension failed (a share: no job of its
        kind and the same demand)."""
        reason = self._exact.get((kind, demand))
        if reason is not None:
            return reason
        for failed, why in self._minimal.get(kind, ()):
            if _covers(failed, demand):
                return f"{why} (found for a job of this kind that needs no more than this one)"
        return None

    def add(
        self, kind: tuple, demand: tuple[float, float, float], reason: str, monotone: bool = True
    ) -> None:
        """Remember a failure; ``monotone`` (not for shares): it also covers larger demands
        of its kind (dropping the minimal demands it covers)."""
        self._exact[(kind, demand)] = reason
        if not monotone:
            return
        kept = [(d, r) for d, r in self._minimal.get(kind, ()) if not _covers(demand, d)]
        kept.append((demand, reason))
        self._minimal[kind] = kept

    def clear(self) -> None:
        """Forget everything (a launch changed the slots)."""
        self._exact.clear()
        self._minimal.clear()


@dataclass
class ShapeBudget:
    """At most ``limit`` failed placement attempts per user per round, taken in turn.

    One object lives in the core across rounds: :meth:`start` begins a round,
    :meth:`ordered` puts the jobs deferred last round first among their user's jobs,
    :meth:`may_try` / :meth:`failed` count, :meth:`defer_reason` says why a job waits.
    """

    limit: int = DEFAULT_TRIES_PER_USER
    _failures: dict[str, int] = field(default_factory=dict)
    _deferred: set[str] = field(default_factory=set)
    _deferred_before: set[str] = field(default_factory=set)

    def start(self) -> None:
        """Begin a round: last round's deferred jobs get the first turns in this one."""
        self._deferred_before = self._deferred
        self._deferred = set()
        self._failures = {}

    def ordered(self, queue: Sequence[Job]) -> list[Job]:
        """``queue`` with each user's jobs deferred last round moved ahead of that user's
        other jobs (taking their places; other users' positions do not change)."""
        if not self._deferred_before:
            return list(queue)
        users = {j.user for j in queue if j.job_id in self._deferred_before}
        mine: dict[str, list[Job]] = {}
        for job in queue:
            if job.user in users:
                mine.setdefault(job.user, []).append(job)
        turns = {
            user: iter(sorted(jobs, key=lambda j: j.job_id not in self._deferred_before))
            for user, jobs in mine.items()
        }
        return [next(turns[j.user]) if j.user in turns else j for j in queue]

    def may_try(self, job: Job) -> bool:
        """Whether ``job``'s user has failed attempts left this round."""
        return self._failures.get(job.user, 0) < self.limit

    def failed(self, job: Job) -> None:
        """Count one failed placement attempt of ``job``'s user."""
        self._failures[job.user] = self._failures.get(job.user, 0) + 1

    def defer(self, job: Job) -> str:
        """Defer ``job`` to a later round; returns its reason."""
        self._deferred.add(job.job_id)
        return (
            f"{DEFERRED_PREFIX}: {self.limit} other job shapes of the same user did not fit "
            f"in this round (DLC tries {self.limit} per user per round; this one goes first "
            "next round)"
        )
