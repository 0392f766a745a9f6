"""The job record and its lifecycle; the spec's names re-exported.

A :class:`Job` is a spec plus its lifecycle: state, attempts, tasks placed on agents.
Job states follow the issue: queued, staging, running, finished, failed,
killed, lost. Mesos task states are folded into job states by
:func:`job_state_from_task_state`.

What a user asks for lives in :mod:`~dlc.scheduler.jobs.spec` (:class:`JobSpec`),
its field parsers in :mod:`~dlc.scheduler.jobs.spec_fields` and the submit-time checks in
:mod:`~dlc.scheduler.jobs.spec_admission`; every public name of those is importable from here
too, as callers have always imported them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from dlc.scheduler.jobs.spec import JobSpec
from dlc.scheduler.jobs.spec_admission import (
    USER_PLACEHOLDER,
    check_container_user,
    check_registry,
    check_volumes,
    user_prefixes,
)
from dlc.scheduler.jobs.spec_fields import (
    EXCLUSIVE_SCOPES,
    MAX_ARG,
    MAX_ARGS,
    MAX_ENV,
    MAX_ENV_VALUE,
    MAX_IMAGE,
    MAX_PATH,
    MAX_SHORT,
    MAX_SPEC_BYTES,
    MAX_VOLUMES,
    VolumeSpec,
    mib_text,
)

__all__ = [
    "EXCLUSIVE_SCOPES",
    "MAX_ARG",
    "MAX_ARGS",
    "MAX_ENV",
    "MAX_ENV_VALUE",
    "MAX_IMAGE",
    "MAX_PATH",
    "MAX_SHORT",
    "MAX_SPEC_BYTES",
    "MAX_VOLUMES",
    "USER_PLACEHOLDER",
    "Job",
    "JobSpec",
    "JobState",
    "TaskPlacement",
    "VolumeSpec",
    "check_container_user",
    "check_registry",
    "check_volumes",
    "job_id_of_task",
    "job_state_from_task_state",
    "mib_text",
    "user_prefixes",
]


class JobState(enum.StrEnum):
    """Lifecycle state of a job."""

    QUEUED = "queued"
    STAGING = "staging"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    KILLED = "killed"
    LOST = "lost"
    #: borrowed (or lower-priority) work being stopped for another group's guarantee; its
    #: tasks get SIGTERM and a grace period, then it is queued again without using a retry
    PREEMPTED = "preempted"

    @property
    def terminal(self) -> bool:
        """True for states a job never leaves (failed/lost may still be retried)."""
        return self in (JobState.FINISHED, JobState.FAILED, JobState.KILLED, JobState.LOST)

    @property
    def active(self) -> bool:
        """True while tasks of the job may exist on agents."""
        return self in (JobState.STAGING, JobState.RUNNING, JobState.PREEMPTED)


#: Mesos TaskState -> job state. KILLING keeps the job running until KILLED arrives.
_TASK_STATES: dict[str, JobState] = {
    "TASK_STAGING": JobState.STAGING,
    "TASK_STARTING": JobState.STAGING,
    "TASK_RUNNING": JobState.RUNNING,
    "TASK_KILLING": JobState.RUNNING,
    "TASK_FINISHED": JobState.FINISHED,
    "TASK_FAILED": JobState.FAILED,
    "TASK_ERROR": JobState.FAILED,
    "TASK_KILLED": JobState.KILLED,
    "TASK_LOST": JobState.LOST,
    "TASK_DROPPED": JobState.LOST,
    "TASK_GONE": JobState.LOST,
    "TASK_GONE_BY_OPERATOR": JobState.LOST,
    "TASK_UNREACHABLE": JobState.LOST,
    "TASK_UNKNOWN": JobState.LOST,
}


def job_state_from_task_state(task_state: str) -> JobState:
    """The job state a Mesos ``TaskState`` name stands for (unknown names: lost)."""
    return _TASK_STATES.get(task_state, JobState.LOST)


@dataclass(frozen=True)
class TaskPlacement:
    """One task of a job placed on one agent.

    Attributes:
        task_id: Mesos task id (``<job>.<attempt>.<rank>``).
        agent_id: the agent it runs on.
        hostname: the agent's hostname.
        gpu_ids: host GPU indices chosen by the allocator.
        offer_id: the offer it was launched from.
        rank: index of the node within a multi-node job.
        state: last Mesos task state seen.
        sandbox: sandbox directory the executor reported, if any.
        share_gpu: the GPU a share of one GPU runs on (``gpu_ids`` is then empty).
        share_memory_mib, share_core_milli: that share's memory and compute (thousandths).
        rendezvous: ``address:port`` of node 0 of an elastic gang (its torchrun rendezvous),
            which the gang's later members are given; empty for other jobs.
    """

    task_id: str
    agent_id: str
    hostname: str
    gpu_ids: tuple[int, ...]
    offer_id: str = ""
    rank: int = 0
    state: str = "TASK_STAGING"
    sandbox: str = ""
    share_gpu: int | None = None
    share_memory_mib: int = 0
    share_core_milli: int = 0
    rendezvous: str = ""

    @property
    def share_text(self) -> str | None:
        """``0.5 of GPU 2`` (a fraction), ``4 GiB of GPU 2`` (memory only); None: whole GPUs."""
        if self.share_gpu is None:
            return None
        if self.share_core_milli:
            amount = f"{self.share_core_milli / 1000:g}"
        else:
            amount = mib_text(self.share_memory_mib) if self.share_memory_mib else "a share"
        return f"{amount} of GPU {self.share_gpu}"

    @property
    def gpus_used(self) -> tuple[int, ...]:
        """The GPUs this task's container uses: its whole GPUs, or the one its share is on
        (what is held from offers while the container may outlive its executor)."""
        if self.gpu_ids or self.share_gpu is None:
            return self.gpu_ids
        return (self.share_gpu,)

    @property
    def executor_id(self) -> str:
        """The id of the executor running this task (one executor per task)."""
        return f"dlc-executor.{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        # field by field in declaration order (the stored JSON's key order), not asdict's
        # deep copy: an offer round encodes every launched task (issue 26)
        body = {name: getattr(self, name) for name in _TASK_FIELD_NAMES}
        body["gpu_ids"] = list(self.gpu_ids)
        if not self.rendezvous:  # rows of other jobs stay readable by an older DLC
            del body["rendezvous"]
        return body

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskPlacement:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**data, "gpu_ids": tuple(int(i) for i in data.get("gpu_ids", ()))})


#: TaskPlacement's fields in declaration order (:meth:`TaskPlacement.to_dict`)
_TASK_FIELD_NAMES = tuple(TaskPlacement.__dataclass_fields__)


@dataclass(frozen=True)
class Job:
    """A submitted job and where it is in its lifecycle.

    Attributes:
        job_id: short unique id.
        user: owner (from the API token).
        spec: the validated request.
        state: current state.
        submitted_at: UNIX time of submission (queue order tie-breaker).
        attempt: 0 for the first run, +1 per retry.
        tasks: the tasks of the current attempt (empty while queued).
        message: last human-readable status message.
        kill_requested: a kill was asked; the job ends as killed.
        failures: failed or lost attempts so far (retries are counted against it).
    """

    job_id: str
    user: str
    spec: JobSpec
    state: JobState = JobState.QUEUED
    submitted_at: float = 0.0
    attempt: int = 0
    tasks: tuple[TaskPlacement, ...] = ()
    message: str = ""
    kill_requested: bool = False
    failures: int = 0

    def with_state(self, state: JobState, message: str | None = None) -> Job:
        """A copy in ``state`` (keeping the message unless a new one is given)."""
        return replace(self, state=state, message=self.message if message is None else message)

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        """GPU ids of the first task (single-node jobs have exactly one task)."""
        return self.tasks[0].gpu_ids if self.tasks else ()

    def task_prefix(self) -> str:
        """Task id prefix of the current attempt."""
        return f"{self.job_id}.{self.attempt}."


def job_id_of_task(task_id: str) -> tuple[str, int] | None:
    """``(job_id, attempt)`` from a DLC task id, or ``None`` for a foreign id."""
    parts = task_id.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1])
