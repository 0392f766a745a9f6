"""What a submit checks against the agents, frozen per inventory version.

A submit refuses what no known agent could ever run, more than a pool has, and shares
larger than their GPUs. Those answers come from the inventory, which offer rounds feed under
the core's lock; a submit must not wait for a round (issue 26). So the core publishes an
:class:`AdmissionFacts` (a copy of the inventory and the figures derived from it) whenever
the inventory's version moves, and a submit reads whichever is current: one attribute read,
no lock. A submit may be judged against the agents as the last round left them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.tenancy.policy import Resources
from dlc.scheduler.tenancy.share_charge import GpuSizes


@dataclass(frozen=True)
class AdmissionFacts:
    """The agents as admission sees them, for one inventory version.

    Attributes:
        version: the :attr:`Inventory.version` these facts are of (-1: none yet).
        inventory: a copy of the inventory then, never fed again (its answers cache fills).
        capacity: pool -> totals of the known agents.
        sizes: the GPU sizes quotas charge memory shares against.
    """

    version: int
    inventory: Inventory
    capacity: Mapping[str, Resources]
    sizes: GpuSizes
