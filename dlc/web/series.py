"""Bounded in-memory time series for the dashboard's plots, and their sampler.

Every ``interval_s`` the sampler records GPUs allocated (and total), jobs
waiting, and the queue wait: the longest wait among jobs placed since the last
sample or still queued. A ring of ``capacity`` samples (default one hour at
5 s) bounds memory; on start the dashboard seeds it from the job store's
history (:mod:`dlc.web.replay`), so a restart does not blank the plots.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: the plotted series, in the order of :class:`Sample`'s fields after ``at``
SERIES = ("gpus_allocated", "gpus_total", "jobs_waiting", "queue_wait_s")


@dataclass(frozen=True)
class Sample:
    """One point of every series at time ``at``."""

    at: float
    gpus_allocated: int
    gpus_total: int
    jobs_waiting: int
    queue_wait_s: float


class SeriesRing:
    """A thread-safe ring of the last ``capacity`` samples."""

    def __init__(self, capacity: int = 720):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._samples: deque[Sample] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """How many samples the ring keeps."""
        return self._samples.maxlen or 0

    def add(self, sample: Sample) -> None:
        """Append a sample (the oldest falls out when full)."""
        with self._lock:
            self._samples.append(sample)

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples)

    def to_dict(self) -> dict[str, list]:
        """Column form for JSON: ``{"t": [...], "gpus_allocated": [...], ...}``."""
        with self._lock:
            samples = list(self._samples)
        out: dict[str, list] = {"t": [s.at for s in samples]}
        for name in SERIES:
            out[name] = [getattr(s, name) for s in samples]
        return out


class Sampler:
    """Calls ``take()`` every ``interval_s`` in a daemon thread and stores the sample.

    Args:
        take: builds one :class:`Sample` (must not raise for ordinary states).
        ring: where samples go.
        interval_s: seconds between samples.
    """

    def __init__(self, take: Callable[[], Sample], ring: SeriesRing, interval_s: float = 5.0):
        self._take, self.ring, self.interval_s = take, ring, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_now(self) -> Sample:
        """Take and store one sample at once."""
        sample = self._take()
        self.ring.add(sample)
        return sample

    def start(self) -> None:
        """Start sampling in the background (first sample right away)."""
        self._thread = threading.Thread(target=self._run, name="dlc-web-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_now()
            except Exception:  # a failed sample leaves a gap in the plot, nothing worse
                log.exception("dashboard sample failed")
            self._stop.wait(self.interval_s)
