"""GPU allocation policies: one interface, one module per policy.

Use :func:`allocate` (policy by name) or a :class:`Policy` object directly.
"""

from dlc.scheduler.allocator.base import AllocationRequest, Policy, allocate, get_policy

__all__ = ["AllocationRequest", "Policy", "allocate", "get_policy"]
