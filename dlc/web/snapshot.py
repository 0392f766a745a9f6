"""The dashboard's JSON snapshot, built as pure data from jobs, agents and series.

Visibility (the API's rule, extended to the cluster view): an admin sees every
job; a user sees their own jobs in the lists and, in the GPU drawing, other
users' GPUs only as ``taken`` (no job id, user or command). Cluster-wide counts
and the plotted series are aggregates and are shown to everyone (``/metrics``
publishes them too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from dlc.scheduler.cluster import AgentView
from dlc.scheduler.jobs import Job, JobState
from dlc.scheduler.usage import GpuUsage, JobUsage

#: terminal jobs listed on the main page (newest first); older ones stay in `dlc jobs`
RECENT_DONE = 20


def job_summary(job: Job, now: float, queued_since: float | None = None) -> dict[str, Any]:
    """The dashboard's view of one job (no command, no environment)."""
    spec = job.spec
    return {
        "id": job.job_id,
        "user": job.user,
        "name": spec.name or spec.label,
        "framework": spec.framework or "",
        "image": spec.image or "",
        "state": job.state.value,
        "gpus": spec.gpus,
        "nodes": spec.nodes,
        "tasks": [
            {
                "agent_id": t.agent_id,
                "hostname": t.hostname,
                "gpu_ids": list(t.gpu_ids),
                "state": t.state,
            }
            for t in job.tasks
        ],  # fmt: skip
        "submitted_at": job.submitted_at,
        "age_s": max(0.0, now - job.submitted_at),
        "wait_s": max(0.0, now - (queued_since or job.submitted_at))
        if job.state is JobState.QUEUED
        else None,
        "message": job.message,
        "attempt": job.attempt,
    }


def agent_view(
    agent: AgentView, held: dict[int, Job] | None, user: str, admin: bool
) -> dict[str, Any]:
    """One agent with each GPU's holder as the caller may see it.

    The holders come from the core's cluster inventory (``agent.gpus``); ``held`` is only
    a fallback for agents built without GPU states.
    """
    gpus = []
    states = {g.index: g for g in agent.gpus}
    for index in sorted(agent.gpu_ids):
        gpu = states.get(index)
        owner = None
        if gpu is not None and gpu.holder is not None:
            owner = (gpu.holder.job_id, gpu.holder.user)
        elif gpu is None and held and index in held:
            owner = (held[index].job_id, held[index].user)
        holder = None
        if owner is not None:
            visible = admin or owner[1] == user
            holder = {
                "job": owner[0] if visible else None,
                "user": owner[1] if visible else None,
                "mine": owner[1] == user,
            }
        gpus.append({"index": index, "holder": holder})
    return {
        "id": agent.agent_id,
        "hostname": agent.hostname,
        "model": agent.model,
        "total": len(gpus),
        "allocated": sum(1 for g in gpus if g["holder"]),
        "has_topology": agent.topology is not None,
        "gpus": gpus,
    }


def build_snapshot(
    jobs: Sequence[Job],
    agents: Iterable[AgentView],
    user: str,
    admin: bool,
    now: float,
    series: dict[str, list],
    scheduler: dict[str, Any],
    queued_since: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Everything the main page shows, filtered for ``user``.

    Args:
        jobs: every job in the store.
        agents: the core's cluster inventory (:meth:`~dlc.scheduler.core.SchedulerCore.cluster`).
        user, admin: the caller.
        now: wall-clock seconds.
        series: :meth:`~dlc.web.series.SeriesRing.to_dict`.
        scheduler: version, framework name/id/url, master (shown in the header).
        queued_since: job id -> when it last entered the queue (re-queued jobs).
    """
    queued_since = queued_since or {}
    counts = {state.value: 0 for state in JobState}
    for job in jobs:
        counts[job.state.value] += 1
    visible = [j for j in jobs if admin or j.user == user]
    live = [j for j in visible if not j.state.terminal]
    done = sorted((j for j in visible if j.state.terminal), key=lambda j: -j.submitted_at)
    agent_views = [agent_view(a, None, user, admin) for a in agents]
    return {
        "me": {"user": user, "admin": admin},
        "now": now,
        "scheduler": scheduler,
        "counts": counts,
        "gpus": {
            "total": sum(a["total"] for a in agent_views),
            "allocated": sum(a["allocated"] for a in agent_views),
        },
        "agents": agent_views,
        "jobs": [job_summary(j, now, queued_since.get(j.job_id)) for j in live]
        + [job_summary(j, now) for j in done[:RECENT_DONE]],
        "series": series,
    }


class UsageSource(Protocol):
    """Where the snapshot reads GPU usage (:class:`~dlc.scheduler.core.SchedulerCore`)."""

    def gpu_usage(self) -> dict[tuple[str, int], GpuUsage]:
        """(agent id, GPU index) -> latest reading."""
        ...

    def job_usage(self, job_id: str) -> JobUsage | None:
        """A running job's latest reading."""
        ...


def gpu_used(reading: GpuUsage | None) -> dict[str, Any] | None:
    """A GPU item's ``used``: what the executor last measured (``None``: no reading)."""
    if reading is None:
        return None
    return {
        "util_pct": None if reading.util_pct is None else round(reading.util_pct),
        "mem_used_mib": reading.mem_used_mib,
        "mem_total_mib": reading.mem_total_mib,
        "sampled_at": reading.sampled_at,
    }


def job_used(usage: JobUsage | None) -> dict[str, Any] | None:
    """A job summary's ``usage`` (``None``: not running or not reported yet)."""
    if usage is None:
        return None
    return {
        "util_pct": usage.util_pct,
        "mem_used_mib": usage.mem_used_mib,
        "sampled_at": usage.sampled_at,
    }


def add_usage(snapshot: dict[str, Any], source: UsageSource) -> dict[str, Any]:
    """Put allocated-versus-used on a :func:`build_snapshot` result: ``used`` on every GPU
    item of every agent, ``usage`` on every job summary (utilisation is an aggregate, shown
    on other users' GPUs too; job usage only on the jobs the caller sees)."""
    readings = source.gpu_usage()
    for agent in snapshot.get("agents", ()):
        for gpu in agent.get("gpus", ()):
            gpu["used"] = gpu_used(readings.get((agent["id"], gpu["index"])))
    for job in snapshot.get("jobs", ()):
        live = job["state"] in (JobState.RUNNING.value, JobState.STAGING.value)
        job["usage"] = job_used(source.job_usage(job["id"])) if live else None
    return snapshot
