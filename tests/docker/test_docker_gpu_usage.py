"""Allocated versus used end to end on the real engine, with a fake NVML of the real H100.

The core places a 2-GPU job on an agent; the executor runs it as a real container (legacy GPU
style on stand-in device nodes) with a :class:`UsageSampler` over the fake NVML. The test makes
the container's real host pid (Docker's ``top``) hold 1,542 MiB at 63 % on one GPU, as the real
H100 reads a process that allocated 1 GiB, and leaves the other GPU idle. The executor's
framework messages go to the core; the API's job JSON, the metrics and the dashboard snapshot
then show used next to allocated, the idle GPU flagged, and nothing once the task ended.
"""

from __future__ import annotations

import itertools
import time

from prometheus_client.parser import text_string_to_metric_families

from dlc.api.client import ApiClient
from dlc.api.logs import LogReader
from dlc.api.metrics import SchedulerMetrics
from dlc.api.server import ApiServer
from dlc.executor.gpu_render import GpuStyle
from dlc.executor.host_gpus import ProcDriverInfo
from dlc.executor.task_runner import RunnerConfig, TaskRunner
from dlc.executor.usage import UsageSampler
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tasks.states import DOUBLE_ASSIGNMENT_PREFIX
from dlc.scheduler.tasks.usage import decode_report
from dlc.store.sqlite import JobStore
from dlc.topology.model import Gpu, PairLink, PcieLevel, Topology
from dlc.topology.node_config import agent_attributes
from dlc.web.snapshot import add_usage, build_snapshot
from tests.docker.test_docker_task_runner import Sink
from tests.fakes.usage_nvml import ONE_GIB_PROCESS_MIB, H100UsageNvml, h100_facts

#: GPUs 4-7 of the fake agent (the e2e tests on this engine hold stand-in GPUs 0-3)
GPUS = (4, 5)


