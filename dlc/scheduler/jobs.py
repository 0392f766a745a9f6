"""The job model: what a user asks for, validation, and the job lifecycle.

A :class:`JobSpec` is what ``dlc submit`` (flags or YAML) and ``POST /jobs``
carry; :meth:`JobSpec.from_dict` validates it field by field and raises
:class:`~dlc.errors.JobSpecError` naming the field and the fix. A :class:`Job`
is a spec plus its lifecycle: state, attempts, tasks placed on agents.

Job states follow the issue: queued, staging, running, finished, failed,
killed, lost. Mesos task states are folded into job states by
:func:`job_state_from_task_state`.
"""

from __future__ import annotations

import enum
import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dlc.errors import JobSpecError
from dlc.images.reference import ImageReferenceError, parse_reference, registry_allowed
from dlc.scheduler.launch_spec import TaskPolicy, parse_user
from dlc.scheduler.spec_rules import container_path_problem, duplicate_target, gpu_model_problem
from dlc.scheduler.tenancy import check_name, priority_of_class


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


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_FRAMEWORK_RE = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z0-9_.-]+$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_CUDA_RE = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){0,2}$")
_MAX_GPUS_PER_NODE = 64
#: C0 control characters and DEL: never in names, paths or references
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
#: the same but allowing tab, newline and carriage return (shell scripts, multi-line values)
_BINARY_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: bounds that keep one spec from filling the store, the API or `dlc jobs`
MAX_SHORT = 255  # framework, gpu_model, cuda_version, env keys
MAX_ENV_VALUE = 4096
MAX_IMAGE = 512  # a 255-character name, a 128-character tag and a digest
MAX_ENV = 256
MAX_ARGS = 1024
MAX_ARG = 65536
MAX_PATH = 4096
MAX_VOLUMES = 64
MAX_SPEC_BYTES = 256 * 1024

#: what ``exclusive_per`` may say: share a GPU only with the same user's, or group's, shares
EXCLUSIVE_SCOPES = ("user", "group")

#: how a user sets each field: a ``dlc submit`` flag (with its value's name), or a spec-file key
_HOW: dict[str, str] = {
    "framework": "--framework NAME:VERSION",
    "image": "--image IMAGE",
    "gpus": "--gpus N",
    "gpu_fraction": "--gpus F",
    "gpu_memory": "--gpu-memory SIZE",
    "exclusive_per": "--exclusive-per-user (or --exclusive-per-group)",
    "nodes": "--nodes N",
    "gpu_model": "--gpu-model MODEL",
    "cpus": "--cpus N",
    "mem_mib": "--mem MIB",
    "disk_mib": "disk_mib: N",
    "env": "-e KEY=VALUE",
    "volumes": "-v /HOST:/CONTAINER[:ro|rw]",
    "priority": "--priority N",
    "retries": "--retries N",
    "idle_timeout_s": "--idle-timeout SECONDS",
    "name": "--name NAME",
    "cuda_version": "cuda_version: X.Y",
    "container_user": "--container-user UID:GID",
    "pool": "--pool NAME",
    "priority_class": "--priority-class low|normal|high|urgent",
}


def _fix(key: str, rule: str = "") -> str:
    """The fix clause of a message: ``pass --gpus N with 1 <= N <= 64``."""
    how = _HOW.get(key, f"{key}: VALUE")
    text = f"pass {how}" if how.startswith("-") else f"set {how} in the spec file"
    return f"{text} with {rule}" if rule else text


def _range_rule(key: str, lo: float, hi: float) -> str:
    """``1 <= N <= 64``, named as the flag's value (``MIB`` for ``--mem MIB``)."""
    var = _HOW.get(key, "N").split()[-1]
    return f"{_num(lo)} <= {var} <= {_num(hi)}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


#: longest number text (``"12"``, ``" 0.5 "``) looked at; longer is out of every field's range
_MAX_NUMBER_TEXT = 40
#: magnitude past which a number is out of every field's range (checked before any float(),
#: which overflows on a 400-digit int, and before str(), which refuses 4,300 digits)
_HUGE = 10**18


