"""Fair order between groups: dominant-resource fairness on what each uses beyond its
guarantee.

A job that fits in its group's guarantee goes before any borrowing job. Among borrowers,
the group whose *borrowed* dominant share of the pool is smallest goes next (DRF, as in
Volcano's drf plugin and Kueue's fair sharing), so two groups with equal demand take turns
and no group starves another. Within a group jobs keep their queue order (priority, then
submission time).
"""

from __future__ import annotations

from dlc.scheduler.tenancy.policy import Resources


def group_key(
    usage: Resources, guaranteed: Resources, capacity: Resources, demand: Resources
) -> tuple[int, float]:
    """Sort key of a group's next job: ``(0 within guarantee / 1 borrowing, borrowed share)``.

    Args:
        usage: what the group holds in the pool (running plus admitted this round).
        guaranteed: the group's guarantee there.
        capacity: the pool's total (a zero total falls back to the guarantee, then 1).
        demand: what the group's next job asks for.
    """
    within = (usage + demand).fits(guaranteed)
    if within:
        return (0, 0.0)
    borrowed = usage.over(guaranteed)
    whole = capacity if capacity.gpus or capacity.cpus or capacity.mem_mib else guaranteed
    return (1, borrowed.share_of(whole) if whole != Resources() else borrowed.gpus)


def claim(usage: Resources, guaranteed: Resources, pending: Resources) -> Resources:
    """What a group holds or may take back at once: its usage, or up to its guarantee
    as far as its waiting jobs ask (others may borrow only beyond this)."""
    want = usage + pending
    return Resources(
        max(usage.gpus, min(guaranteed.gpus, want.gpus)),
        max(usage.cpus, min(guaranteed.cpus, want.cpus)),
        max(usage.mem_mib, min(guaranteed.mem_mib, want.mem_mib)),
    )
