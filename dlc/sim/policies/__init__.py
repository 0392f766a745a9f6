"""Simulator placement policies by name: the FGD paper's six baselines and DLC's."""

from __future__ import annotations

from dlc.errors import FieldError
from dlc.sim.policies.base import ClusterView, Policy
from dlc.sim.policies.fgd import fgd
from dlc.sim.policies.paper import best_fit, dot_product, gpu_clustering, gpu_packing, random_policy

#: policy name -> (factory, label in tables)
POLICIES = {
    "random": (lambda: random_policy, "Random"),
    "dotprod": (lambda: dot_product, "DotProd"),
    "clustering": (lambda: gpu_clustering, "GpuClustering"),
    "packing": (lambda: gpu_packing, "GpuPacking"),
    "bestfit": (lambda: best_fit, "BestFit"),
    "fgd": (lambda: fgd, "FGD"),
    "dlc": (None, "DLC"),
}


def get_policy(name: str) -> Policy:
    """A fresh policy by name; an unknown name is a one-line error listing the known ones."""
    if name not in POLICIES:
        raise FieldError("--policy", f"unknown policy {name!r}; use one of {', '.join(POLICIES)}")
    if name == "dlc":
        from dlc.sim.policies.dlc import DlcPolicy

        return DlcPolicy()
    return POLICIES[name][0]()


def label(name: str) -> str:
    """The display name of a policy."""
    return POLICIES[name][1]


__all__ = ["POLICIES", "ClusterView", "Policy", "get_policy", "label"]
