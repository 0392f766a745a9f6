"""``first-fit``: stock Mesos behaviour, the lowest free indices.

Mesos's ``gpu/nvidia`` isolator walks its ordered set of free GPUs and takes the
first ``count``; it knows nothing of links. Kept as the baseline DLC must beat.
"""

from __future__ import annotations

from dlc.errors import AllocationError
from dlc.scheduler.allocator.base import AllocationRequest
from dlc.topology.model import Topology


class FirstFitPolicy:
    """Lowest free indices first (required GPUs always included)."""

    name = "first-fit"

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """See :class:`dlc.scheduler.allocator.base.Policy`."""
        if request.count < 1:
            raise AllocationError(f"count must be at least 1, got {request.count}", "bad_count")
        if not request.required <= free:
            missing = sorted(request.required - free)
            raise AllocationError(f"required GPUs {missing} are not free", "required_not_free")
        if request.count > len(free):
            raise AllocationError(
                f"asked for {request.count} GPUs but only {len(free)} are free", "too_few_free"
            )
        rest = sorted(free - request.required)[: request.count - len(request.required)]
        return tuple(sorted(request.required | frozenset(rest)))


POLICY = FirstFitPolicy()
