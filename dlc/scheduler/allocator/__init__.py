"""GPU allocation policies: one interface, one module per policy.

Use :func:`allocate` (policy by name) or a :class:`Policy` object directly.
Policies: ``tree`` (DLC's default), and the baselines ``first-fit``,
``best-effort``, ``tkestack`` and ``optimal``.
"""

from dlc.scheduler.allocator.base import (
    DEFAULT_POLICY,
    POLICY_MODULES,
    AllocationRequest,
    Policy,
    allocate,
    eligible_gpus,
    get_policy,
)

__all__ = [
    "DEFAULT_POLICY",
    "POLICY_MODULES",
    "AllocationRequest",
    "Policy",
    "allocate",
    "eligible_gpus",
    "get_policy",
]
