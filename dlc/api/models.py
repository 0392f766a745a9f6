"""The API's wire format as pydantic models (the OpenAPI document is generated from them).

The models check the *shape* of a request (which fields, which JSON types);
:meth:`dlc.scheduler.jobs.job.JobSpec.from_dict` stays the authority for the field
rules and their one-line messages, so the two never disagree on a message.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

#: a whole number as JSON number or as text (``"2"``), as ``dlc submit`` and YAML files send
WholeNumber = StrictInt | StrictStr
Scalar = StrictStr | StrictInt | StrictFloat | StrictBool


class VolumeIn(BaseModel):
    """A host mount in object form (``"/HOST:/CONTAINER[:ro|rw]"`` text works too)."""

    model_config = ConfigDict(extra="forbid")
    host_path: StrictStr
    container_path: StrictStr
    read_only: StrictBool = True


class NodeRangeIn(BaseModel):
    """An elastic gang's node range (``{"min": 2, "max": 4}``; ``"2:4"`` text works too)."""

    model_config = ConfigDict(extra="forbid")
    min: WholeNumber
    max: WholeNumber


class JobSpecIn(BaseModel):
    """A job submission (``POST /v1/jobs``); unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")
    framework: StrictStr | None = Field(None, examples=["pytorch:2.3"])
    image: StrictStr | None = None
    gpus: StrictFloat | StrictInt | StrictStr | None = Field(
        None, description="GPUs per node (default 1), or a share of one GPU: 0 < F < 1"
    )
    nodes: WholeNumber | NodeRangeIn | None = Field(
        None, description="agents the job spans (default 1); MIN:MAX or {min, max}: elastic"
    )
    nodes_max: WholeNumber | None = Field(None, description="an elastic gang's MAX")
    gpu_model: StrictStr | None = Field(None, examples=["V100"])
    gpu_vendor: StrictStr | None = Field(None, examples=["amd"])
    cpus: StrictFloat | StrictInt | StrictStr | None = None
    mem_mib: WholeNumber | None = None
    disk_mib: WholeNumber | None = None
    command: StrictStr | list[StrictStr] | None = Field(
        None, description="argv, or one string run by `sh -c`"
    )
    env: dict[StrictStr, Scalar] | list[StrictStr] | None = Field(
        None, description="mapping, or a list of KEY=VALUE"
    )
    volumes: list[StrictStr | VolumeIn] | None = Field(
        None, description="/HOST:/CONTAINER[:ro|rw] text or objects"
    )
    priority: WholeNumber | None = None
    retries: WholeNumber | None = None
    name: StrictStr | None = None
    cuda_version: StrictStr | None = None
    rocm_version: StrictStr | None = None
    container_user: StrictStr | None = None
    workdir: StrictStr | None = None
    interactive: bool | None = None
    idle_timeout_s: int | None = None
    pool: StrictStr | None = Field(None, description="resource pool (default: the group's)")
    priority_class: StrictStr | None = Field(None, examples=["high"])
    gpu_fraction: StrictFloat | StrictInt | None = Field(
        None, description="a share of one GPU (0 < F < 1); `gpus: 0.5` says the same"
    )
    gpu_memory: StrictInt | StrictStr | None = Field(
        None, description="a memory share of one GPU: MiB, or 4G / 512M", examples=["4G"]
    )
    exclusive_per: StrictStr | None = Field(
        None,
        description="share the GPU only with shares of the same `user` or `group`",
        examples=["user"],
    )
    gang_topology: StrictStr | dict[StrictStr, StrictStr] | None = Field(
        None,
        description="how close a gang's nodes must be: LEVEL[:MODE], LEVEL switch|rack|zone, "
        "MODE preferred (default) or required",
        examples=["switch:required"],
    )


Amount = StrictFloat | StrictInt | StrictStr


class GraceIn(BaseModel):
    """``PUT /v1/preemption-grace``: seconds between SIGTERM and SIGKILL of a stopped task."""

    model_config = ConfigDict(extra="forbid")
    grace_s: StrictFloat | StrictInt


class QuotaIn(BaseModel):
    """``PUT /v1/quota/{group}``: a group's guarantee (and ceiling) in one pool."""

    model_config = ConfigDict(extra="forbid")
    pool: StrictStr
    gpus: StrictFloat | StrictInt = 0
    cpus: StrictFloat | StrictInt = 0
    mem: Amount = Field(0, description="MiB, or text like 256G")
    ceiling_gpus: StrictFloat | StrictInt | None = None
    ceiling_cpus: StrictFloat | StrictInt | None = None
    ceiling_mem: Amount | None = None


