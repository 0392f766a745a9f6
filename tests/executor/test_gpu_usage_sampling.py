"""Allocated versus used: sampling a task's GPUs through NVML and the status-update label.

The fake NVML answers with what a real H100 reported (tests/topology/data/h100-x1/smi_q.txt:
81,559 MiB in all, 0 % busy when idle; docs/gpu-check.md: under MPS the server held 66 MiB
and a client 1,540 MiB, 1,606 MiB together).
"""

from __future__ import annotations

from types import SimpleNamespace

from dlc.executor.gpu_usage import (
    USAGE_LABEL,
    UsageTracker,
    parse_usage_label,
    sample_gpus,
)

MIB = 1 << 20
H100_TOTAL_MIB = 81559


class NVMLError(Exception):
    pass


class H100Nvml:
    """GPU 0: the measured H100; GPU 1: lost (NVML errors), as a GPU off the bus is."""

    NVMLError = NVMLError

    def __init__(self, used_mib: int, util: int | None = 0):
        self.used_mib, self.util = used_mib, util

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        if index != 0:
            raise NVMLError("GPU is lost")
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        total = H100_TOTAL_MIB * MIB
        return SimpleNamespace(total=total, used=self.used_mib * MIB,
                               free=total - self.used_mib * MIB)  # fmt: skip

    def __getattr__(self, name):
        if name == "nvmlDeviceGetUtilizationRates" and self.util is not None:
            return lambda handle: SimpleNamespace(gpu=self.util, memory=0)
        raise AttributeError(name)


def test_sample_reads_memory_and_utilisation_and_skips_a_lost_gpu():
    samples = sample_gpus(H100Nvml(used_mib=1606), [0, 1])
    assert [(s.gpu_index, s.util_percent, s.memory_used_mib, s.memory_total_mib)
            for s in samples] == [(0, 0, 1606, H100_TOTAL_MIB)]  # fmt: skip


def test_a_binding_without_utilisation_still_reports_memory():
    (sample,) = sample_gpus(H100Nvml(used_mib=0, util=None), [0])
    assert sample.util_percent is None and sample.memory_used_mib == 0


def test_tracker_keeps_mean_utilisation_and_peak_memory_and_labels_round_trip():
    tracker = UsageTracker()
    assert tracker.labels() == {}
    for used in (0, 1606, 66):  # idle, MPS server + client, server alone
        tracker.add(sample_gpus(H100Nvml(used_mib=used), [0]))
    assert tracker.summary() == {0: (0.0, 1606, H100_TOTAL_MIB)}
    label = tracker.labels()[USAGE_LABEL]
    assert label == f"0:0%:1606/{H100_TOTAL_MIB}MiB"
    assert parse_usage_label(label) == tracker.summary()


def test_parse_skips_parts_it_does_not_understand():
    text = f"0:12.5%:1540/{H100_TOTAL_MIB}MiB,garbage,3:-:0/16384MiB,4:x:y"
    assert parse_usage_label(text) == {0: (12.5, 1540, H100_TOTAL_MIB), 3: (None, 0, 16384)}