class MessageSink(Sink):
    """Status updates and framework messages, as the pymesos driver would carry them."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def message(self, data: str) -> None:
        with self.cond:
            self.messages.append(data)
            self.cond.notify_all()


def _offer(version: str) -> dict:
    h100 = h100_facts()
    topology = Topology(
        gpus=tuple(
            Gpu(i, model=h100["model"], uuid=f"GPU-{i:04d}", minor=i, memory_mib=h100["memory_mib"])
            for i in GPUS
        ),  # fmt: skip
        links={(a, b): PairLink(a, b, PcieLevel.SYS) for a, b in itertools.combinations(GPUS, 2)},
        driver_version=version,
        source="test",
    )
    attrs = [{"name": k, "type": "TEXT", "text": {"value": v}}
             for k, v in agent_attributes(topology).items()]  # fmt: skip
    resources = [{"name": n, "type": "SCALAR", "scalar": {"value": v}}
                 for n, v in (("cpus", 4.0), ("mem", 4096.0), ("gpus", 2.0))]  # fmt: skip
    resources.append({"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in GPUS]}})
    return {"id": {"value": "o1"}, "agent_id": {"value": "a1"}, "hostname": "gpu-host",
            "resources": resources, "attributes": attrs}  # fmt: skip


def _gauges(metrics) -> dict:
    """(name, label values in the family's label order) -> value, from the exposition."""
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            labels = sample.labels
            order = ("agent", "hostname", "gpu") if "gpu" in labels else tuple(labels)
            found[sample.name, tuple(labels[k] for k in order)] = sample.value
    return found


def _launch(docker_runtime, config, sink, framework_id, task_id, data):
    # the GPU claim is host-wide: another session's test may hold a stand-in GPU briefly
    for _ in range(20):
        runner = TaskRunner(docker_runtime, sink, framework_id, "ex-1", config)
        runner.launch(task_id, data)
        with sink.cond:
            sink.cond.wait_for(lambda: "TASK_RUNNING" in sink.states() or sink.terminal(), 30)
        last = sink.updates[-1]
        if not (last[1] == "TASK_FAILED" and (last[2] or "").startswith(DOUBLE_ASSIGNMENT_PREFIX)):
            return runner
        sink.updates.clear()
        time.sleep(3)
    raise AssertionError(sink.updates)


def test_usage_reaches_core_api_metrics_and_snapshot(
    docker_runtime, busybox_image, fake_dev, framework_id, driver_volume, tmp_path
):
    store = JobStore(tmp_path / "db")
    metrics = SchedulerMetrics(tenant_labels=True)
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda spec: (spec.image, None), metrics=metrics)  # fmt: skip
    job = core.submit("alice", JobSpec(gpus=2, cpus=0.5, mem_mib=64, image=busybox_image,
                                       command=("sleep", "30")))  # fmt: skip
    (_, (info,)) = core.on_offers([_offer(driver_volume.removeprefix("nvidia_driver_"))]).accepts[0]
    task_id = info["task_id"]["value"]

    nvml, sink = H100UsageNvml(gpus=8), MessageSink()
    sampler = UsageSampler(lambda: nvml, interval_s=0.3, report_every=1)
    config = RunnerConfig(gpu_style=GpuStyle.LEGACY, device_root=str(fake_dev), grace_s=1,
                          sandbox=str(tmp_path), usage=sampler,
                          driver_info=ProcDriverInfo(tmp_path / "no-driver"))  # fmt: skip
    runner = _launch(docker_runtime, config, sink, framework_id, task_id, info["data"])
    server = None
    try:
        cid = next(u[4] for u in sink.updates if u[1] == "TASK_RUNNING")["dlc.container_id"]
        core.on_status({"task_id": {"value": task_id}, "state": "TASK_RUNNING",
                        "agent_id": {"value": "a1"}})  # fmt: skip
        top = docker_runtime.client.api.top(cid)
        pid = int(top["Processes"][0][top["Titles"].index("PID")])
        nvml.run(pid, GPUS[0], ONE_GIB_PROCESS_MIB, util=63)  # the task's process, busy
        nvml.run(99999999, GPUS[1], 700, util=0)  # someone else's memory on the idle GPU

        def busy_and_idle() -> bool:
            readings = [decode_report(m, "a1") for m in sink.messages]
            gpus = {g.gpu_index: g for r in readings[-1:] for t in r for g in t.gpus}
            return (
                gpus.get(GPUS[0]) is not None
                and gpus[GPUS[0]].task_mem_mib == ONE_GIB_PROCESS_MIB
                and gpus[GPUS[1]].samples >= 3
                and gpus[GPUS[1]].util_max_pct == 0
            )

        with sink.cond:
            assert sink.cond.wait_for(busy_and_idle, 20), sink.messages[-1:]
        for data in list(sink.messages):
            core.on_usage("a1", data)

        server = ApiServer(core, LogReader(lambda: core.framework_id), lambda actions: None)
        server.start()
        shown = ApiClient(server.url, store.add_token("alice")).show(job.job_id)
        usage = shown["usage"]
        assert usage["gpus"] == 2 and usage["mem_total_mib"] == 2 * h100_facts()["memory_mib"]
        assert usage["mem_used_mib"] == ONE_GIB_PROCESS_MIB  # the task's own, not the 700
        assert 0 < usage["util_pct"] < 63 and usage["idle"] is False  # one busy, one idle GPU

        gauges = _gauges(metrics)
        busy, idle = (("a1", "gpu-host", str(g)) for g in GPUS)
        assert gauges["dlc_gpu_allocated", busy] == 1 == gauges["dlc_gpu_allocated", idle]
        reserved = h100_facts()["idle_used_mib"]  # NVML counts the driver's 480 MiB as used
        assert gauges["dlc_gpu_memory_used_bytes", busy] == (reserved + ONE_GIB_PROCESS_MIB) << 20
        assert gauges["dlc_gpu_utilization_pct", busy] == 63
        assert (gauges["dlc_gpu_idle", idle], gauges["dlc_gpu_idle", busy]) == (1, 0)
        assert gauges["dlc_user_gpus_idle", ("alice",)] == 1
        assert gauges["dlc_job_gpus_allocated", (job.job_id,)] == 2

        snapshot = add_usage(build_snapshot(core.all_jobs(), core.cluster(), "alice", False,
                                            time.time(), {}, {}), core)  # fmt: skip
        (agent,) = snapshot["agents"]
        used = {g["index"]: g["used"] for g in agent["gpus"]}
        assert used[GPUS[1]]["util_pct"] == 0 and used[GPUS[1]]["mem_used_mib"] == reserved + 700
        assert used[GPUS[0]]["mem_used_mib"] == reserved + ONE_GIB_PROCESS_MIB
        assert snapshot["jobs"][0]["usage"]["mem_used_mib"] == ONE_GIB_PROCESS_MIB
    finally:
        if server is not None:
            server.stop()
        runner.kill(task_id)
        with sink.cond:
            sink.cond.wait_for(lambda: sink.terminal(), 60)
        runner.join(60)
    core.on_status({"task_id": {"value": task_id}, "state": "TASK_KILLED",
                    "agent_id": {"value": "a1"}})  # fmt: skip
    assert core.job_usage(job.job_id) is None and core.gpu_usage() == {}
    assert not [k for k in _gauges(metrics) if k[0] == "dlc_gpu_utilization_pct"]
    assert sampler.report() is None  # the executor forgot the ended task
    sampler.stop()
