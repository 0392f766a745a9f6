"""Build the arrival sequence of an openb replay and the target workload mix.

As the FGD paper's experiments run it: the trace's pods arrive in a random order
(times are ignored), then copies drawn at random from the trace are appended until
the requested GPUs would pass ``tune`` times the cluster's GPUs ("tuning" to 130%).
The target workload (what FGD's fragmentation measure is taken against) is the
trace's most popular pod shapes covering 95% of its pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from dlc.sim.trace import MILLI, PodSpec


def arrival_sequence(
    pods: list[PodSpec], total_gpu_milli: int, tune: float, rng: np.random.Generator
) -> list[PodSpec]:
    """The pods in arrival order: the trace shuffled, then resampled copies.

    Copies are drawn (with replacement, from the trace sorted by name) until the
    next draw would push the requested GPU thousandths past ``tune * total_gpu_milli``.
    As in the paper's simulator, that check counts one GPU of the drawn pod (so one
    multi-GPU copy may overshoot by a few GPUs) and stops at the first draw that
    does not fit. ``tune <= 0`` keeps the trace as it is (shuffled).
    """
    by_name = sorted(pods, key=lambda p: p.name)
    order = rng.permutation(len(by_name))
    arrivals = [by_name[i] for i in order]
    if tune <= 0:
        return arrivals
    target = tune * total_gpu_milli
    requested = sum(p.total_gpu_milli for p in arrivals)
    if requested > target:
        return _tune_down(arrivals, requested, target, rng)
    copy_no = 0
    while True:
        pod = by_name[int(rng.integers(len(by_name)))]
        if requested + pod.gpu_milli > target:
            return arrivals
        arrivals.append(replace(pod, name=f"{pod.name}-tuned-{copy_no}"))
        requested += pod.total_gpu_milli
        copy_no += 1


def _tune_down(
    arrivals: list[PodSpec], requested: int, target: float, rng: np.random.Generator
) -> list[PodSpec]:
    arrivals = list(arrivals)
    while requested > target and arrivals:
        pod = arrivals.pop(int(rng.integers(len(arrivals))))
        requested -= pod.total_gpu_milli
    return arrivals


@dataclass(frozen=True)
class TargetMix:
    """Pod shapes and their frequencies (summing to 1): the "target workload".

    Arrays of one entry per shape: CPU thousandths, GPU thousandths per GPU (0 for
    CPU-only), GPUs, and the allowed models (empty set: any).
    """

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    models: tuple[frozenset[str], ...]
    weight: np.ndarray

    def __len__(self) -> int:
        return len(self.weight)

    def access(self, model_names: list[str]) -> np.ndarray:
        """``[model, shape]`` booleans: may a GPU of that model serve the shape."""
        out = np.ones((len(model_names), len(self)), dtype=bool)
        for j, allowed in enumerate(self.models):
            if allowed:
                out[:, j] = [m in allowed for m in model_names]
        return out


def target_mix(pods: list[PodSpec], popularity: float = 0.95) -> TargetMix:
    """The most frequent (CPU, GPU share, GPUs, models) shapes covering ``popularity``.

    Memory is not part of a shape, as in the paper. Ties in frequency are broken by
    the larger shape first so that the result does not depend on file order.
    """
    counts = Counter((p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_models) for p in pods)
    ranked = sorted(
        counts.items(),
        key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], sorted(kv[0][3])),
        reverse=True,
    )
    total = len(pods)
    chosen: list[tuple[tuple, int]] = []
    covered = 0
    for shape, n in ranked:
        if covered >= popularity * total:
            break
        chosen.append((shape, n))
        covered += n
    weight = np.array([n for _, n in chosen], dtype=float)
    return TargetMix(
        cpu_milli=np.array([s[0] for s, _ in chosen], dtype=np.int64),
        gpu_milli=np.array([s[1] for s, _ in chosen], dtype=np.int64),
        num_gpu=np.array([s[2] for s, _ in chosen], dtype=np.int64),
        models=tuple(s[3] for s, _ in chosen),
        weight=weight / weight.sum(),
    )


def requested_gpu_milli(pods: list[PodSpec]) -> int:
    """GPU thousandths the pods ask for in all."""
    return sum(p.total_gpu_milli for p in pods)


__all__ = ["MILLI", "TargetMix", "arrival_sequence", "requested_gpu_milli", "target_mix"]
