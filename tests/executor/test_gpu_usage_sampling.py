"""Allocated versus used, node side: NVML readings, the window and the sampler.

The fake NVML (tests/fakes/usage_nvml.py) answers with the real H100's figures: 81,559 MiB in
all, 0 % and 480 MiB (driver-reserved) when idle, 1,542 MiB for a process that allocated 1 GiB.
"""

from __future__ import annotations

import pytest

from dlc.executor.gpu_usage import GpuSample, process_gpu_memory, sample_gpus
from dlc.executor.usage import UsageSampler, UsageWindow, task_memory
from dlc.scheduler.tasks.usage import decode_report
from tests.fakes.usage_nvml import ONE_GIB_PROCESS_MIB, H100UsageNvml, h100_facts

TOTAL = 81559
RESERVED = 480  # NVML's "used" on the idle H100


def test_fake_is_built_from_the_real_h100():
    facts = h100_facts()
    assert facts["memory_mib"] == TOTAL and facts["uuid"].startswith("GPU-094dfacd")
    assert (facts["idle_used_mib"], facts["idle_util"]) == (RESERVED, 0)


def test_sample_reads_memory_and_utilisation_and_skips_a_lost_gpu():
    nvml = H100UsageNvml(gpus=2)
    nvml.run(700, 0, util=87)
    nvml.lost.add(1)
    used = RESERVED + ONE_GIB_PROCESS_MIB
    assert sample_gpus(nvml, [0, 1]) == [GpuSample(0, 87, used, TOTAL)]


def test_a_binding_without_utilisation_still_reports_memory():
    (sample,) = sample_gpus(H100UsageNvml(utilization=False), [0])
    assert sample.util_percent is None and sample.memory_used_mib == RESERVED


def test_window_keeps_mean_and_peak_utilisation_and_the_last_memory():
    window = UsageWindow(size=3)
    for at, (util, used) in enumerate([(100, 9000), (10, 1542), (40, 1542), (70, 2000)]):
        window.add("t1", [GpuSample(0, util, used, TOTAL)], {0: used - 66}, float(at))
    (gpu,) = window.summary("t1")
    assert (gpu.util_pct, gpu.util_max_pct, gpu.samples) == (40.0, 70, 3)  # 100 fell out
    assert (gpu.mem_used_mib, gpu.task_mem_mib, gpu.sampled_at) == (2000, 1934, 3.0)
    window.forget("t1")
    assert window.summary("t1") == [] and window.tasks() == []


def test_task_memory_counts_only_the_containers_processes_on_its_gpus():
    nvml = H100UsageNvml(gpus=2)
    nvml.run(10, 0, 1542)
    nvml.run(11, 0, 66)  # an MPS server, not the task's
    nvml.run(10, 1, 500)  # the task's process on a GPU it was not given
    assert task_memory(process_gpu_memory(nvml), {10}, [0]) == {0: 1542}


def _sampler(nvml, sent, **kw):
    kw.setdefault("pids_of", lambda cid: {100} if cid == "c1" else set())
    return UsageSampler(lambda: nvml, sent.append, clock=lambda: 1000.0, **kw)


def test_sampler_reports_each_running_task_and_forgets_ended_ones():
    nvml, sent = H100UsageNvml(gpus=2), []
    sampler = _sampler(nvml, sent, interval_s=3600, report_every=2)
    nvml.run(100, 1, util=55)
    sampler.started("t1", "c1", [1])
    sampler.started("t2", "c2", [0])
    assert sampler.tick() is not None  # the first period reports at once
    assert sampler.tick() is None  # then every report_every samples
    (t1, t2) = sorted(decode_report(sent[0], "a1"), key=lambda t: t.task_id)
    assert (t1.task_id, t1.agent_id, t1.gpus[0].gpu_index) == ("t1", "a1", 1)
    assert (t1.gpus[0].util_pct, t1.gpus[0].task_mem_mib, t1.gpus[0].mem_used_mib) == (
        55.0, ONE_GIB_PROCESS_MIB, RESERVED + ONE_GIB_PROCESS_MIB)  # fmt: skip
    assert (t2.gpus[0].util_pct, t2.gpus[0].task_mem_mib) == (0.0, 0)  # allocated, idle
    sampler.finished("t2")
    sampler.tick()
    assert [t.task_id for t in decode_report(sent[-1], "a1")] == ["t1"]
    assert decode_report(sent[-1], "a1")[0].gpus[0].samples == 3
    sampler.stop()


def test_no_nvml_means_no_sampling_and_no_error():
    def missing():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    sent = []
    sampler = UsageSampler(missing, sent.append, interval_s=3600)
    sampler.started("t1", "c1", [0])
    assert sampler.tick() is None and sent == [] and sampler._ticker is None


@pytest.mark.parametrize("gpus", [(), [0]])
def test_cpu_tasks_and_a_zero_interval_sample_nothing(gpus):
    calls = []
    sampler = UsageSampler(lambda: calls.append(1) or H100UsageNvml(), interval_s=0 if gpus else 5)
    sampler.started("t1", "c1", gpus)
    assert sampler._ticker is None and sampler.report() is None
