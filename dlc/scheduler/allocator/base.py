"""The one-method allocation interface shared by every policy.

A policy answers: given a node's topology, its free GPUs, GPUs that must be in
the set, and a count (plus optional GPU model / minimum memory), which GPUs? It
returns the chosen indices in the order the container should number them, or
raises :class:`~dlc.errors.AllocationError` saying why no set exists.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from dlc.errors import AllocationError
from dlc.topology.model import Topology


@dataclass(frozen=True)
class AllocationRequest:
    """What a job asks of one node.

    Attributes:
        count: number of GPUs wanted (>= 1).
        required: GPUs that must be part of the result.
        gpu_model: substring the GPU model must contain (case-insensitive), if any.
        min_memory_mib: minimum total memory per GPU, if any.
    """

    count: int
    required: frozenset[int] = frozenset()
    gpu_model: str | None = None
    min_memory_mib: int | None = None


class Policy(Protocol):
    """A GPU selection policy (go-gpuallocator's one-method interface)."""

    name: str

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """Choose ``request.count`` GPUs from ``free``.

        Raises:
            AllocationError: no set satisfies the request; the message says why.
        """
        ...


#: policy name -> module defining ``POLICY`` (filled as policies land)
POLICY_MODULES: dict[str, str] = {
    "tree": "dlc.scheduler.allocator.tree_policy",
    "first-fit": "dlc.scheduler.allocator.first_fit",
    "best-effort": "dlc.scheduler.allocator.best_effort",
    "tkestack": "dlc.scheduler.allocator.tkestack",
    "optimal": "dlc.scheduler.allocator.optimal",
}
#: the policy DLC uses unless told otherwise
DEFAULT_POLICY = "tree"


def unknown_policy(name: str) -> str | None:
    """``None`` for a known policy name, else what is wrong (the one rule every check uses:
    :func:`get_policy` here, ``check_policy`` for the ``--policy`` flag)."""
    if name in POLICY_MODULES:
        return None
    return f"unknown placement policy {name!r}; known: {', '.join(sorted(POLICY_MODULES))}"


def get_policy(name: str) -> Policy:
    """The policy called ``name``.

    Raises:
        AllocationError: unknown policy name (lists the known ones).
    """
    problem = unknown_policy(name)
    if problem:
        raise AllocationError(problem, "bad_policy")
    policy: Policy = importlib.import_module(POLICY_MODULES[name]).POLICY
    return policy


def allocate(
    topology: Topology,
    free: frozenset[int] | set[int],
    count: int,
    required: frozenset[int] | set[int] = frozenset(),
    policy: str = DEFAULT_POLICY,
    gpu_model: str | None = None,
    min_memory_mib: int | None = None,
) -> tuple[int, ...]:
    """Choose ``count`` GPUs of ``topology`` from ``free`` with the named policy.

    Raises:
        AllocationError: the request cannot be met; ``reason`` says why.
    """
    request = AllocationRequest(
        count=count,
        required=frozenset(required),
        gpu_model=gpu_model,
        min_memory_mib=min_memory_mib,
    )
    return get_policy(policy).allocate(topology, frozenset(free), request)


def eligible_gpus(
    topology: Topology, free: frozenset[int], request: AllocationRequest
) -> frozenset[int]:
    """Check a request against a node and return the free GPUs it may use.

    Every policy calls this first, so all of them refuse the same requests with the
    same reasons.

    Raises:
        AllocationError: ``bad_count`` (count < 1 or fewer than the required GPUs),
            ``unknown_gpu``, ``required_not_free``, ``model_mismatch``,
            ``memory_too_small`` or ``too_few_free``.
    """
    count, required = request.count, request.required
    if count < 1:
        raise AllocationError(f"count: must be at least 1, got {count}", "bad_count")
    if len(required) > count:
        raise AllocationError(
            f"count: {count} is less than the {len(required)} required GPUs "
            f"{sorted(required)}; raise count or drop required GPUs",
            "bad_count",
        )
    unknown = sorted((required | free) - set(topology.gpu_indices))
    if unknown:
        known = ", ".join(map(str, topology.gpu_indices))
        raise AllocationError(f"gpus: no GPU {unknown} on this node (GPUs: {known})", "unknown_gpu")
    if not required <= free:
        raise AllocationError(
            f"required: GPUs {sorted(required - free)} are not free on this node",
            "required_not_free",
        )
    if len(free) < count:
        raise AllocationError(
            f"count: asked for {count} GPUs but only {len(free)} are free", "too_few_free"
        )
    for gpu in sorted(required):
        _check_gpu(topology, gpu, request, "required GPU")
    eligible = frozenset(g for g in free if _fits(topology, g, request))
    if len(eligible) < count:
        by_model = AllocationRequest(count, gpu_model=request.gpu_model)
        model_ok = sum(_fits(topology, g, by_model) for g in free)
        reason = "model_mismatch" if model_ok < count else "memory_too_small"
        raise AllocationError(
            f"count: asked for {count} GPUs{_wants(request)} but only {len(eligible)} of the "
            f"{len(free)} free GPUs qualify",
            reason,
        )
    return eligible


#: separates the models a job allows (``V100M16|V100M32``: either)
MODEL_SEPARATOR = "|"


def model_choices(wanted: str) -> tuple[str, ...]:
    """The models ``wanted`` allows: its ``|``-separated parts (``V100|A100``), one or more."""
    return tuple(part.strip() for part in wanted.split(MODEL_SEPARATOR))


def model_matches(wanted: str, model: str) -> bool:
    """Whether a GPU model name satisfies a requested model.

    Substring match ignoring case and punctuation, so ``V100`` matches ``Tesla V100-SXM2``
    and the sanitised agent attribute ``Tesla_V100-SXM2`` alike. ``wanted`` may allow several
    models separated by ``|`` (``V100M16|V100M32``): any of them matches.
    """
    return _matches(wanted, model)


@functools.lru_cache(maxsize=65536)
def _matches(wanted: str, model: str) -> bool:
    """:func:`model_matches`, kept: placement asks it per job and candidate agent, and a
    ``gpu_model`` may hold 16 parts, each a regex to normalise (red-team #47)."""
    return _allows(_usable_parts(model_choices(wanted)), model)


def model_access(choices: frozenset[str], names: tuple[str, ...]) -> tuple[bool, ...]:
    """Per name of ``names``, whether one of ``choices`` (a mix shape's allowed models, each
    a :func:`model_choices` part) matches it as :func:`model_matches` does.

    Kept per ``(choices, names)``, with each name and part normalised once: the fragmentation
    mix asks this for every restricted shape each time it is rebuilt, and a user's queued jobs
    may hold hundreds of distinct many-part ``gpu_model`` values (red-team #47: matching every
    part against every model afresh cost 1.8 s per rebuild).
    """
    return _model_access(choices, names)


@functools.lru_cache(maxsize=8192)
def _model_access(choices: frozenset[str], names: tuple[str, ...]) -> tuple[bool, ...]:
    parts = _usable_parts(choices)  # once for every name
    return tuple(_allows(parts, name) for name in names)


# The one matching rule, shared by both caches above (each keeps its own, so a placement
# round's per-agent asks never evict the mix's per-shape answers).
def _usable_parts(choices: Iterable[str]) -> tuple[str, ...]:
    """The normalised allowed models that can match: "" (from '.*' or '-') matches none."""
    return tuple(part for part in map(_normal_part, choices) if part)


def _allows(parts: tuple[str, ...], model: str) -> bool:
    """Whether one of the normalised ``parts`` is a substring of the normalised ``model``."""
    name = _normal_part(model)
    return any(part in name for part in parts)


@functools.lru_cache(maxsize=65536)
def _normal_part(text: str) -> str:
    return _normalise_model(text.strip())


def _normalise_model(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _wants(request: AllocationRequest) -> str:
    parts = []
    if request.gpu_model:
        parts.append(f"model {request.gpu_model!r}")
    if request.min_memory_mib:
        parts.append(f">= {request.min_memory_mib} MiB")
    return f" ({', '.join(parts)})" if parts else ""


def _fits(topology: Topology, gpu: int, request: AllocationRequest) -> bool:
    try:
        _check_gpu(topology, gpu, request, "GPU")
    except AllocationError:
        return False
    return True


def _check_gpu(topology: Topology, index: int, request: AllocationRequest, what: str) -> None:
    gpu = topology.gpu(index)
    if request.gpu_model and not model_matches(request.gpu_model, gpu.model or ""):
        seen = repr(gpu.model) if gpu.model else "unknown"
        raise AllocationError(
            f"gpu_model: {what} {index} is {seen}, not {request.gpu_model!r}",
            "model_mismatch",
        )
    if request.min_memory_mib and (gpu.memory_mib or 0) < request.min_memory_mib:
        seen = f"{gpu.memory_mib} MiB" if gpu.memory_mib is not None else "unknown memory"
        raise AllocationError(
            f"min_memory_mib: {what} {index} has {seen}, less than {request.min_memory_mib} MiB",
            "memory_too_small",
        )
