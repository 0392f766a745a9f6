"""Where the CPU-only pods go: DLC's rule against FGD's and two other rules, on the direct replay.

The engine policy (``--policy dlc``, :mod:`dlc.sim.policies.engine`) places a CPU-only pod as
the offer round places a CPU-only job (``gpus: 0``): on the agent where taking its CPU and
memory grows the fragmentation of the mix's GPU shapes least, then the engine's tie order
(:meth:`~dlc.scheduler.placement.whole_score.WholeScore.order`; ``--rule dlc``, the shipped
rule). This runs the same replay with the GPU pods through the engine as always and the
CPU-only pods by another rule, to measure what the rule is worth on a trace::

    .venv/bin/python bench/sim_cpu_only.py --trace cpu250 --seeds 42 --rule fgd --out /tmp/x

Rules: ``dlc`` (shipped), ``fgd`` (FGD's choice, :func:`dlc.sim.policies.fgd.fgd`: its
measure mostly ties for CPU-only pods, docs/simulator.md "cpu250 fidelity gap"), ``bestfit``
(no measure: the fewest free GPUs, then agent id, the engine's order for a job it does not
score), ``cpufit`` (DLC's measure, then the least CPU left among equals instead of the
fewest free GPUs), ``mix`` (the shipped rule with the CPU-only pods in the mix as well, as
shapes that ask no GPU). The folder's ``results.json`` is as ``dlc simulate openb --policy dlc
--out`` writes it (the policy is still named ``dlc`` there).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import dlc.sim.run as sim_run  # noqa: E402
from dlc.cli.main import main as dlc_main  # noqa: E402
from dlc.scheduler.placement import whole_score  # noqa: E402
from dlc.sim.policies import engine, get_policy  # noqa: E402
from dlc.sim.policies.base import ClusterView  # noqa: E402
from dlc.sim.policies.engine import EnginePolicy, offer_of  # noqa: E402
from dlc.sim.policies.fgd import fgd  # noqa: E402
from dlc.sim.trace import PodSpec  # noqa: E402

RULES = ("dlc", "fgd", "bestfit", "cpufit", "mix")
_shipped_order = whole_score.WholeScore.order


class FgdForCpuOnly:
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
        if not pod.num_gpu:
            placed = fgd(pod, view, rng)
            self._stale = None if placed is None else placed.node
            return placed
        return engine(pod, view, rng)


def _bestfit_order(self, candidates, gpus, cpus, mem):  # type: ignore[no-untyped-def]
    """No measure for a CPU-only job: the candidates as placement lists them."""
    return list(candidates) if not gpus else _shipped_order(self, candidates, gpus, cpus, mem)


def _cpufit_order(self, candidates, gpus, cpus, mem):  # type: ignore[no-untyped-def]
    """DLC's measure for a CPU-only job, then the least CPU left, then agent id."""
    if gpus:
        return _shipped_order(self, candidates, gpus, cpus, mem)
    ranked = _shipped_order(self, candidates, gpus, cpus, mem)  # reads every row, measures
    row = self._row
    at = np.fromiter((row[id(s)] for s in ranked), dtype=np.int64, count=len(ranked))
    request = whole_score.fgd.ShareRequest(
        cpu_milli=int(cpus * 1000), mem_mib=0, num_gpus=0, gpu_milli=whole_score.MILLI
    )
    cost = self._cost(request, np.sort(at))[at]
    extra = whole_score.fragscore.host_keep_cost(
        request, self._agents, np.sort(at), self._guarded, self._params
    )
    if extra is not None:
        cost = cost + extra[np.searchsorted(np.sort(at), at), 0]
    order = np.lexsort((self._id_rank()[at], self._agents.cpu_left[at], cost))
    return [ranked[k] for k in order]


def _with_cpu_only(counts):  # type: ignore[no-untyped-def]
    """The shipped mix, plus the CPU-only shapes that cover :data:`POPULARITY` of the CPU-only
    tasks, weighted by count (a shape asking no GPU counts all free GPU as fragment on every
    agent, as in FGD's measure)."""
    mix = whole_score.counted_mix(counts)
    cpu = sorted(((n, k[0]) for k, n in counts.items() if k[2] == 0 and n > 0), reverse=True)
    if mix is None or not cpu:
        return mix
    total, covered, shapes, weights = sum(n for n, _ in cpu), 0, [], []
    for n, milli in cpu:
        if covered >= whole_score.POPULARITY * total:
            break
        shapes.append(whole_score.fgd.ShareRequest(milli, 0, 0, whole_score.MILLI))
        weights.append(float(n))
        covered += n
    return replace(mix, shapes=mix.shapes + tuple(shapes), weights=mix.weights + tuple(weights))


def _rule(name: str):  # type: ignore[no-untyped-def]
    if name == "mix":
        engine.counted_mix = _with_cpu_only  # type: ignore[assignment]
    if name == "bestfit":
        whole_score.WholeScore.order = _bestfit_order  # type: ignore[method-assign]
    elif name == "cpufit":
        whole_score.WholeScore.order = _cpufit_order  # type: ignore[method-assign]
    return (lambda p: FgdForCpuOnly() if p == "dlc" else get_policy(p)) if name == "fgd" else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="cpu250")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--rule", choices=RULES, default="dlc")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    policy = _rule(args.rule)
    if policy is not None:
        sim_run.get_policy = policy  # type: ignore[assignment]
    dlc_main(["simulate", "openb", "--trace", args.trace, "--policy", "dlc",
              "--seeds", args.seeds, "--out", args.out])  # fmt: skip


if __name__ == "__main__":
    main()
