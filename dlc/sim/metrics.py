"""Curves and summaries of replays, defined as the FGD paper's analysis scripts do.

The value at step k (0..130) is the mean allocation ratio over all events whose
arrived GPU demand, in percent of the cluster's GPUs and rounded, equals k (or,
when no event rounds to k, over those within k-1..k+1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlc.sim.replay import ReplayResult

STEPS = np.arange(0, 131)

# two-sided 97.5% Student t quantiles by degrees of freedom (1..30); normal beyond
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
_T975 += [2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]
_T975 += [2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def stepped(result: ReplayResult, values: np.ndarray, decimals: int = 2) -> np.ndarray:
    """``values`` (one per event) averaged per 1% step of arrived demand; NaN where none."""
    total_gpus = result.total_gpu_milli / 1000
    arrive = np.round(result.arrived_gpu_milli / total_gpus / 10)
    values = np.round(values, decimals)
    out = np.full(len(STEPS), np.nan)
    for k in STEPS:
        hit = values[arrive == k]
        if not len(hit):
            hit = values[(arrive >= k - 1) & (arrive <= k + 1)]
        if len(hit):
            out[k] = round(float(hit.mean()), decimals)
    return out


def allocation_curve(result: ReplayResult) -> np.ndarray:
    """Allocation ratio (%) at each step of arrived demand (0..130%)."""
    total_gpus = result.total_gpu_milli / 1000
    return stepped(result, result.used_gpu_milli / total_gpus / 10)


def frag_curve(result: ReplayResult) -> np.ndarray:
    """Fragmented GPU thousandths at each step of arrived demand."""
    return stepped(result, result.frag_gpu_milli)


@dataclass(frozen=True)
class Interval:
    """A mean with the half-width of its 95% confidence interval (Student t)."""

    mean: float
    half_width: float
    n: int


def mean_ci(values) -> Interval:
    """Mean and 95% CI half-width of a few samples (NaNs dropped)."""
    xs = [float(v) for v in values if not math.isnan(v)]
    if not xs:
        return Interval(math.nan, math.nan, 0)
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return Interval(m, math.nan, len(xs))
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    t = _T975[len(xs) - 2] if len(xs) - 1 <= len(_T975) else 1.96
    return Interval(m, t * sd / math.sqrt(len(xs)), len(xs))
