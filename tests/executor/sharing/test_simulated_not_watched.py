"""Simulated GPUs (GPU style ``none``: `dlc local --simulate ... --gpu-mem`) have no NVML: a
share there is never watched, whatever backend the agent advertises (a V100 agent says ``mps``,
an older one ``watchdog``). It was: the task failed with `executor error:
NVMLError_LibraryNotFound`."""

from __future__ import annotations

import pytest

from dlc.executor.gpu_render import GpuStyle
from dlc.executor.sharing.hook import ShareHook
from dlc.scheduler.jobs.launch_spec import GpuShare


def _no_nvml():
    raise RuntimeError("NVMLError_LibraryNotFound")  # what a host without the driver answers


@pytest.mark.parametrize("backend", ["watchdog", "mps"])
def test_a_simulated_share_is_not_watched(backend):
    hook = ShareHook(nvml_factory=_no_nvml)
    args = hook.prepare("t1", GpuShare(0, None, 4096, 500, backend), GpuStyle.NONE, None)
    assert args.labels  # rendered as a simulated share
    hook.started("t1", "c1")  # would need NVML if it watched
    assert hook.outcome("t1") is None
    hook.finished("t1")
