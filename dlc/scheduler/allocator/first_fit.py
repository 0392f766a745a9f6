"""``first-fit``: stock Mesos behaviour, the lowest free indices.

Mesos's ``gpu/nvidia`` isolator walks its ordered set of free GPUs and takes the
first ``count``; it knows nothing of links. Kept as the baseline DLC must beat.
"""

from __future__ import annotations

from dlc.scheduler.allocator.base import AllocationRequest, eligible_gpus
from dlc.topology.model import Topology


class FirstFitPolicy:
    """Lowest free indices first (required GPUs always included)."""

    name = "first-fit"

    def allocate(
        self, topology: Topology, free: frozenset[int], request: AllocationRequest
    ) -> tuple[int, ...]:
        """See :class:`dlc.scheduler.allocator.base.Policy`."""
        eligible = eligible_gpus(topology, free, request)
        rest = sorted(eligible - request.required)[: request.count - len(request.required)]
        return tuple(sorted(request.required | frozenset(rest)))


POLICY = FirstFitPolicy()
