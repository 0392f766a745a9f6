"""What the scheduling core needs from the layers above it, as protocols (ports).

The core decides; adapters persist and observe. :class:`JobStore` is implemented by
:class:`dlc.store.sqlite.JobStore` (and the in-memory store of tests and the simulator),
:class:`RoundSink` by :class:`dlc.api.metrics.SchedulerMetrics`. The core imports only these
protocols, so it never imports SQLite or Prometheus (the layer contracts in ``.importlinter``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dlc.scheduler.jobs import Job, JobState
from dlc.scheduler.placement import Launch, OfferView


class JobStore(Protocol):
    """Where jobs live between scheduler runs."""

    framework_id: str | None

    def new_job_id(self) -> str:
        """A fresh, unused job id."""

    def add_job(self, job: Job) -> Job:
        """Stores a new job; returns it as stored."""

    def save_job(self, job: Job, event: str | None = None) -> Job:
        """Stores a changed job (and an event line); returns it as stored."""

    def get_job(self, job_id: str) -> Job:
        """One job; raises JobNotFound."""

    def list_jobs(
        self,
        user: str | None = None,
        states: set[JobState] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs of ``user`` in ``states``, oldest first unless ``newest_first``."""

    def list_jobs_page(self, user: str | None, limit: int, before: str | None = None) -> list[Job]:
        """Up to ``limit`` jobs of ``user``, newest first, older than job ``before``."""

    def history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid API token, else ``None``."""

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid API token, else ``None``."""


class RoundSink(Protocol):
    """Observes each offer round (monitoring)."""

    def record_round(
        self,
        views: Sequence[OfferView],
        received: int,
        declined: int,
        latency_s: float,
        placed: Sequence[tuple[Job, Sequence[Launch]]],
    ) -> None:
        """Counts one offer batch and what was placed on it."""
