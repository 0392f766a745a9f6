"""Seed the dashboard's plots after a restart from the job store's state history.

The ring of samples lives in memory, so a restarted scheduler would show empty
plots. Every job state change is stored with its time, so the series can be
rebuilt at the sample times of the last window: GPUs allocated (jobs staging or
running, by their spec's GPU count), jobs waiting (queued), and the longest wait
of a queued job. GPUs total is not in the store (agents are known from offers):
it is 0 in the replayed samples.
"""

from __future__ import annotations

from collections.abc import Callable

from dlc.web.series import Sample

_ACTIVE = {"staging", "running"}


def replay_samples(source, now: float, interval_s: float, count: int) -> list[Sample]:
    """Samples at ``now - k * interval_s`` for ``k = count .. 1`` (none before the first event).

    ``source`` is the scheduler core (``all_jobs``, ``state_events``); a job store
    (``list_jobs``) answers too. One sweep over the events in time order, so the cost is
    events + samples.
    """
    jobs: Callable = getattr(source, "all_jobs", None) or source.list_jobs
    gpus = {job.job_id: job.spec.total_gpus for job in jobs()}
    events = source.state_events()
    active: set[str] = set()
    queued: dict[str, float] = {}  # job id -> when it entered the queue
    samples: list[Sample] = []
    i = 0
    for k in range(count, 0, -1):
        at = now - k * interval_s
        while i < len(events) and events[i][1] <= at:
            job_id, when, state = events[i]
            i += 1
            active.discard(job_id)
            since = queued.pop(job_id, when)  # a repeated "queued" entry keeps its start
            if state in _ACTIVE:
                active.add(job_id)
            elif state == "queued":
                queued[job_id] = since
        if i == 0:
            continue  # nothing had happened yet: no point to plot
        samples.append(
            Sample(
                at=at,
                gpus_allocated=sum(gpus.get(j, 0) for j in active),
                gpus_total=0,
                jobs_waiting=len(queued),
                queue_wait_s=round(max((at - s for s in queued.values()), default=0.0), 3),
            )
        )
    return samples
