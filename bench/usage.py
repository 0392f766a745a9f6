"""Allocated versus used at scale: what the usage reports cost the scheduler.

A core with ``--agents`` 8-GPU agents, every GPU held by a running 1-GPU job (in memory, no
SQLite), each agent's executor sending one report for its 8 tasks (a framework message, as
``dlc/executor/usage.py`` does every 30 s). Measured: the report's size, ``on_usage`` per
report, one ``/metrics`` exposition with the usage families (per-user and per-job labels on),
the same scrape without them, and the dashboard snapshot with
:func:`~dlc.web.snapshot.add_usage`. Prints a table and writes JSON (``--json``, e.g.
``bench/results/usage.json``). Times are medians of 5; on a shared machine compare the two
scrape figures of one run rather than runs.

    python bench/usage.py --agents 100
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.api.metrics import SchedulerMetrics  # noqa: E402
from dlc.mesos.codec import MesosCodec  # noqa: E402
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore  # noqa: E402
from dlc.scheduler.jobs.job import JobSpec  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.scheduler.tasks.usage import GpuUsage, encode_report  # noqa: E402
from dlc.store.memory import MemoryJobStore  # noqa: E402
from dlc.web.snapshot import add_usage, build_snapshot  # noqa: E402
from tests.scheduler.helpers import offer  # noqa: E402

H100_MIB = 81559


def _cluster(agents: int, users: int):
    store = MemoryJobStore()
    metrics = SchedulerMetrics(tenant_labels=True)
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda spec: (spec.image, None), metrics=metrics,
                         codec=MesosCodec())  # fmt: skip
    for i in range(agents * 8):
        core.submit(f"user{i % users}", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    tasks: dict[str, list[tuple[str, int]]] = {}
    offers = [offer(f"o{a}", f"a{a}", gpus=list(range(8)), cpus=64, mem=512000)
              for a in range(agents)]  # fmt: skip
    for _, infos in core.on_offers(offers).accepts:
        for info in infos:
            task_id, agent = info["task_id"]["value"], info["agent_id"]["value"]
            gpu = int(info["resources"][-1]["set"]["item"][0])
            tasks.setdefault(agent, []).append((task_id, gpu))
            core.on_status({"task_id": {"value": task_id}, "state": "TASK_RUNNING",
                            "agent_id": {"value": agent}})  # fmt: skip
    return core, metrics, tasks


def _timed(func, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # agents without dlc_topo: one warning each, not the point
    core, metrics, tasks = _cluster(args.agents, args.users)
    now = time.time()
    reports = {
        agent: encode_report(
            {t: [GpuUsage(g, 42.5, 97, 30000, H100_MIB, 29500, 6, now)] for t, g in held}
        )  # fmt: skip
        for agent, held in tasks.items()
    }
    start = time.perf_counter()
    kept = sum(core.on_usage(agent, data) for agent, data in reports.items())
    per_report = (time.perf_counter() - start) / len(reports)
    scrape = _timed(metrics.exposition, 5)
    size = len(metrics.exposition())  # with per-user and per-job series
    metrics.tenant_labels = False  # the default: per-GPU and per-group usage only
    scrape_default = _timed(metrics.exposition, 5)
    source, metrics._usage = metrics._usage, None  # the same scrape without the usage families
    baseline = _timed(metrics.exposition, 5)
    metrics._usage = source
    snapshot = _timed(lambda: add_usage(build_snapshot(core.all_jobs(), core.cluster(), "u",
                                                       True, now, {}, {}), core), 5)  # fmt: skip
    figures = {
        "agents": args.agents,
        "gpus": args.agents * 8,
        "tasks_reported": kept,
        "report_bytes_8_gpus": max(len(r) for r in reports.values()),
        "on_usage_ms_per_report": round(per_report * 1000, 3),
        "metrics_scrape_ms_tenant_labels": round(scrape * 1000, 1),
        "metrics_scrape_ms_default": round(scrape_default * 1000, 1),
        "metrics_scrape_ms_without_usage": round(baseline * 1000, 1),
        "metrics_bytes_tenant_labels": size,
        "snapshot_with_usage_ms": round(snapshot * 1000, 1),
        "messages_per_s_at_30s": round(args.agents / 30, 2),
    }
    for key, value in figures.items():
        print(f"{key:28} {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
