"""Simulator placement policies by name: the FGD paper's six baselines and DLC's."""

from __future__ import annotations

from dlc.errors import FieldError
from dlc.sim.policies.base import ClusterView, Policy
from dlc.sim.policies.fgd import FgdPolicy
from dlc.sim.policies.paper import best_fit, dot_product, gpu_clustering, gpu_packing, random_policy

#: policy name -> (factory, label in tables)
POLICIES = {
    "random": (lambda: random_policy, "Random"),
    "dotprod": (lambda: dot_product, "DotProd"),
    "clustering": (lambda: gpu_clustering, "GpuClustering"),
    "packing": (lambda: gpu_packing, "GpuPacking"),
    "bestfit": (lambda: best_fit, "BestFit"),
    "fgd": (FgdPolicy, "FGD"),
    "dlc": (None, "DLC"),
    # DLC's placement plus the share hold (fragscore.share_hold: a share with an unfillable
    # leftover waits rather than open a whole GPU while whole GPUs are scarce); a held share
    # counts as failed in the pods-only-arrive replay, so it is reported apart
    "dlc-admit": (None, "DLC + share hold"),
}


def get_policy(name: str) -> Policy:
    """A fresh policy by name; an unknown name is a one-line error listing the known ones."""
    if name not in POLICIES:
        raise FieldError("--policy", f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")
    if name in ("dlc", "dlc-admit"):
        from dlc.scheduler.allocator.fragscore import ScoreParams
        from dlc.sim.policies.dlc import DlcPolicy

        return DlcPolicy(ScoreParams(hold_reserve=1.0 if name == "dlc-admit" else 0.0))
    return POLICIES[name][0]()


def label(name: str) -> str:
    """The display name of a policy."""
    return POLICIES[name][1]


__all__ = ["POLICIES", "ClusterView", "Policy", "get_policy", "label"]
