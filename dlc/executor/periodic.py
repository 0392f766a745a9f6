"""A daemon thread that calls one function at a fixed interval until stopped.

The GPU memory watchdog and the usage sampler both sample NVML this way; a failed sample is
logged and the next one still runs, because one bad NVML read must not end the watching."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Ticker:
    """Call ``tick`` every ``interval_s`` seconds on a daemon thread named ``name``."""

    def __init__(self, interval_s: float, tick: Callable[[], object], name: str) -> None:
        self.interval_s = interval_s
        self.name = name
        self._tick = tick
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the thread was started and not stopped."""
        return self._thread is not None

    def start(self) -> None:
        """Start the thread (once: a second call does nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait up to ``timeout_s`` for the sample in progress."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._tick()
            except Exception:  # a failed sample must not end the sampling
                log.exception("%s: sample failed", self.name)
