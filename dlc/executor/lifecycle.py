"""When an executor process should end (pure: a clock is injected, no I/O).

An executor that never exits keeps its CPUs and memory allocated on the agent, so after a few
jobs per agent CPU nothing can be scheduled any more. The executor therefore ends:

* ``DONE``: every task it was given has sent its terminal update and the agent acknowledged
  each terminal update (Mesos drops unacknowledged updates of an executor that exits first);
* ``ACK_TIMEOUT``: every task is terminal but an acknowledgement did not come within
  ``ack_timeout_s`` (a lost ack must not keep the process alive for ever; the agent already
  holds the update once it answered the UPDATE call with 202);
* ``AGENT_GONE``: the agent has been unreachable for longer than ``recovery_timeout_s`` (the
  executor then kills its containers before it exits).

With several tasks per executor (shared GPUs later) it ends when the LAST one is done.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

from dlc.scheduler.tasks.states import is_terminal

#: how long a terminal update may wait for its acknowledgement
DEFAULT_ACK_TIMEOUT_S = 20.0


class Verdict(enum.Enum):
    """Why the executor should exit now."""

    DONE = "every task ended and its terminal update was acknowledged"
    ACK_TIMEOUT = "every task ended; a terminal update was not acknowledged in time"
    AGENT_GONE = "the agent was unreachable for longer than the recovery timeout"


class ExecutorLifecycle:
    """Tracks tasks, terminal updates and the agent connection; says when to exit.

    Args:
        ack_timeout_s: wait for acknowledgements of terminal updates at most this long.
        recovery_timeout_s: give up after the agent is unreachable this long (None: never).
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        ack_timeout_s: float = DEFAULT_ACK_TIMEOUT_S,
        recovery_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ack_timeout_s = ack_timeout_s
        self.recovery_timeout_s = recovery_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._terminal: dict[str, bool] = {}
        self._unacked: dict[bytes, str] = {}
        self._last_terminal_at: float | None = None
        self._disconnected_at: float | None = clock()  # not subscribed yet
        self.changed = threading.Event()

    def task_launched(self, task_id: str) -> None:
        """A LAUNCH arrived (before any update of that task is sent)."""
        with self._lock:
            self._terminal.setdefault(task_id, False)
        self._poke()

    def update_sent(self, task_id: str, state: str, uuid: bytes) -> None:
        """An update is about to be sent; terminal ones are waited for until acknowledged."""
        with self._lock:
            done = is_terminal(state)
            self._terminal[task_id] = self._terminal.get(task_id, False) or done
            if done:
                self._unacked[uuid] = task_id
                self._last_terminal_at = self._clock()
        self._poke()

    def acknowledged(self, uuid: bytes) -> None:
        """The agent acknowledged the update with this uuid."""
        with self._lock:
            self._unacked.pop(uuid, None)
        self._poke()

    def connected(self) -> None:
        """The executor is subscribed to its agent."""
        with self._lock:
            self._disconnected_at = None
        self._poke()

    def disconnected(self) -> None:
        """The connection to the agent ended (the driver retries it)."""
        with self._lock:
            if self._disconnected_at is None:
                self._disconnected_at = self._clock()
        self._poke()

    def verdict(self) -> Verdict | None:
        """Why the executor should exit now, or None while it has work or waits for acks."""
        now = self._clock()
        with self._lock:
            gone = self._disconnected_at
            limit = self.recovery_timeout_s
            if limit is not None and gone is not None and now - gone > limit:
                return Verdict.AGENT_GONE
            if not self._terminal or not all(self._terminal.values()):
                return None
            if not self._unacked:
                return Verdict.DONE
            if self._last_terminal_at is not None and now - self._last_terminal_at > (
                self.ack_timeout_s
            ):
                return Verdict.ACK_TIMEOUT
            return None

    def _poke(self) -> None:
        self.changed.set()
