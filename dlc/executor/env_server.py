"""Interactive environments on the agent: where the server is, and stopping it when idle.

An interactive task publishes its server (JupyterLab on container port 8888) on a host port it
took from its offer. The executor writes ``<sandbox>/dlc-env.json`` (``{"port": N}``), which the
API reads like ``stdout`` to build the URL, and watches Jupyter's activity API
(``GET /api/status``, its ``last_activity``) every ``poll_s``: once the server has been idle for
the job's ``idle_timeout_s`` the container is stopped and the task ends ``TASK_FINISHED`` with
``stopped: idle for N s``. A server that does not answer counts as idle from the container's
start (so a broken server cannot hold a GPU for ever).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dlc.scheduler.jobs.launch_spec import LaunchSpec

log = logging.getLogger(__name__)
ENV_FILE = "dlc-env.json"


def write_env_file(sandbox: Path, spec: LaunchSpec) -> None:
    """Record the host port of the environment's server for the API."""
    if spec.publish:
        (sandbox / ENV_FILE).write_text(json.dumps({"port": spec.publish[0][1]}))


def parse_last_activity(body: bytes) -> float | None:
    """``last_activity`` of a Jupyter ``/api/status`` answer as a UNIX time (``None``: absent)."""
    try:
        text = json.loads(body).get("last_activity")
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except (ValueError, TypeError, AttributeError):
        return None


class IdleWatch:
    """Polls the server's activity in a thread; calls ``stop`` once it has been idle too long.

    Attributes:
        reason: why it stopped the container (empty while it has not).
    """

    def __init__(self, spec: LaunchSpec, stop: Callable[[], None], poll_s: float = 5.0,
                 clock: Callable[[], float] = time.time):  # fmt: skip
        host_port = spec.publish[0][1]
        token = spec.env.get("JUPYTER_TOKEN", "")
        self.url = f"http://127.0.0.1:{host_port}/api/status?token={token}"
        self.idle_s = spec.idle_timeout_s
        self.stop, self.poll_s, self.clock = stop, poll_s, clock
        self.reason = ""
        self.started = clock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dlc-idle-watch", daemon=True)

    def start(self) -> IdleWatch:
        self._thread.start()
        return self

    def close(self) -> None:
        """The container ended by itself: stop watching."""
        self._done.set()

    def last_activity(self) -> float:
        """The server's last activity (its start when it does not say)."""
        try:
            with urllib.request.urlopen(self.url, timeout=5) as resp:  # noqa: S310
                seen = parse_last_activity(resp.read())
        except OSError:
            seen = None
        return max(seen or self.started, self.started)

    def check(self) -> bool:
        """One poll; stops the container and returns ``True`` when idle too long."""
        idle = self.clock() - self.last_activity()
        if idle < self.idle_s:
            return False
        self.reason = f"stopped: idle for {int(idle)} s (limit {int(self.idle_s)} s)"
        log.info("environment %s", self.reason)
        self.stop()
        return True

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            try:
                if self.check():
                    return
            except Exception:  # a bug here must not end the task
                log.exception("idle watch failed")
                return
