"""Jobs to and from the job database's named columns, checking every field on the way in.

Pure functions, no I/O: :class:`~dlc.store.sqlite.JobStore` runs the SQL. A row that
cannot be turned back into a :class:`Job` raises :class:`BadRow` with the reason, and the
store quarantines it instead of failing every listing, offer round and page that reads it.

Unknown spec fields (a newer DLC wrote the row): dropped with a warning when the job is
finished (history only), but the row is quarantined while the job may still run, since
launching it without what the unknown field asked for could break its promise (a limit,
a mount mode).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dlc.errors import DlcError
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement

_SPEC_FIELDS = frozenset(JobSpec.__dataclass_fields__)
_TASK_FIELDS = frozenset(TaskPlacement.__dataclass_fields__)


class BadRow(Exception):
    """A stored row cannot be read; ``str(exc)`` is the reason (one line)."""


def encode_job(job: Job) -> dict[str, Any]:
    """The named column values of ``job`` (without ``updated_at``)."""
    return {
        "job_id": job.job_id,
        "user": job.user,
        "spec": json.dumps(job.spec.to_dict(), sort_keys=True),
        "state": job.state.value,
        "submitted_at": job.submitted_at,
        "attempt": job.attempt,
        "tasks": json.dumps([t.to_dict() for t in job.tasks]),
        "message": job.message,
        "kill_requested": int(job.kill_requested),
        "failures": job.failures,
    }


def decode_job(row: Mapping[str, Any]) -> tuple[Job, list[str]]:
    """The job in ``row`` and warnings about what was dropped from it.

    Raises:
        BadRow: a field is missing, malformed or unknown; the message says which.
    """
    state = _state(row["state"])
    spec, warnings = _spec(row["spec"], state)
    job = Job(
        job_id=_text(row, "job_id", empty=False),
        user=_text(row, "user", empty=False),
        spec=spec,
        state=state,
        submitted_at=_number(row, "submitted_at"),
        attempt=_count(row, "attempt"),
        tasks=_tasks(row["tasks"]),
        message=_text(row, "message"),
        kill_requested=_flag(row, "kill_requested"),
        failures=_count(row, "failures"),
    )
    return job, warnings


def _state(value: Any) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        raise BadRow(f"unknown state {value!r}") from None


def _json(value: Any, column: str) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError) as exc:
        raise BadRow(f"{column} is not valid JSON ({exc})") from None


def _spec(value: Any, state: JobState) -> tuple[JobSpec, list[str]]:
    data = _json(value, "spec")
    if not isinstance(data, dict):
        raise BadRow(f"spec is a {type(data).__name__}, not a mapping")
    unknown = sorted(set(data) - _SPEC_FIELDS)
    warnings = []
    if unknown and not state.terminal:
        raise BadRow(
            f"spec has fields this DLC does not know: {', '.join(unknown)} "
            "(written by a newer DLC?); it must not run without them"
        )
    if unknown:
        warnings.append(f"ignored unknown spec fields {', '.join(unknown)} of a {state} job")
        data = {k: v for k, v in data.items() if k in _SPEC_FIELDS}
    try:
        return JobSpec.from_dict(data), warnings
    except DlcError as exc:
        raise BadRow(f"spec: {exc}") from None


def _tasks(value: Any) -> tuple[TaskPlacement, ...]:
    data = _json(value, "tasks")
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise BadRow("tasks is not a list of task objects")
    tasks = []
    for item in data:
        unknown = sorted(set(item) - _TASK_FIELDS)
        if unknown:
            raise BadRow(f"a task has unknown fields: {', '.join(unknown)}")
        try:
            task = TaskPlacement.from_dict(item)
        except (TypeError, ValueError) as exc:
            raise BadRow(f"a task is malformed ({exc})") from None
        if not all(isinstance(getattr(task, f), str) for f in ("task_id", "agent_id", "state")):
            raise BadRow(f"task {item.get('task_id')!r} has a non-text id or state")
        tasks.append(task)
    return tuple(tasks)


def _text(row: Mapping[str, Any], column: str, empty: bool = True) -> str:
    value = row[column]
    if not isinstance(value, str) or (not empty and not value):
        raise BadRow(f"{column} is {value!r}, not text")
    return value


def _number(row: Mapping[str, Any], column: str) -> float:
    value = row[column]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(f"{column} is {value!r}, not a number")
    return value


def _count(row: Mapping[str, Any], column: str) -> int:
    value = row[column]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRow(f"{column} is {value!r}, not a count")
    return value


def _flag(row: Mapping[str, Any], column: str) -> bool:
    value = row[column]
    if value not in (0, 1) or isinstance(value, float):
        raise BadRow(f"{column} is {value!r}, not 0 or 1")
    return bool(value)
