"""``/metrics`` content after known event sequences, read back with prometheus-client's parser."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dlc.api.metrics import SchedulerMetrics
from dlc.scheduler.jobs.job import JobSpec
from dlc.topology.encoding import encode_topology
from tests.scheduler.helpers import offer, pairs_topology


def samples(metrics: SchedulerMetrics) -> dict[tuple[str, frozenset], float]:
    """``{(sample name, labels): value}`` of the exposition text, parsed as Prometheus does."""
    text = metrics.exposition().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def families(metrics: SchedulerMetrics) -> dict[str, str]:
    """Family name -> type; prometheus-client's ``*_created`` timestamps left out."""
    text = metrics.exposition().decode()
    found = text_string_to_metric_families(text)
    return {f.name: f.type for f in found if not f.name.endswith("_created")}


def agent_labels(agent: str, model: str) -> frozenset:
    return frozenset({"agent": agent, "hostname": f"host-{agent}", "model": model}.items())


def status(task_id: str, state: str, agent: str = "a1") -> dict:
    return {"task_id": {"value": task_id}, "state": state, "agent_id": {"value": agent}}


def submit(core, gpus: int):
    return core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": gpus}))


@pytest.mark.parametrize(
    ("nvlinked", "gpus", "p2p_label", "ratio"),
    [
        pytest.param({(0, 1)}, 2, "true", 1.0, id="nvlinked-pair-counts-as-p2p"),
        pytest.param(set(), 2, "false", 0.0, id="sys-pair-is-not-p2p"),
        pytest.param(set(), 1, None, None, id="single-gpu-job-not-counted"),
    ],
)
def test_submit_place_finish_sequence(monitored, clock, nvlinked, gpus, p2p_label, ratio):
    core, metrics = monitored
    attrs = {"dlc_topo": encode_topology(pairs_topology(2, nvlinked)), "gpu_model": "vTesla_V100"}
    job = submit(core, gpus)
    clock.now += 3.0  # the job waits 3 s for an offer
    actions = core.on_offers(
        [offer("o1", "a1", gpus=[0, 1], attrs=attrs), offer("o2", "a2", gpus=[], attrs={})]
    )
    [(_, [info])] = actions.accepts
    assert actions.declines == ["o2"]
    got = samples(metrics)
    assert got[("dlc_offers_received_total", frozenset())] == 2
    assert got[("dlc_offers_declined_total", frozenset())] == 1
    assert got[("dlc_queue_wait_seconds_count", frozenset())] == 1
    assert got[("dlc_queue_wait_seconds_sum", frozenset())] == pytest.approx(3.0)
    assert got[("dlc_queue_wait_seconds_bucket", frozenset({("le", "2.0")}))] == 0
    assert got[("dlc_queue_wait_seconds_bucket", frozenset({("le", "5.0")}))] == 1
    assert got[("dlc_placement_latency_seconds_count", frozenset())] == 1
    assert got[("dlc_agent_gpus", agent_labels("a1", "Tesla_V100"))] == 2
    assert got[("dlc_agent_gpus", agent_labels("a2", "unknown"))] == 0
    assert got[("dlc_agent_gpus_allocated", agent_labels("a1", "Tesla_V100"))] == gpus
    assert got[("dlc_jobs", frozenset({("state", "staging")}))] == 1
    if p2p_label is None:
        assert not any(name == "dlc_multi_gpu_placements_total" for name, _ in got)
        assert "dlc_placement_p2p_ratio" not in families(metrics)
    else:
        assert got[("dlc_multi_gpu_placements_total", frozenset({("p2p", p2p_label)}))] == 1
        assert got[("dlc_placement_p2p_ratio", frozenset())] == ratio

    task_id = info["task_id"]["value"]
    core.on_status(status(task_id, "TASK_RUNNING"))
    assert samples(metrics)[("dlc_jobs", frozenset({("state", "running")}))] == 1
    core.on_status(status(task_id, "TASK_FINISHED"))
    got = samples(metrics)
    assert got[("dlc_jobs", frozenset({("state", "finished")}))] == 1
    assert got[("dlc_jobs", frozenset({("state", "running")}))] == 0
    assert got[("dlc_agent_gpus_allocated", agent_labels("a1", "Tesla_V100"))] == 0
    assert core.store.get_job(job.job_id).state.value == "finished"


def test_metric_names_and_types_follow_prometheus_conventions(monitored):
    core, metrics = monitored
    submit(core, 1)
    core.on_offers([offer("o1", "a1", gpus=[0])])
    types = families(metrics)
    assert types == {
        "dlc_offers_received": "counter",
        "dlc_offers_declined": "counter",
        "dlc_queue_wait_seconds": "histogram",
        "dlc_placement_latency_seconds": "histogram",
        "dlc_multi_gpu_placements": "counter",
        "dlc_agent_gpus": "gauge",
        "dlc_agent_gpus_allocated": "gauge",
        "dlc_gpu_memory_allocated_bytes": "gauge",
        "dlc_gpu_compute_allocated_ratio": "gauge",
        "dlc_gpu_shares": "gauge",
        # allocated versus used (families present, empty until an executor reports)
        "dlc_gpu_allocated": "gauge",
        "dlc_gpu_utilization_pct": "gauge",
        "dlc_gpu_memory_used_bytes": "gauge",
        "dlc_gpu_idle": "gauge",
        "dlc_group_gpus_allocated": "gauge",
        "dlc_group_gpus_idle": "gauge",
        "dlc_group_gpu_utilization_pct": "gauge",
        "dlc_group_gpu_memory_used_bytes": "gauge",
        "dlc_jobs": "gauge",
        "dlc_status_updates_ignored": "counter",
        "dlc_consolidation_moves": "counter",
        "dlc_consolidation_lost_gpu_hours": "counter",
        "dlc_build_info": "gauge",
    }
    # gauges never end in _total (reserved for counters); no user or job in any label
    text = metrics.exposition().decode()
    assert "alice" not in text and "busybox" not in text


def test_each_scheduler_has_its_own_registry():
    one = SchedulerMetrics()
    two = SchedulerMetrics()
    one.offers_received.inc(5)
    assert samples(one)[("dlc_offers_received_total", frozenset())] == 5
    assert samples(two)[("dlc_offers_received_total", frozenset())] == 0


def test_requeued_job_waits_from_its_requeue(monitored, clock):
    core, metrics = monitored
    job = core.submit("alice", JobSpec.from_dict({"image": "busybox", "gpus": 1, "retries": 1}))
    [(_, [info])] = core.on_offers([offer("o1", "a1", gpus=[0])]).accepts
    core.on_status(status(info["task_id"]["value"], "TASK_RUNNING"))
    clock.now += 100.0
    core.on_status(status(info["task_id"]["value"], "TASK_FAILED"))
    assert core.store.get_job(job.job_id).attempt == 1
    clock.now += 7.0
    [(_, [again])] = core.on_offers([offer("o2", "a1", gpus=[0])]).accepts
    assert again["task_id"]["value"] == f"{job.job_id}.1.0"
    got = samples(metrics)
    assert got[("dlc_queue_wait_seconds_count", frozenset())] == 2
    # first wait 0 s, second 7 s from the re-queue (not 107 s from the submit)
    assert got[("dlc_queue_wait_seconds_sum", frozenset())] == pytest.approx(7.0)
