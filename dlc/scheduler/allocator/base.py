"""The one-method allocation interface shared by every policy.

A policy answers: given a node's topology, its free GPUs, GPUs that must be in
the set, and a count (plus optional GPU model / minimum memory), which GPUs? It
returns the chosen indices in the order the container should number them, or
raises :class:`~dlc.errors.AllocationError` saying why no set exists.
"""

from __future__ import annotations

import importlib
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
    "first-fit": "dlc.scheduler.allocator.first_fit",
}


def get_policy(name: str) -> Policy:
    """The policy called ``name``.

    Raises:
        AllocationError: unknown policy name (lists the known ones).
    """
    if name not in POLICY_MODULES:
        known = ", ".join(sorted(POLICY_MODULES))
        raise AllocationError(f"unknown allocation policy {name!r}; known: {known}", "bad_policy")
    return importlib.import_module(POLICY_MODULES[name]).POLICY


def allocate(
    topology: Topology,
    free: frozenset[int] | set[int],
    count: int,
    required: frozenset[int] | set[int] = frozenset(),
    policy: str = "first-fit",
    gpu_model: str | None = None,
    min_memory_mib: int | None = None,
) -> tuple[int, ...]:
    """Choose ``count`` GPUs of ``topology`` from ``free`` with the named policy.

    Raises:
        AllocationError: the request cannot be met; ``reason`` says why.
    """
    request = AllocationRequest(count, frozenset(required), gpu_model, min_memory_mib)
    return get_policy(policy).allocate(topology, frozenset(free), request)
