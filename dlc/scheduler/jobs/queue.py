"""Queue order and bounded reservations for big jobs.

Jobs run in order of priority (higher first), then submission time, then id.
Smaller jobs further back may *backfill* around a job that does not fit the
current offers, which keeps GPUs busy. Backfilling alone starves big jobs: an
8-GPU job never sees 8 free GPUs while 1-GPU jobs keep grabbing them.

So a job passed over ``reserve_after`` rounds *reserves* specific agents (the
ones closest to fitting it): no other job is placed there, so they drain,
while every other agent keeps taking backfill. A reservation is bounded: it
ends when the job is placed, when it is killed, when the job becomes
impossible on the agents there are, or after ``hold_s`` seconds; then the job
may not reserve again for another ``hold_s`` (so others get their turn) and
the release is reported with its reason. Nothing ever blocks the whole queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dlc.scheduler.jobs.job import Job, JobState


def queue_order(jobs: Iterable[Job]) -> list[Job]:
    """Queued jobs in the order placement considers them."""
    queued = [j for j in jobs if j.state is JobState.QUEUED and not j.kill_requested]
    return sorted(queued, key=queue_key)


def queue_key(job: Job) -> tuple[int, float, str]:
    """Sort key of :func:`queue_order`."""
    return (-job.spec.priority, job.submitted_at, job.job_id)


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """Agents held for one queued job until ``until`` (UNIX time)."""

    job_id: str
    agent_ids: tuple[str, ...]
    since: float
    until: float

    def describe(self, now: float, free: str = "") -> str:
        """``reserving agent a1: 5 of 8 GPUs free (27 min left)``."""
        noun = "agent" if len(self.agent_ids) == 1 else "agents"
        left = max(0.0, self.until - now)
        text = f"reserving {noun} {', '.join(self.agent_ids)}"
        if free:
            text += f": {free}"
        return f"{text} ({_duration(left)} left)"


class Reservations:
    """Skip counts per queued job and at most one bounded reservation.

    Args:
        reserve_after: rounds a job may be passed over before it reserves agents
            (``0``: at once).
        hold_s: the longest a reservation lasts, and the pause before the same job
            may reserve again.
    """

    def __init__(self, reserve_after: int = 20, hold_s: float = 1800.0):
        if reserve_after < 0:
            raise ValueError("reserve_after must be >= 0")
        if hold_s <= 0:
            raise ValueError("hold_s must be > 0")
        self.reserve_after = reserve_after
        self.hold_s = hold_s
        self._skips: dict[str, int] = {}
        self._cooling: dict[str, float] = {}
        self.active: Reservation | None = None

    def skips(self, job_id: str) -> int:
        """Rounds the job has been passed over so far."""
        return self._skips.get(job_id, 0)

    def held(self) -> dict[str, str]:
        """agent id -> the job holding it."""
        if self.active is None:
            return {}
        return {a: self.active.job_id for a in self.active.agent_ids}

    def record_round(self, placed: Iterable[str], skipped: Iterable[str]) -> None:
        """Account one placement round (a placed holder's reservation ends)."""
        for job_id in placed:
            self._skips.pop(job_id, None)
            self._cooling.pop(job_id, None)
            if self.active is not None and self.active.job_id == job_id:
                self.active = None
        for job_id in skipped:
            self._skips[job_id] = self._skips.get(job_id, 0) + 1

    def may_reserve(self, job_id: str, now: float) -> bool:
        """Whether the job is due to reserve: passed over enough, not cooling down, and no
        other reservation is active."""
        if self.active is not None or self.skips(job_id) < self.reserve_after:
            return False
        return self._cooling.get(job_id, 0.0) <= now

    def reserve(self, job_id: str, agent_ids: Iterable[str], now: float) -> Reservation:
        """Hold ``agent_ids`` for ``job_id`` for at most :attr:`hold_s`."""
        self.active = Reservation(
            job_id=job_id, agent_ids=tuple(agent_ids), since=now, until=now + self.hold_s
        )
        return self.active

    def expired(self, now: float) -> Reservation | None:
        """The active reservation if its time is up."""
        if self.active is not None and now >= self.active.until:
            return self.active
        return None

    def release(self, job_id: str, now: float) -> Reservation | None:
        """End the job's reservation (if it holds one); it may reserve again after
        :attr:`hold_s`. Returns the ended reservation."""
        ended = self.active if self.active and self.active.job_id == job_id else None
        if ended is not None:
            self.active = None
            self._cooling[job_id] = now + self.hold_s
            self._skips[job_id] = 0
        return ended

    def forget(self, job_id: str) -> None:
        """Drop everything about a job that left the queue (killed, placed elsewhere)."""
        self._skips.pop(job_id, None)
        self._cooling.pop(job_id, None)
        if self.active is not None and self.active.job_id == job_id:
            self.active = None


def _duration(seconds: float) -> str:
    if seconds >= 90:
        return f"{round(seconds / 60)} min"
    return f"{int(seconds)} s"