def _too_big(value: Any) -> bool:
    """Whether a number (or its text) is out of every range before it is converted."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) >= _HUGE
    if isinstance(value, float):
        return not math.isfinite(value) or abs(value) >= _HUGE
    return isinstance(value, str) and len(value.strip()) > _MAX_NUMBER_TEXT


def _shown(value: Any) -> str:
    """A user's number for a one-line message (a 5,000-digit one by its size, not in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _HUGE:
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, str) and len(value.strip()) > _MAX_NUMBER_TEXT:
        return f"a {len(value.strip())}-character value"
    if isinstance(value, float):
        return f"{value:g}"
    return _short(value)


@dataclass(frozen=True)
class VolumeSpec:
    """A host path the job wants mounted (checked against the scheduler's allow-list)."""

    host_path: str
    container_path: str
    read_only: bool = True

    @classmethod
    def parse(cls, text: str) -> VolumeSpec:
        """Parse ``HOST:CONTAINER[:ro|rw]``.

        Raises:
            JobSpecError: malformed text.
        """
        if len(text) > 2 * MAX_PATH or _CONTROL_RE.search(text):
            raise JobSpecError(
                "volumes",
                f"{_short(text)} is too long or holds control characters; {_fix('volumes')}",
            )
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or not parts[0].startswith("/"):
            raise JobSpecError(
                "volumes", f"{text!r} is not /HOST:/CONTAINER[:ro|rw]; {_fix('volumes')}"
            )
        mode = parts[2] if len(parts) == 3 else "ro"
        if mode not in ("ro", "rw"):
            raise JobSpecError(
                "volumes", f"{text!r}: mode must be ro or rw, not {mode!r}; end it with :ro or :rw"
            )
        if ".." in parts[0].split("/"):
            raise JobSpecError(
                "volumes", f"{text!r}: '..' is not allowed in a path; give the plain path"
            )
        problem = container_path_problem(parts[1])  # the agent applies the same rule
        if problem:
            raise JobSpecError("volumes", f"{_short(text)}: the container path {problem}")
        return cls(parts[0], parts[1], mode == "ro")


