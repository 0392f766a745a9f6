"""Queue order and head-of-line protection.

Jobs run in order of priority (higher first), then submission time, then id.
Smaller jobs further back may *backfill* around a job that does not fit the
current offers, which keeps GPUs busy. Backfilling alone starves big jobs: an
8-GPU job never sees 8 free GPUs while 1-GPU jobs keep grabbing them. So the
queue counts how many placement rounds each job was passed over; once a job has
been skipped ``max_skips`` times it *blocks*: nothing behind it is placed until
it is, so running jobs drain and it gets its GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable

from dlc.scheduler.jobs import Job, JobState


def queue_order(jobs: Iterable[Job]) -> list[Job]:
    """Queued jobs in the order placement considers them."""
    queued = [j for j in jobs if j.state is JobState.QUEUED and not j.kill_requested]
    return sorted(queued, key=lambda j: (-j.spec.priority, j.submitted_at, j.job_id))


class HeadOfLine:
    """Counts skipped rounds per queued job and says which jobs block the queue.

    Args:
        max_skips: rounds a job may be passed over before it blocks those behind
            it; ``0`` means strict FIFO within priority, a large number means
            pure backfill.
    """

    def __init__(self, max_skips: int = 20):
        if max_skips < 0:
            raise ValueError("max_skips must be >= 0")
        self.max_skips = max_skips
        self._skips: dict[str, int] = {}

    def blocks(self, job_id: str) -> bool:
        """Whether this job, if it cannot be placed now, must stop the jobs behind it."""
        return self._skips.get(job_id, 0) >= self.max_skips

    def skips(self, job_id: str) -> int:
        """Rounds the job has been passed over so far."""
        return self._skips.get(job_id, 0)

    def record_round(self, placed: Iterable[str], skipped: Iterable[str]) -> None:
        """Account one placement round.

        Args:
            placed: jobs launched this round (their counters are dropped).
            skipped: jobs that were considered but did not fit.
        """
        for job_id in placed:
            self._skips.pop(job_id, None)
        for job_id in skipped:
            self._skips[job_id] = self._skips.get(job_id, 0) + 1

    def forget(self, job_id: str) -> None:
        """Drop a job's counter (killed or no longer queued)."""
        self._skips.pop(job_id, None)
