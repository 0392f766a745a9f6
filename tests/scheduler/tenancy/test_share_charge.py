"""Memory shares are charged by the GPU they land on, and at admission by the smallest GPU.

Red-team finding 4 (docs/security.md): a ``--gpu-memory 16G`` share was charged against the
largest GPU of the whole cluster (80 GiB: 0.2 GPU), so a user limited to 1 GPU was admitted
five shares that each filled a whole 16 GiB GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlc.api.tenancy_routes import queue_view, quota_view
from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.tenancy.policy import Policy, Resources, UserLimits
from dlc.scheduler.tenancy.quotas import check_submit, job_gpus, usage_of
from dlc.scheduler.tenancy.share_charge import GpuSizes
from dlc.store.sqlite import JobStore
from dlc.topology.gpu_shares import STRIDE
from tests.scheduler.placement.test_share_placement import ranged_offer

GIB = 1024
MALLORY = Policy(limits={"mallory": UserLimits("mallory", max_gpus=1)})


def agent(agent_id: str, gpus: int, gib: int, pool: str | None = None) -> dict:
    """A ``/master/slaves`` entry whose GPUs each have ``gib`` GiB."""
    blocks = ",".join(f"{i * STRIDE}-{i * STRIDE + gib * GIB - 1}" for i in range(gpus))
    cores = ",".join(f"{i * STRIDE}-{i * STRIDE + 999}" for i in range(gpus))
    ids = ",".join(str(i) for i in range(gpus))
    return {"id": agent_id, "hostname": f"host-{agent_id}", "active": True,
            "attributes": {"dlc_pool": pool} if pool else {},
            "resources": {"cpus": 32.0, "mem": 131072.0, "gpus": float(gpus),
                          "gpu_ids": "{" + ids + "}", "gpu_mem": f"[{blocks}]",
                          "gpu_core": f"[{cores}]"}}  # fmt: skip


@pytest.fixture
def core(tmp_path):
    """Five 16 GiB GPUs on ``small`` and one 80 GiB GPU on ``big``; mallory may hold 1 GPU."""
    config = CoreConfig(placement=PlacementConfig("first-fit"))
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None))
    core.update_agents([agent("small", 5, 16), agent("big", 1, 80)])
    core.set_tenancy(MALLORY)
    return core


def share_16g(core) -> Job:
    spec = {"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpu_memory": "16G"}
    return core.submit("mallory", JobSpec.from_dict(spec))


def launched(core, jobs) -> list[Job]:
    return [j for j in (core.store.get_job(x.job_id) for x in jobs) if j.state != JobState.QUEUED]


def test_a_user_limited_to_one_gpu_gets_one_16g_share_on_a_16gib_gpu_and_no_more(core):
    jobs = [share_16g(core) for _ in range(5)]
    core.on_offers([ranged_offer("o1", "small", gpus=5, mem_gib=16)])
    (first,) = launched(core, jobs)  # the largest-GPU charge (0.2 each) let all five start
    assert first.tasks[0].agent_id == "small" and first.tasks[0].share_memory_mib == 16 * GIB
    # more rounds, with the 80 GiB GPU offered too: still nothing more for mallory
    for n in range(2, 4):
        core.on_offers([ranged_offer(f"s{n}", "small", gpus=5, mem_gib=16, used={0: (16 * GIB, 0)}),
                        ranged_offer(f"b{n}", "big", gpus=1, mem_gib=80)])  # fmt: skip
    assert len(launched(core, jobs)) == 1
    waiting = core.store.get_job(jobs[1].job_id).message
    assert "user mallory holds 1 of 1 GPUs allowed; this job needs 1" in waiting, waiting
    rows = {r.job.job_id: r for r in core.plan_queue(core.queued_jobs()).rows}
    assert not rows[jobs[1].job_id].admitted
    assert core.plan_queue().usage[("-", "default")].gpus == pytest.approx(1.0)
    # `dlc queue`/`dlc quota` and the dashboard's section say the same
    assert {r["gpus"] for r in queue_view(core)} == {1.0}
    (row,) = quota_view(core)["quotas"]
    assert row["used"]["gpus"] == pytest.approx(1.0) and row["waiting"]["gpus"] == 4.0


def _running_share(agent_id: str, gpu: int) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpu_memory": "16G"})
    task = TaskPlacement("t", agent_id, agent_id, (), "o", share_gpu=gpu, share_memory_mib=16 * GIB)
    return Job("r", "mallory", spec, JobState.RUNNING, tasks=(task,))


def test_a_running_share_is_charged_by_the_gpu_it_landed_on():
    agents = [SimpleNamespace(agent_id="small", attributes={}, gpu_memory={0: 16 * GIB}),
              SimpleNamespace(agent_id="big", attributes={}, gpu_memory={0: 80 * GIB})]  # fmt: skip
    sizes = GpuSizes.of(agents, lambda attributes: "default")
    assert job_gpus(MALLORY, _running_share("small", 0), sizes) == pytest.approx(1.0)
    assert job_gpus(MALLORY, _running_share("big", 0), sizes) == pytest.approx(0.2)
    queued = Job("q", "mallory", _running_share("big", 0).spec)
    assert job_gpus(MALLORY, queued, sizes) == pytest.approx(1.0)  # smallest GPU it may use
    usage = usage_of(MALLORY, [_running_share("big", 0)], sizes)
    assert usage[("-", "default")].gpus == pytest.approx(0.2)


def test_admission_charges_the_smallest_gpu_of_the_jobs_own_pool():
    agents = [
        SimpleNamespace(agent_id="s", attributes={"dlc_pool": "cheap"}, gpu_memory={0: 16 * GIB}),
        SimpleNamespace(agent_id="b", attributes={"dlc_pool": "train"}, gpu_memory={0: 80 * GIB}),
    ]
    sizes = GpuSizes.of(agents, lambda attributes: attributes.get("dlc_pool", "default"))
    spec = JobSpec.from_dict({"image": "busybox", "gpu_memory": "16G", "pool": "train"})
    capacity = {"train": Resources(1, 32, 1 << 20), "cheap": Resources(1, 32, 1 << 20)}
    limited = Policy(limits={"a": UserLimits("a", max_gpus=0.5)})
    check_submit(limited, "a", spec, capacity, sizes)  # 0.2 of an 80 GiB GPU
    with pytest.raises(JobSpecError, match="needs 1 GPUs but user a may hold at most 0.5"):
        check_submit(limited, "a", JobSpec.from_dict({**spec.to_dict(), "pool": "cheap"}),
                     capacity, sizes)  # fmt: skip
