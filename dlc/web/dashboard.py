"""The dashboard's routes, served by the scheduler's API server.

Unauthenticated: ``GET /`` (the page; its sign-in form POSTs a token to
``/v1/session``, which sets an HttpOnly, SameSite=Strict cookie: the token is never
in a URL), ``GET /static/<file>`` and ``GET /metrics`` (Prometheus text; aggregates
only). Authenticated with that cookie or the API's bearer tokens:
``GET /v1/dashboard`` (the live snapshot the page polls every 2 s) and
``GET /v1/dashboard/agents/<agent_id>/topology`` (an agent's topology
drawing as SVG text, made once per agent layout). The per-job page uses the API
itself (``/v1/jobs/<id>``, ``/logs``, ``/kill``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from dlc.api.metrics import CONTENT_TYPE, SchedulerMetrics
from dlc.mesos.master import fetch_slaves
from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.jobs.job import JobState
from dlc.scheduler.placement.cluster import GPU_TAKEN, AgentView
from dlc.web.replay import replay_samples
from dlc.web.series import Sample, Sampler, SeriesRing
from dlc.web.snapshot import add_usage, build_snapshot

log = logging.getLogger(__name__)

#: static files the page needs -> content type (nothing else under static/ is served)
STATIC = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "tenancy.js": "text/javascript; charset=utf-8",
    "cluster.js": "text/javascript; charset=utf-8",
}
#: seconds between reads of the master's agent list (offers update agents in between)
AGENT_REFRESH_S = 30.0
_TOPOLOGY_PATH = re.compile(r"/v1/dashboard/agents/([^/]+)/topology")

Page = tuple[int, bytes, str]


class Dashboard:
    """Dashboard state and routes for one scheduler.

    Args:
        core: the scheduler core (its store holds jobs and history).
        metrics: the scheduler's metrics (agents seen, recent queue waits).
        scheduler_info: returns the header facts (version, framework name/id/url, master).
        clock: wall-clock time source.
        sample_interval_s: seconds between plot samples.
        ring_capacity: samples kept per series.
    """

    def __init__(
        self,
        core: SchedulerCore,
        metrics: SchedulerMetrics,
        scheduler_info: Callable[[], dict[str, Any]] = dict,
        clock: Callable[[], float] = time.time,
        sample_interval_s: float = 5.0,
        ring_capacity: int = 720,
    ):
        self.core, self.metrics = core, metrics
        self._info, self._clock = scheduler_info, clock
        self.ring = SeriesRing(ring_capacity)
        self.sampler = Sampler(self.take_sample, self.ring, sample_interval_s)
        self._svg_cache: dict[tuple[str, str], str | None] = {}
        self._svg_lock = threading.Lock()
        self._agents_at = 0.0  # next time to read the master's agent list

    def start(self) -> None:
        """Seed the plots from the job store's history, then start sampling."""
        try:
            count = self.ring.capacity - 1  # leave room for the first live sample
            seeded = replay_samples(self.core, self._clock(), self.sampler.interval_s, count)
        except Exception:  # empty plots are better than a dashboard that does not start
            log.exception("replaying the job history into the plots failed")
            seeded = []
        for sample in seeded:
            self.ring.add(sample)
        self.sampler.start()

    def stop(self) -> None:
        """Stop sampling."""
        self.sampler.stop()

    # -- unauthenticated pages -------------------------------------------------

    def page(self, path: str) -> Page | None:
        """``(status, body, content type)`` for the page, static files and ``/metrics``;
        ``None`` for paths that are not the dashboard's."""
        if path in ("/", "/index.html"):
            return 200, _static("index.html"), "text/html; charset=utf-8"
        if path == "/metrics":
            return 200, self.metrics.exposition(), CONTENT_TYPE
        if path.startswith("/static/"):
            name = path[len("/static/") :]
            if name in STATIC:
                return 200, _static(name), STATIC[name]
            return 404, b"no such file\n", "text/plain; charset=utf-8"
        return None

    # -- authenticated JSON ----------------------------------------------------

    def handles(self, path: str) -> bool:
        """Whether ``path`` is one of the dashboard's JSON routes."""
        return path == "/v1/dashboard" or path.startswith("/v1/dashboard/")

    def route(self, method: str, path: str, user: str, admin: bool) -> tuple[int, dict]:
        """Answer a dashboard JSON request of an authenticated caller."""
        if method != "GET":
            return 405, {"error": f"{method} is not allowed on {path}", "field": None}
        if path == "/v1/dashboard":
            return 200, self.snapshot(user, admin)
        match = _TOPOLOGY_PATH.fullmatch(path)
        agent = self.core.cluster_agent(match.group(1)) if match else None
        if agent is None:
            what = f"no agent {match.group(1)}" if match else f"no endpoint GET {path}"
            return 404, {"error": f"{what}; see /v1/dashboard", "field": None}
        return 200, {"agent_id": agent.agent_id, "svg": self.topology_svg(agent)}

    def snapshot(self, user: str, admin: bool) -> dict[str, Any]:
        """The main page's data for this caller (see :func:`~dlc.web.snapshot.build_snapshot`)."""
        agents = self.core.cluster()
        if not agents:
            self._refresh_agents(self._clock())  # a fresh page should not wait for the sampler
            agents = self.core.cluster()
        jobs = self.core.all_jobs()
        requeued = {
            j.job_id: self.metrics.queued_since(j)
            for j in jobs
            if j.state is JobState.QUEUED and j.attempt
        }
        info = dict(self._info())
        info["p2p_ratio"] = self.metrics.p2p_ratio()
        info["sample_interval_s"] = self.sampler.interval_s
        snapshot = build_snapshot(
            jobs,
            agents,
            user,
            admin,
            self._clock(),
            self.ring.to_dict(),
            info,
            requeued,
            self.run_order(),
        )
        return add_usage(
            snapshot, self.core
        )  # allocated versus used (dlc/scheduler/tasks/usage.py)

    def run_order(self) -> list[str]:
        """Queued job ids in the core's run order (the tenancy plan, as ``dlc queue``)."""
        try:
            rows = self.core.plan_queue(self.core.queued_jobs()).rows
        except Exception:  # the queue's order is a nicety: never fail the page for it
            log.exception("planning the queue for the dashboard failed")
            return [j.job_id for j in self.core.queued_jobs()]
        return [row.job.job_id for row in rows]

    def topology_svg(self, agent: AgentView) -> str | None:
        """The agent's topology picture (``None`` when it advertises no ``dlc_topo``)."""
        key = (agent.agent_id, agent.attributes.get("dlc_topo", ""))
        with self._svg_lock:
            if key not in self._svg_cache:
                self._svg_cache[key] = _render(agent)
            return self._svg_cache[key]

    # -- sampling --------------------------------------------------------------

    def take_sample(self) -> Sample:
        """One point of every plotted series, now (and, now and then, the master's agents)."""
        now = self._clock()
        self._refresh_agents(now)
        jobs = self.core.all_jobs()
        queued = [j for j in jobs if j.state is JobState.QUEUED]
        waits = self.metrics.take_recent_waits()
        waits += [now - self.metrics.queued_since(j) for j in queued]
        agents = self.core.cluster()
        return Sample(
            at=now,
            gpus_allocated=sum(len(a.in_state(GPU_TAKEN)) for a in agents),
            gpus_total=sum(len(a.gpu_ids) for a in agents),
            jobs_waiting=len(queued),
            queue_wait_s=round(max(waits, default=0.0), 3),
        )

    def _refresh_agents(self, now: float) -> None:
        master = self._info().get("master_url")
        if not master or now < self._agents_at:
            return
        self._agents_at = now + AGENT_REFRESH_S
        slaves = fetch_slaves(master)
        if slaves is not None:  # the core's inventory is the one model of the agents
            self.core.update_agents(slaves)


def _static(name: str) -> bytes:
    return resources.files("dlc.web").joinpath("static", name).read_bytes()


def _render(agent: AgentView) -> str | None:
    if agent.topology is None:
        return None
    from dlc.topology.render.picture import render_svg
    from dlc.topology.render.report import analyze

    return render_svg(analyze(agent.topology))