#: snapshot ids as :mod:`dlc.store.blobs` makes them
_WORKDIR_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class JobSpec:
    """What a user asks for.

    Attributes:
        framework: ``name:version`` from the image catalog (e.g. ``pytorch:2.3``),
            or ``None`` when ``image`` is given.
        image: an explicit image reference (wins over ``framework``).
        gpus: GPUs per node (>= 1).
        nodes: number of agents the job spans (gang-placed all together).
        gpu_model: substring the GPU model must contain (``V100``), if any.
        cpus: CPUs per node.
        mem_mib: memory per node in MiB.
        disk_mib: disk per node in MiB (0: none asked).
        command: argv run in the container.
        env: extra environment variables.
        volumes: host mounts.
        priority: higher runs first (default 0).
        retries: how many times a failed or lost job is re-queued.
        name: a short human name (defaults to the framework).
        cuda_version: CUDA version of the image (filled from the catalog).
        container_user: ``UID[:GID]`` the container should run as; only where the operator
            lets jobs choose (``--allow-job-user``); ``None``: the cluster's default user.
        workdir: id of an uploaded working-directory snapshot (``dlc submit --workdir``),
            unpacked at ``/workspace``, the job's working directory; ``None``: none.
        interactive: an environment (JupyterLab) reached through a port from the offer
            (docs/environments.md), stopped when idle for ``idle_timeout_s``.
        idle_timeout_s: seconds without activity before an interactive job stops.
        gpu_fraction: a share of ONE GPU, ``0 < F < 1`` of its compute and (unless
            ``gpu_memory`` is given) of its memory (``--gpus 0.5``, YAML ``gpus: 0.5``);
            ``None``: whole GPUs.
        gpu_memory: a memory share of ONE GPU in MiB (``--gpu-memory 4G``); without a
            fraction, compute is shared without a floor. ``None``: none asked.
        exclusive_per: a share's GPU is shared only with shares of the same ``user`` or
            ``group`` (``--exclusive-per-user``, docs/sharing.md); ``None``: with anyone.
    """

    framework: str | None = None
    image: str | None = None
    gpus: int = 1
    nodes: int = 1
    gpu_model: str | None = None
    cpus: float = 1.0
    mem_mib: int = 1024
    disk_mib: int = 0
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    volumes: tuple[VolumeSpec, ...] = ()
    priority: int = 0
    retries: int = 0
    name: str | None = None
    cuda_version: str | None = None
    container_user: str | None = None
    workdir: str | None = None
    interactive: bool = False
    idle_timeout_s: int = 3600
    pool: str | None = None
    priority_class: str | None = None
    gpu_fraction: float | None = None
    gpu_memory: int | None = None
    exclusive_per: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the inverse of :meth:`from_dict`)."""
        body = asdict(self)
        body["command"] = list(self.command)
        body["volumes"] = [asdict(v) for v in self.volumes]
        return body

    @classmethod
    def from_dict(cls, data: Any) -> JobSpec:
        """Validate a spec from JSON/YAML data.

        Raises:
            JobSpecError: the first invalid field, named, with how to fix it.
        """
        if not isinstance(data, dict):
            raise JobSpecError(
                "spec",
                "must be a mapping of fields (framework, gpus, command ...); "
                "write one `field: value` per line",
            )
        known = {f for f in cls.__dataclass_fields__}
        # a key is shown as written when it looks like a field name, else quoted and cut short
        unknown = sorted(
            k if isinstance(k, str) and _FIELD_RE.fullmatch(k) else _short(k, 40)
            for k in set(data) - known
        )
        if unknown:
            names = ", ".join(sorted(known))
            raise JobSpecError(
                unknown[0], f"unknown field; known fields: {names}; fix its spelling or remove it"
            )
        gpus, fraction = _gpus(data)
        spec = cls(
            framework=_opt_str(data, "framework"),
            image=_opt_str(data, "image", MAX_IMAGE),
            gpus=gpus,
            nodes=_int(data, "nodes", 1, lo=1, hi=1024),
            gpu_model=_opt_str(data, "gpu_model"),
            cpus=_float(data, "cpus", 1.0),
            mem_mib=_int(data, "mem_mib", 1024, lo=32, hi=1 << 30),
            disk_mib=_int(data, "disk_mib", 0, lo=0, hi=1 << 40),
            command=_command(data.get("command", ())),
            env=_env(data.get("env") or {}),
            volumes=_volumes(data.get("volumes") or ()),
            priority=_int(data, "priority", 0, lo=-1000, hi=1000),
            retries=_int(data, "retries", 0, lo=0, hi=100),
            name=_opt_str(data, "name"),
            cuda_version=_opt_str(data, "cuda_version"),
            container_user=_opt_str(data, "container_user"),
            workdir=_opt_str(data, "workdir"),
            interactive=_flag(data, "interactive"),
            idle_timeout_s=_int(data, "idle_timeout_s", 3600, lo=10, hi=30 * 86400),
            pool=_opt_str(data, "pool"),
            priority_class=_opt_str(data, "priority_class"),
            gpu_fraction=fraction,
            gpu_memory=_gpu_memory(data.get("gpu_memory")),
            exclusive_per=_opt_str(data, "exclusive_per"),
        )
        if spec.priority_class is not None and data.get("priority") is None:
            spec = replace(spec, priority=priority_of_class(spec.priority_class))
        spec.check()
        size = len(json.dumps(spec.to_dict()))
        if size > MAX_SPEC_BYTES:
            raise JobSpecError(
                "spec",
                f"is {size} bytes, more than {MAX_SPEC_BYTES}; pass large data in a volume "
                "or a file in the image, not in env or command",
            )
        return spec

    def check(self) -> None:
        """Cross-field checks.

        Raises:
            JobSpecError: no image source, or a malformed framework/name.
        """
        if not self.framework and not self.image:
            raise JobSpecError(
                "framework",
                "give a framework (e.g. pytorch:2.3) or an image; "
                f"{_fix('framework')} (`dlc images` lists them) or {_HOW['image']}",
            )
        if self.workdir is not None and not _WORKDIR_RE.match(self.workdir):
            raise JobSpecError(
                "workdir",
                f"{_short(self.workdir)} is not a snapshot id; pass a directory with "
                "`dlc submit --workdir DIR`, which uploads it",
            )
        if self.interactive and self.nodes > 1:
            raise JobSpecError(
                "interactive", "an environment runs on one node; drop --nodes or --interactive"
            )
        self._check_share()
        if self.framework and not _FRAMEWORK_RE.match(self.framework):
            raise JobSpecError(
                "framework",
                f"{_short(self.framework)} is not NAME:VERSION; {_fix('framework')}, "
                "e.g. --framework pytorch:2.3 (`dlc images` lists them)",
            )
        if self.image is not None:
            try:
                parse_reference(self.image)
            except ImageReferenceError as exc:
                raise JobSpecError(
                    "image",
                    f"{_short(self.image)}: {exc}; {_fix('image')}, e.g. pytorch/pytorch:2.3.1",
                ) from None
        if self.gpu_model is not None and gpu_model_problem(self.gpu_model):
            problem = gpu_model_problem(self.gpu_model)
            raise JobSpecError("gpu_model", f"{_short(self.gpu_model)} {problem}")
        if self.cuda_version is not None and not _CUDA_RE.match(self.cuda_version):
            raise JobSpecError(
                "cuda_version", f"{_short(self.cuda_version)} is not X.Y; {_fix('cuda_version')}"
            )
        if self.container_user is not None:
            try:
                parse_user(self.container_user)
            except ValueError as exc:
                raise JobSpecError("container_user", f"{exc}; {_fix('container_user')}") from None
        if self.pool is not None:
            check_name("pool", self.pool)
        if self.priority_class is not None:
            priority_of_class(self.priority_class)
        if self.name is not None and not _NAME_RE.match(self.name):
            raise JobSpecError(
                "name",
                f"{_short(self.name)} is not a valid name; {_fix('name')} with up to 63 letters, "
                "digits, '_', '.', '-', starting with a letter or digit",
            )

    def _check_share(self) -> None:
        if self.exclusive_per is not None and self.exclusive_per not in EXCLUSIVE_SCOPES:
            raise JobSpecError(
                "exclusive_per",
                f"must be user or group, got {_short(self.exclusive_per)}; {_fix('exclusive_per')}",
            )
        if not self.is_share:
            if self.exclusive_per is not None:
                raise JobSpecError(
                    "exclusive_per",
                    "only a GPU share can be exclusive (whole GPUs are never shared); drop "
                    "--exclusive-per-user or ask for a share (--gpus 0.5, --gpu-memory 4G)",
                )
            return
        if self.gpus != 1:
            raise JobSpecError(
                "gpu_memory",
                f"a share is part of ONE GPU but --gpus {self.gpus} was asked; "
                "drop --gpu-memory or ask for whole GPUs only",
            )
        if self.nodes > 1:
            raise JobSpecError(
                "nodes",
                f"a GPU share runs on one node, not {self.nodes}; drop --nodes "
                "or ask for whole GPUs (--gpus N)",
            )

    @property
    def is_share(self) -> bool:
        """True when the job asks for part of one GPU, not whole GPUs."""
        return self.gpu_fraction is not None or self.gpu_memory is not None

    @property
    def share_core_milli(self) -> int:
        """The compute share in thousandths (0: shared without a floor)."""
        return round(self.gpu_fraction * 1000) if self.gpu_fraction is not None else 0

    def share_memory_mib(self, gpu_memory_mib: int) -> int:
        """The memory share on a GPU of ``gpu_memory_mib`` MiB."""
        if self.gpu_memory is not None:
            return self.gpu_memory
        return int(gpu_memory_mib * (self.gpu_fraction or 0.0))

    @property
    def share_text(self) -> str | None:
        """``0.5 of a GPU``, ``4 GiB of a GPU``, or both; ``None`` for whole GPUs."""
        if not self.is_share:
            return None
        parts = []
        if self.gpu_fraction is not None:
            parts.append(f"{self.gpu_fraction:g}")
        if self.gpu_memory is not None:
            parts.append(mib_text(self.gpu_memory))
        return " + ".join(parts)

    @property
    def label(self) -> str:
        """What the job runs, for task names: the framework or the image."""
        return self.framework or self.image or "?"

    @property
    def total_gpus(self) -> int:
        """GPUs over all nodes."""
        return self.gpus * self.nodes


def mib_text(mib: int) -> str:
    """``4 GiB``, ``1.5 GiB``, ``512 MiB``."""
    return f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib} MiB"


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_SIZE_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def _gpus(data: dict) -> tuple[int, float | None]:
    """``gpus`` (and ``gpu_fraction``) -> (whole GPUs per node, fraction of one or None).

    ``gpus: 0.5`` is a share of one GPU; whole numbers (``2``, ``2.0``) are whole GPUs.
    """
    fix = f"pass --gpus N with 1 <= N <= {_MAX_GPUS_PER_NODE}, or a share of one GPU 0 < F < 1"
    raw = data.get("gpus")
    frac_raw = data.get("gpu_fraction")
    if frac_raw is not None:
        raw = frac_raw if raw in (None, 1, "1") else raw
    if raw is None:
        return 1, None
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise JobSpecError(
            "gpus", f"must be a whole number or a fraction below 1, got {_short(raw)}; {fix}"
        )
    out_of_range = f"must be between 1 and {_MAX_GPUS_PER_NODE}, got {_num_text(raw)}; {fix}"
    if _too_big(raw):
        raise JobSpecError("gpus", out_of_range)
    try:
        number = float(raw)
    except ValueError:
        raise JobSpecError(
            "gpus", f"must be a whole number or a fraction below 1, got {_short(raw)}; {fix}"
        ) from None
    if not number > 0 or not math.isfinite(number):
        raise JobSpecError("gpus", out_of_range)
    if number < 1:
        if round(number * 1000) < 1:
            raise JobSpecError("gpus", f"{number:g} is below 0.001 of a GPU; {fix}")
        if round(number * 1000) >= 1000:  # 0.9999 would be a "share" of the whole GPU
            raise JobSpecError(
                "gpus", f"{number:g} rounds to a whole GPU; pass --gpus 1, or a share <= 0.999"
            )
        return 1, round(number, 3)
    if not number.is_integer():
        raise JobSpecError(
            "gpus",
            f"{number:g} is more than one GPU but not a whole number; a share is part of ONE "
            f"GPU: {fix}",
        )
    if number > _MAX_GPUS_PER_NODE:
        raise JobSpecError("gpus", out_of_range)
    return int(number), None


def _num_text(value: Any) -> str:
    """A number as the user typed it (``0``, not ``'0'``), when it is short and printable."""
    text = value.strip() if isinstance(value, str) else ""
    return text if text.isprintable() and 0 < len(text) <= _MAX_NUMBER_TEXT else _shown(value)


def _gpu_memory(value: Any) -> int | None:
    """``gpu_memory``: MiB as a number, or text ``4G``, ``512M``, ``4GiB`` -> MiB."""
    fix = _fix("gpu_memory", "a size such as 4G or 512M (MiB without a unit)")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise JobSpecError("gpu_memory", f"must be a size, got {_short(value)}; {fix}")
    if _too_big(value):
        raise JobSpecError("gpu_memory", f"{_shown(value)} is more than any GPU has; {fix}")
    if str(value).strip().startswith("-"):
        raise JobSpecError("gpu_memory", f"must be more than 0, got {_short(value)}; {fix}")
    match = _SIZE_RE.match(str(value))
    if not match:
        raise JobSpecError("gpu_memory", f"{_short(value)} is not a size; {fix}")
    mib = int(float(match.group(1)) * _SIZE_MIB[match.group(2).upper()])
    if mib < 1:
        raise JobSpecError("gpu_memory", f"must be at least 1 MiB, got {_short(value)}; {fix}")
    if mib > 1 << 20:
        raise JobSpecError("gpu_memory", f"{_short(value)} is more than any GPU has; {fix}")
    return mib


def _opt_str(data: dict, key: str, limit: int = MAX_SHORT) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise JobSpecError(
            key, f"must be a string, got {type(value).__name__}; {_fix(key)} (quote it in YAML)"
        )
    if len(value) > limit or _CONTROL_RE.search(value):
        raise JobSpecError(
            key,
            f"{_short(value)} is longer than {limit} characters or holds control "
            f"characters; {_fix(key)}",
        )
    return value.strip()


def _short(value: Any, limit: int = 60) -> str:
    """``repr`` of a user value cut to ``limit`` characters (error messages stay one line)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


