"""Experiment: the measure model-blind (access all ones), the pressure tie-break kept."""

import runpy
import sys

import numpy as np

root = sys.argv[1]
sys.path.insert(0, root)
import dlc.scheduler.placement.share_placement as sp
import dlc.scheduler.placement.whole_score as ws
from dlc.scheduler.allocator import mix_models, shares
from dlc.scheduler.allocator.base import model_matches


def cover(self, names):
    self.access = np.ones((max(len(names), len(self.access)), len(self.shapes)), dtype=bool)


shares.MixArrays.cover = cover


def pressure(mix, rows):
    if not mix.constrained or not len(rows):
        return np.zeros(len(rows))
    names = mix_models.MODELS.names
    need = np.zeros(len(names))
    for j, s in enumerate(mix.shapes):
        if s.gpu_models:
            need += mix.weight[j] * np.array(
                [any(model_matches(w, m) for w in s.gpu_models) for m in names]
            )
    count = np.bincount(rows, minlength=len(need))
    return need[rows] / np.maximum(count[rows], 1)


ws.pressure = pressure
sp.pressure = pressure
sys.argv = ["sim_engine_knobs.py", *sys.argv[2:]]
runpy.run_path(f"{root}/bench/sim_engine_knobs.py", run_name="__main__")
