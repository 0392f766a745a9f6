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

from dlc.scheduler.jobs.job import Job, JobState
from dlc.scheduler.placement.cluster import GPU_DRAINING, GPU_TAKEN, AgentView
from dlc.scheduler.placement.share_holders import share_holders as live_share_holders
from dlc.scheduler.tasks.usage import GpuUsage, JobUsage
from dlc.scheduler.tenancy.quotas import agent_pool
from dlc.topology.node_config import ATTR_SHARING

#: terminal jobs listed on the main page (newest first); older ones stay in `dlc jobs`
RECENT_DONE = 20

#: (agent id, GPU index) -> the shares live tasks hold there: (job, MiB, thousandths)
Shares = dict[tuple[str, int], list[tuple[Job, int, int]]]


def job_summary(
    job: Job, now: float, queued_since: float | None = None, position: int | None = None
) -> dict[str, Any]:
    """The dashboard's view of one job (no command, no environment).

    ``position``: a queued job's place in the core's run order (1 runs first).
    """
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
        # an elastic gang (--nodes MIN:MAX): its MAX and the members running now
        "nodes_max": spec.nodes_max,
        "members": len(job.tasks) if spec.nodes_max is not None else None,
        "share": spec.share_text,
        "priority": spec.priority,
        "priority_class": spec.priority_class,
        "position": position,
        "tasks": [
            {
                "agent_id": t.agent_id,
                "hostname": t.hostname,
                "gpu_ids": list(t.gpu_ids),
                "share": t.share_text,
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
        # measured use of the job's GPUs ({util_pct, mem_used_mib, sampled_at}) where the
        # executor samples NVML; None: no sample (the dashboard says so)
        "usage": None,
    }


def share_holders(jobs: Iterable[Job]) -> Shares:
    """Who holds which GPU share: the live tasks of active jobs that run on part of a GPU."""
    return {
        key: [(job, task.share_memory_mib, task.share_core_milli) for job, task in tasks]
        for key, tasks in live_share_holders(jobs).items()
    }


def nvlink_groups(agent: AgentView) -> list[list[int]]:
    """The agent's NVLink islands (connected GPUs, more than one), from each GPU's links."""
    parent = {g.index: g.index for g in agent.gpus}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for gpu in agent.gpus:
        for other, link in gpu.links:
            if link.startswith("NV") and other in parent:
                parent[root(other)] = root(gpu.index)
    groups: dict[int, list[int]] = {}
    for index in sorted(parent):
        groups.setdefault(root(index), []).append(index)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def _holder(job_id: str, owner: str, user: str, admin: bool) -> dict[str, Any]:
    visible = admin or owner == user
    return {
        "job": job_id if visible else None,
        "user": owner if visible else None,
        "mine": owner == user,
    }


def agent_view(
    agent: AgentView,
    held: dict[int, Job] | None,
    user: str,
    admin: bool,
    shares: Shares | None = None,
) -> dict[str, Any]:
    """One agent with each GPU's holder (and shares) as the caller may see them.

    The holders come from the core's cluster inventory (``agent.gpus``); ``held`` is only
    a fallback for agents built without GPU states. ``shares``: :func:`share_holders`.
    Each GPU's ``used`` (``{util_pct, mem_used_mib, mem_total_mib, sampled_at}``) is what
    the executor measured through NVML, ``None`` where there is no sample.
    """
    gpus = []
    states = {g.index: g for g in agent.gpus}
    shares = shares or {}
    for index in sorted(agent.gpu_ids):
        gpu = states.get(index)
        owner = None
        if gpu is not None and gpu.holder is not None:
            owner = (gpu.holder.job_id, gpu.holder.user)
        elif gpu is None and held and index in held:
            owner = (held[index].job_id, held[index].user)
        on_gpu = shares.get((agent.agent_id, index), [])
        gpus.append({
            "index": index,
            "state": GPU_TAKEN if owner else gpu.state if gpu is not None else "free",
            "memory_mib": gpu.memory_mib if gpu is not None else None,
            "holder": _holder(owner[0], owner[1], user, admin) if owner else None,
            "shares": [
                {**_holder(job.job_id, job.user, user, admin),
                 "memory_mib": mib, "core_milli": milli}
                for job, mib, milli in on_gpu
            ],
            "used": None,
        })  # fmt: skip
    return {
        "id": agent.agent_id,
        "hostname": agent.hostname,
        "model": agent.model,
        "pool": agent_pool(agent.attributes),
        "sharing": agent.attributes.get(ATTR_SHARING),
        # where it stands (fault domain, node-config --rack/--switch): the view groups by rack
        "zone": agent.locality.zone,
        "rack": agent.locality.rack,
        "switch": agent.locality.switch,
        "total": len(gpus),
        "allocated": sum(1 for g in gpus if g["holder"]),
        "shared": sum(1 for g in gpus if g["shares"] and not g["holder"]),
        "draining": sum(1 for g in gpus if g["state"] == GPU_DRAINING),
        "nvlink": nvlink_groups(agent),
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
    run_order: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Everything the main page shows, filtered for ``user``.

    Args:
        jobs: every job in the store.
        agents: the core's cluster inventory
            (:meth:`~dlc.scheduler.core.facade.SchedulerCore.cluster`).
        user, admin: the caller.
        now: wall-clock seconds.
        series: :meth:`~dlc.web.series.SeriesRing.to_dict`.
        scheduler: version, framework name/id/url, master (shown in the header).
        queued_since: job id -> when it last entered the queue (re-queued jobs).
        run_order: queued job ids in the core's run order (positions count every user's
            jobs); queued jobs it does not name follow in submit order.
    """
    queued_since = queued_since or {}
    position = {job_id: i for i, job_id in enumerate(run_order or (), 1)}
    counts = {state.value: 0 for state in JobState}
    for job in jobs:
        counts[job.state.value] += 1
    visible = [j for j in jobs if admin or j.user == user]
    live = [j for j in visible if not j.state.terminal and j.state is not JobState.QUEUED]
    queued = sorted(
        (j for j in visible if j.state is JobState.QUEUED),
        key=lambda j: (position.get(j.job_id, len(position) + 1), j.submitted_at),
    )
    done = sorted((j for j in visible if j.state.terminal), key=lambda j: -j.submitted_at)
    shares = share_holders(jobs)
    agent_views = [agent_view(a, None, user, admin, shares) for a in agents]
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
        "jobs": [job_summary(j, now) for j in live]
        + [job_summary(j, now, queued_since.get(j.job_id), position.get(j.job_id)) for j in queued]
        + [job_summary(j, now) for j in done[:RECENT_DONE]],
        "series": series,
    }


class UsageSource(Protocol):
    """Where the snapshot reads GPU usage (:class:`~dlc.scheduler.core.facade.SchedulerCore`)."""

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