class GroupIn(BaseModel):
    """``POST /v1/groups``: create a group or change its settings."""

    model_config = ConfigDict(extra="forbid")
    name: StrictStr
    default_pool: StrictStr = "default"
    preempt_within: StrictBool = False


class MemberIn(BaseModel):
    """``POST /v1/groups/{group}/members``."""

    model_config = ConfigDict(extra="forbid")
    user: StrictStr


class LimitsIn(BaseModel):
    """``PUT`` and ``PATCH /v1/limits/{user}``: only the caps given change (``null``: that
    cap removed; absent: kept as it is)."""

    model_config = ConfigDict(extra="forbid")
    max_running: StrictInt | None = None
    max_gpus: StrictFloat | StrictInt | None = None
    max_cpus: StrictFloat | StrictInt | None = None
    max_mem_mib: StrictFloat | StrictInt | None = None
    max_interactive_s: StrictFloat | StrictInt | None = None
    max_interactive: StrictInt | None = None


class TaskOut(BaseModel):
    """One placed task of a job."""

    task_id: str
    agent_id: str
    hostname: str
    gpu_ids: list[int]
    offer_id: str = ""
    rank: int = 0
    state: str = ""
    sandbox: str | None = None
    share_gpu: int | None = None
    share_memory_mib: int = 0
    share_core_milli: int = 0


class HistoryEntry(BaseModel):
    """One state change of a job."""

    at: float
    state: str
    message: str


class KillAllIn(BaseModel):
    """``POST /v1/jobs/kill``: kill every live job of one user (``dlc kill --all``)."""

    model_config = ConfigDict(extra="forbid")
    user: StrictStr | None = Field(
        None, description="whose jobs (default: the caller's; another user's: admins only)"
    )
    all_users: StrictBool = Field(False, description="every user's jobs (admins only)")
    states: list[StrictStr] | None = Field(
        None, description="queued, staging, running, preempted (default: all of them)"
    )


class KillAllOut(BaseModel):
    """What ``POST /v1/jobs/kill`` killed."""

    count: int
    ids: list[str]


class JobOut(BaseModel):
    """A job as the API shows it."""

    model_config = ConfigDict(extra="allow")
    id: str
    user: str
    state: str
    name: str
    framework: str | None
    image: str | None
    gpus: int
    #: a share of one GPU: the fraction and/or the memory in MiB (both null: whole GPUs)
    gpu_fraction: float | None = None
    gpu_memory: int | None = None
    interactive: bool = False
    nodes: int
    nodes_max: int | None = None
    members: int | None = None
    gpu_model: str | None
    cpus: float
    mem_mib: int
    priority: int
    retries: int
    command: list[str]
    attempt: int
    failures: int
    submitted_at: float
    message: str
    kill_requested: bool
    tasks: list[TaskOut]
    history: list[HistoryEntry] | None = None
    #: a running job's GPUs as its executors last measured them (dlc/scheduler/tasks/usage.py)
    usage: dict | None = None
    framework_url: str | None = None
    master_kind: str | None = None


class JobPage(BaseModel):
    """A page of jobs, newest first; ``next`` is the URL of the following page (or null)."""

    jobs: list[JobOut]
    next: str | None = None


class LogChunk(BaseModel):
    """A chunk of a job's container output."""

    model_config = ConfigDict(extra="allow")
    data: str
    offset: int
    state: str
    done: bool


class ErrorOut(BaseModel):
    """Every error: one line, and the request field it is about (when there is one)."""

    error: str
    field: str | None = None


class SessionIn(BaseModel):
    """Dashboard sign-in: the API token, exchanged for an HttpOnly cookie."""

    model_config = ConfigDict(extra="forbid")
    token: StrictStr = Field(..., max_length=512)


class SessionOut(BaseModel):
    """Who a session belongs to (``user`` null: signed out)."""

    user: str | None
    admin: bool


class Health(BaseModel):
    """``GET /healthz``."""

    ok: bool
    version: str


#: the error responses every authenticated operation may give, for the OpenAPI document
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what}
    for code, what in (
        (400, "malformed request (one-line error naming the field)"),
        (401, "missing or unknown API token"),
        (404, "no such job (or not yours)"),
        (413, "request body too large"),
        (503, "too many requests in flight; retry after Retry-After seconds"),
    )
}
