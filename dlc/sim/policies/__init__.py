"""Simulator placement policies by name: the FGD paper's six baselines and DLC's."""

from __future__ import annotations

from collections.abc import Callable

from dlc.errors import FieldError
from dlc.sim.policies.base import ClusterView, Policy
from dlc.sim.policies.fgd import FgdPolicy
from dlc.sim.policies.paper import best_fit, dot_product, gpu_clustering, gpu_packing, random_policy

#: policy name -> (factory, label in tables)
POLICIES: dict[str, tuple[Callable[[], Policy] | None, str]] = {
    "random": (lambda: random_policy, "Random"),
    "dotprod": (lambda: dot_product, "DotProd"),
    "clustering": (lambda: gpu_clustering, "GpuClustering"),
    "packing": (lambda: gpu_packing, "GpuPacking"),
    "bestfit": (lambda: best_fit, "BestFit"),
    "fgd": (FgdPolicy, "FGD"),
    # each pod through production's placement engine (placement.place, as the offer round
    # places it; dlc.sim.policies.engine), so the direct replay credits what the core runs
    "dlc": (None, "DLC"),
    # the former direct DLC: fragscore on the replay's arrays against the trace's target mix
    # (the figures of the README's tables before issue 26 came from it)
    "dlc-arrays": (None, "DLC (arrays)"),
    # DLC's placement plus the share hold (fragscore.share_hold: a share with an unfillable
    # leftover waits rather than open a whole GPU while whole GPUs are scarce); a held share
    # counts as failed in the pods-only-arrive replay, so it is reported apart
    "dlc-admit": (None, "DLC + share hold"),
}


def get_policy(name: str) -> Policy:
    """A fresh policy by name; an unknown name is a one-line error listing the known ones.

    ``dlc-admit:R`` is DLC with the share hold at reserve ``R`` (``dlc-admit`` is ``R=1``).
    """
    base, reserve = _parse(name)
    if base == "dlc":
        from dlc.sim.policies.engine import EnginePolicy

        return EnginePolicy()
    if base in ("dlc-arrays", "dlc-admit"):
        from dlc.scheduler.allocator.fragscore import ScoreParams
        from dlc.sim.policies.dlc import DlcPolicy

        return DlcPolicy(ScoreParams(hold_reserve=reserve))
    factory = POLICIES[base][0]
    assert factory is not None  # DLC's are built above
    return factory()


def check_policy(name: str) -> str:
    """``name`` if :func:`get_policy` knows it, else a one-line ``FieldError``."""
    _parse(name)
    return name


def _parse(name: str) -> tuple[str, float]:
    """``(base name, share hold reserve)`` of a policy name."""
    base, _, arg = name.partition(":")
    if base not in POLICIES or (arg and base != "dlc-admit"):
        known = ", ".join(POLICIES)
        raise FieldError(
            "--policy", f"unknown policy {name!r}; use one of {known} (or dlc-admit:R)"
        )
    if base != "dlc-admit":
        return base, 0.0
    try:
        reserve = float(arg) if arg else 1.0
    except ValueError:
        reserve = -1.0
    if not 0 < reserve <= 10:
        raise FieldError(
            "--policy",
            f"{name!r}: the hold reserve must be a number in (0, 10], e.g. dlc-admit:1.5",
        )
    return base, reserve


def hold_reserve(name: str) -> float:
    """The share hold reserve a policy name asks (0: none)."""
    return _parse(name)[1]


#: the policies ``--mode core`` runs: the scheduler core is DLC's (with or without the hold)
CORE_POLICIES = ("dlc", "dlc-admit")


def check_core_policy(name: str) -> str:
    """``name`` if the scheduler core can run it (``dlc`` or ``dlc-admit[:R]``)."""
    if _parse(name)[0] not in CORE_POLICIES:
        raise FieldError(
            "--policy",
            f"{name!r} is not DLC's; --mode core runs the scheduler core: pass --policy dlc "
            "(or dlc-admit:R), or --mode replay",
        )
    return name


def label(name: str) -> str:
    """The display name of a policy."""
    base, reserve = _parse(name)
    text = POLICIES[base][1]
    return f"{text} x{reserve:g}" if base == "dlc-admit" and reserve != 1.0 else text


__all__ = [
    "CORE_POLICIES",
    "POLICIES",
    "ClusterView",
    "Policy",
    "check_core_policy",
    "check_policy",
    "get_policy",
    "hold_reserve",
    "label",
]
