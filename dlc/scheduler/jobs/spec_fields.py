"""The fields of a job spec, one parser each: bounds, coercion and one-line errors.

:meth:`~dlc.scheduler.jobs.spec.JobSpec.from_dict` calls these to turn JSON/YAML data into
typed values; every bad value raises :class:`~dlc.errors.JobSpecError` naming the field and
how to set it (``_HOW``: the ``dlc submit`` flag or spec-file key). The helpers with a
leading underscore are private to the job-spec modules (:mod:`~dlc.scheduler.jobs.spec`,
:mod:`~dlc.scheduler.jobs.spec_admission`), not an API.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlc.errors import JobSpecError, TenancyError
from dlc.scheduler.jobs.spec_rules import container_path_problem, duplicate_target

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

# The priority classes and the group/pool name rule are spec fields that tenancy reads too;
# they live here, below the jobs, so that :mod:`dlc.scheduler.tenancy` may import the jobs.
#: named priority classes -> the job's ``priority`` number (within a group)
PRIORITY_CLASSES: dict[str, int] = {"low": -10, "normal": 0, "high": 10, "urgent": 20}
#: what a group or pool name may be (a spec names its pool; groups are named alike)
_TENANCY_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def check_name(kind: str, value: str) -> str:
    """A group or pool name (``team-a``, ``train``); raises JobSpecError naming ``kind``."""
    if not isinstance(value, str) or not _TENANCY_NAME_RE.fullmatch(value):
        raise TenancyError(
            kind,
            f"{str(value)[:40]!r} is not a valid {kind} name; use up to 63 lower-case "
            "letters, digits, '_', '.', '-', starting with a letter or digit",
        )
    return value


def priority_of_class(name: str) -> int:
    """The number of a named priority class; raises JobSpecError listing the classes."""
    if name not in PRIORITY_CLASSES:
        known = ", ".join(f"{k} ({v})" for k, v in PRIORITY_CLASSES.items())
        raise JobSpecError(
            "priority_class", f"unknown class {str(name)[:40]!r}; use one of {known}"
        )
    return PRIORITY_CLASSES[name]


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
    "gpu_vendor": "--gpu-vendor nvidia|amd",
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
    "gang_topology": "--gang-topology switch|rack|zone[:required|preferred]",
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


def mib_text(mib: int) -> str:
    """``4 GiB``, ``1.5 GiB``, ``512 MiB``."""
    return f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib} MiB"


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_SIZE_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def _gpus(data: Mapping[str, Any]) -> tuple[int, float | None]:
    """``gpus`` (and ``gpu_fraction``) -> (whole GPUs per node, fraction of one or None).

    ``gpus: 0.5`` is a share of one GPU; whole numbers (``2``, ``2.0``) are whole GPUs;
    ``gpus: 0`` is a CPU-only job (no GPU; data preparation, CPU inference), which only
    ``gpus`` itself can ask (``gpu_fraction: 0`` is no share).
    """
    fix = (
        f"pass --gpus N with 0 <= N <= {_MAX_GPUS_PER_NODE} (0: CPU only), "
        "or a share of one GPU 0 < F < 1"
    )
    raw = data.get("gpus")
    frac_raw = data.get("gpu_fraction")
    if frac_raw is not None:
        _check_fraction(raw, frac_raw)
        raw = frac_raw if raw in (None, 1, "1") else raw
    if raw is None:
        return 1, None
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise JobSpecError(
            "gpus", f"must be a whole number or a fraction below 1, got {_short(raw)}; {fix}"
        )
    out_of_range = f"must be between 0 and {_MAX_GPUS_PER_NODE}, got {_num_text(raw)}; {fix}"
    if _too_big(raw):
        raise JobSpecError("gpus", out_of_range)
    try:
        number = float(raw)
    except ValueError:
        raise JobSpecError(
            "gpus", f"must be a whole number or a fraction below 1, got {_short(raw)}; {fix}"
        ) from None
    if number == 0 and frac_raw is None:
        return 0, None  # a CPU-only job
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


def _check_fraction(gpus: Any, fraction: Any) -> None:
    """Refuse a ``gpu_fraction`` that asks no GPU (``0``, below 0) or sits beside ``gpus: 0``,
    naming ``gpu_fraction`` (not ``gpus``, which the user may not have written) and both fixes.

    Raises:
        JobSpecError: one line naming ``gpu_fraction``.
    """
    fix = "pass --gpus 0 (gpus: 0) for a CPU-only job, or a share of one GPU 0 < F < 1"
    if _number(gpus) == 0:
        raise JobSpecError(
            "gpu_fraction",
            "a CPU-only job (gpus: 0) takes no share of a GPU; drop gpu_fraction, or drop "
            "gpus: 0 to ask a share of one GPU 0 < F < 1",
        )
    number = _number(fraction)
    if number is not None and not number > 0:
        raise JobSpecError("gpu_fraction", f"{_num_text(fraction)} is no share of a GPU; {fix}")


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number or a number's text (else ``None``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value) if not _too_big(value) else None
    except ValueError:
        return None


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


def _opt_str(data: Mapping[str, Any], key: str, limit: int = MAX_SHORT) -> str | None:
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


def _flag(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise JobSpecError(key, f"must be true or false, not {_short(value)}")
    return value


def _int(data: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
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


def _float(data: Mapping[str, Any], key: str, default: float) -> float:
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
