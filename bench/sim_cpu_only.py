"""DLC's direct replay with the CPU-only pods placed (by FGD's rule) instead of failed.

The engine policy (``--policy dlc``, :mod:`dlc.sim.policies.engine`) fails every CPU-only pod,
as the core does not submit them; FGD and the other baselines place them, so their CPU and
memory are taken on the nodes. This runs the same replay with those pods placed where FGD
would put them (:func:`dlc.sim.policies.fgd.fgd`, scoring every node) and every GPU pod
through the engine as before, to measure what leaving them out is worth on a trace::

    .venv/bin/python bench/sim_cpu_only.py --trace cpu300 --seeds 42 --out /tmp/cpu300-42

The folder's ``results.json`` is as ``dlc simulate openb --policy dlc --out`` writes it (the
policy is still named ``dlc`` there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import dlc.sim.run as sim_run  # noqa: E402
from dlc.cli.main import main as dlc_main  # noqa: E402
from dlc.sim.openb_jobs import spec_of  # noqa: E402
from dlc.sim.policies import get_policy  # noqa: E402
from dlc.sim.policies.base import ClusterView  # noqa: E402
from dlc.sim.policies.engine import EnginePolicy, offer_of  # noqa: E402
from dlc.sim.policies.fgd import fgd  # noqa: E402
from dlc.sim.trace import PodSpec  # noqa: E402


class CpuOnlyPlaced:
    """The engine for GPU pods; FGD's choice for a pod that asks no GPU."""

    def __init__(self) -> None:
        self.engine = EnginePolicy()
        self._stale: int | None = None  # the node FGD's last choice took CPU and memory on

    def __call__(self, pod: PodSpec, view: ClusterView, rng: np.random.Generator):
        engine = self.engine
        if engine._view is not view:
            engine._bind(view)
        if self._stale is not None:  # the replay has applied it: the engine's offer follows
            engine._offers[self._stale] = offer_of(view.cluster, self._stale)
            self._stale = None
        if spec_of(pod) is None:  # the engine's own test
            placed = fgd(pod, view, rng)
            self._stale = None if placed is None else placed.node
            return placed
        return engine(pod, view, rng)


def _policy(name: str):
    return CpuOnlyPlaced() if name == "dlc" else get_policy(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="cpu300")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sim_run.get_policy = _policy  # type: ignore[assignment]
    dlc_main(["simulate", "openb", "--trace", args.trace, "--policy", "dlc",
              "--seeds", args.seeds, "--out", args.out])  # fmt: skip


if __name__ == "__main__":
    main()