def _flag(data: dict, key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise JobSpecError(key, f"must be true or false, not {_short(value)}")
    return value


def _int(data: dict, key: str, default: int, lo: int, hi: int) -> int:
    value = data.get(key, default)
    if value is None:
        return default
    rule = _range_rule(key, lo, hi)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise JobSpecError(key, f"must be a whole number, got {_shown(value)}; {_fix(key, rule)}")
    if _too_big(value):
        raise JobSpecError(
            key, f"must be between {lo} and {hi}, got {_shown(value)}; {_fix(key, rule)}"
        )
    try:
        number = int(value)
    except ValueError:
        raise JobSpecError(
            key, f"must be a whole number, got {_shown(value)}; {_fix(key, rule)}"
        ) from None
    if not lo <= number <= hi:
        raise JobSpecError(key, f"must be between {lo} and {hi}, got {number}; {_fix(key, rule)}")
    return number


def _float(data: dict, key: str, default: float) -> float:
    value = data.get(key, default)
    rule = _range_rule(key, 0.01, 1024)
    out_of_range = f"must be between 0.01 and 1024, got {_shown(value)}; {_fix(key, rule)}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise JobSpecError(key, f"must be a number, got {_short(value)}; {_fix(key, rule)}")
    if _too_big(value):
        raise JobSpecError(key, out_of_range)
    try:
        number = float(value)
    except ValueError:
        not_a_number = f"must be a number, got {_shown(value)}; {_fix(key, rule)}"
        raise JobSpecError(key, not_a_number) from None
    if not 0.01 <= number <= 1024:  # NaN and inf too
        raise JobSpecError(key, out_of_range)
    return number


def _command(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        # A YAML string runs through the shell, so pipes and && work as users expect.
        args = ("sh", "-c", value) if value.strip() else ()
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        args = tuple(value)
    else:
        raise JobSpecError(
            "command",
            "must be a string or a list of strings; put the command after `--` "
            "(dlc submit ... -- python train.py) or write command: as a list of strings",
        )
    if len(args) > MAX_ARGS:
        raise JobSpecError("command", f"has {len(args)} arguments, more than {MAX_ARGS}")
    for arg in args:
        if len(arg) > MAX_ARG or _BINARY_RE.search(arg):
            raise JobSpecError(
                "command",
                f"argument {_short(arg)} is longer than {MAX_ARG} characters or holds a NUL "
                "or other control character; remove it",
            )
    return args


def _env(value: Any) -> dict[str, str]:
    if isinstance(value, list | tuple):
        pairs = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep:
                raise JobSpecError("env", f"{item!r} is not KEY=VALUE; {_fix('env')}")
            pairs[key] = val
        value = pairs
    if not isinstance(value, dict):
        raise JobSpecError("env", f"must be a mapping or a list of KEY=VALUE; {_fix('env')}")
    if len(value) > MAX_ENV:
        raise JobSpecError("env", f"has {len(value)} variables, more than {MAX_ENV}")
    result = {}
    for key, val in value.items():
        if not isinstance(key, str) or len(key) > MAX_SHORT or not _ENV_RE.match(key):
            raise JobSpecError(
                "env",
                f"{_short(key)} is not a valid variable name; use letters, digits and '_', "
                f"not starting with a digit, at most {MAX_SHORT} characters",
            )
        if isinstance(val, dict | list | tuple) or val is None:
            raise JobSpecError("env", f"{key}: the value must be text; {_fix('env')}")
        text = str(val)
        if len(text) > MAX_ENV_VALUE or _BINARY_RE.search(text):
            raise JobSpecError(
                "env",
                f"{key}: the value is longer than {MAX_ENV_VALUE} characters or holds a NUL "
                "or other control character; remove it",
            )
        result[key] = text
    return result


def _volumes(value: Any) -> tuple[VolumeSpec, ...]:
    if not isinstance(value, list | tuple):
        raise JobSpecError(
            "volumes", f"must be a list of /HOST:/CONTAINER[:ro|rw]; {_fix('volumes')}"
        )
    if len(value) > MAX_VOLUMES:
        raise JobSpecError("volumes", f"has {len(value)} entries, more than {MAX_VOLUMES}")
    result = []
    for item in value:
        if isinstance(item, str):
            result.append(VolumeSpec.parse(item))
        elif isinstance(item, dict) and {"host_path", "container_path"} <= set(item):
            mode = "ro" if item.get("read_only", True) else "rw"
            result.append(VolumeSpec.parse(f"{item['host_path']}:{item['container_path']}:{mode}"))
        else:
            raise JobSpecError(
                "volumes", f"{_short(item)} is not /HOST:/CONTAINER[:ro|rw]; {_fix('volumes')}"
            )
    twice = duplicate_target(v.container_path for v in result)
    if twice:
        raise JobSpecError(
            "volumes", f"two volumes are mounted at {twice[:200]}; give each its own path"
        )
    return tuple(result)


#: in an ``--allow-volume`` prefix, the submitting user's name: ``/data/{user}`` gives each
#: user their own tree, so one user's job cannot mount (read or rewrite) another's files
USER_PLACEHOLDER = "{user}"


def user_prefixes(allowed_prefixes: tuple[str, ...], user: str) -> tuple[str, ...]:
    """The allow-list as it applies to ``user`` (``{user}`` replaced by their name).

    A user name that could change the path's meaning (``/``, ``..``, NUL) gets no
    per-user prefix at all.
    """
    safe = bool(user) and "/" not in user and "\0" not in user and user not in (".", "..")
    return tuple(
        p.replace(USER_PLACEHOLDER, user)
        for p in allowed_prefixes
        if USER_PLACEHOLDER not in p or safe
    )


def check_volumes(spec: JobSpec, allowed_prefixes: tuple[str, ...], user: str = "") -> None:
    """Refuse host paths outside the scheduler's allow-list (an early, friendly error).

    This compares strings only; the authoritative check runs on the agent, where the
    filesystem is (:mod:`dlc.executor.host_paths`: no symlinks, must exist).

    Raises:
        JobSpecError: a volume's host path is not under an allowed prefix.
    """
    allowed_prefixes = user_prefixes(allowed_prefixes, user)
    for vol in spec.volumes:
        norm = vol.host_path.rstrip("/") or "/"
        if any(p in (".", "..") for p in norm.split("/")) or not any(
            norm == p.rstrip("/") or norm.startswith(p.rstrip("/") + "/") for p in allowed_prefixes
        ):
            allowed = ", ".join(allowed_prefixes) or "none (the scheduler allows no volumes)"
            raise JobSpecError(
                "volumes",
                f"{vol.host_path} is not under an allowed host path; allowed: {allowed}; "
                "mount a path under one of them (the scheduler's --allow-volume sets the list)",
            )


def check_registry(spec: JobSpec, image: str, allowed_registries: tuple[str, ...]) -> None:
    """Refuse ``image`` (``spec``'s, resolved) from a registry outside the allow-list.

    An empty allow-list allows any registry.

    Raises:
        JobSpecError: the registry is not allowed (field ``image``, or ``framework`` when the
            image came from the catalog).
    """
    key = "image" if spec.image else "framework"
    try:
        reason = registry_allowed(image, allowed_registries)
    except ImageReferenceError as exc:
        raise JobSpecError(key, f"{_short(image)}: {exc}") from None
    if reason:
        raise JobSpecError(key, reason)


def check_container_user(spec: JobSpec, policy: TaskPolicy) -> None:
    """Refuse a job's own container user unless the operator lets jobs choose (and root).

    Raises:
        JobSpecError: field ``container_user``, with what the cluster allows.
    """
    if spec.container_user is None:
        return
    if not policy.allow_job_user:
        raise JobSpecError(
            "container_user",
            f"this cluster does not let jobs choose their user (jobs run as "
            f"{policy.container_user}); leave it out, or ask the operator for --allow-job-user",
        )
    if 0 in parse_user(spec.container_user) and not policy.allow_root:
        raise JobSpecError(
            "container_user",
            f"{spec.container_user} is root, which this cluster does not allow; "
            "use a non-zero UID:GID",
        )


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
    def executor_id(self) -> str:
        """The id of the executor running this task (one executor per task)."""
        return f"dlc-executor.{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        body = asdict(self)
        body["gpu_ids"] = list(self.gpu_ids)
        return body

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskPlacement:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**data, "gpu_ids": tuple(int(i) for i in data.get("gpu_ids", ()))})


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
