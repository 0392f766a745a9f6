"""Placing GPU shares from the offers' gpu_mem/gpu_core ranges (issue 12)."""

from __future__ import annotations

from dlc.mesos.agents import decode_agents
from dlc.mesos.offers import offer_view
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.allocator.shares import ShareRequest, WorkloadMix
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.topology import gpu_shares
from dlc.topology.gpu_shares import STRIDE
from tests.scheduler.helpers import offer, place

GIB = 1024


def ranged_offer(oid, agent, gpus=8, mem_gib=32, used=None, sharing="mps", whole_taken=()):
    """An offer whose agent advertises ranges; ``used``: GPU -> (MiB, milli) shares hold."""
    used = used or {}
    free_ids = [i for i in range(gpus) if i not in whole_taken and i not in used]
    body = offer(oid, agent, free_ids + sorted(used), attrs={"dlc_sharing": sharing})
    mem, core = [], []
    for i in range(gpus):
        if i in whole_taken:
            continue
        mib, milli = used.get(i, (0, 0))
        if mib < mem_gib * GIB:
            mem.append((i * STRIDE + mib, i * STRIDE + mem_gib * GIB - 1))
        if milli < 1000:
            core.append((i * STRIDE + milli, i * STRIDE + 999))
    body["resources"] += [
        gpu_shares.ranges_json(gpu_shares.GPU_MEM, tuple(mem)),
        gpu_shares.ranges_json(gpu_shares.GPU_CORE, tuple(core)),
    ]
    return body


def share_job(job_id, **spec):
    return Job(job_id, "alice", JobSpec.from_dict({"image": "busybox", "cpus": 0.1,
                                                    "mem_mib": 64, **spec}))  # fmt: skip


def test_a_memory_share_takes_sub_ranges_of_one_gpu_and_no_gpus():
    result = place([ranged_offer("o1", "a1")], [share_job("j1", gpu_memory="4G")])
    (launch,) = result.launches
    assert launch.gpu_ids == () and launch.share is not None
    assert (launch.share.memory_mib, launch.share.core_milli) == (4096, 0)
    assert launch.share.backend == "mps"
    index = launch.share.gpu_index
    assert launch.gpu_take.mem == ((index * STRIDE, index * STRIDE + 4095),)
    assert launch.gpu_take.core == ()
    info = build_task_info(result_job := share_job("j1", gpu_memory="4G"), launch)
    del result_job
    names = [r["name"] for r in info["resources"]]
    assert "gpus" not in names and "gpu_ids" not in names and "gpu_mem" in names


def test_a_fraction_takes_that_share_of_compute_and_memory():
    result = place([ranged_offer("o1", "a1")], [share_job("j1", gpus=0.5)])
    share = result.launches[0].share
    assert (share.memory_mib, share.core_milli) == (16 * GIB, 500)


def test_shares_pack_onto_an_already_shared_gpu():
    # GPU 5 already holds a 4 GiB share: the next share goes there, GPUs 0-4, 6, 7 stay whole
    offers = [ranged_offer("o1", "a1", used={5: (4096, 0)})]
    result = place(offers, [share_job("j1", gpu_memory="4G")])
    assert result.launches[0].share.gpu_index == 5
    assert result.launches[0].gpu_take.mem == ((5 * STRIDE + 4096, 5 * STRIDE + 8191),)


def test_shares_pack_across_agents_onto_the_shared_one():
    offers = [ranged_offer("o1", "a1"), ranged_offer("o2", "a2", used={3: (8192, 250)})]
    result = place(offers, [share_job("j1", gpus=0.25)])
    assert (result.launches[0].agent_id, result.launches[0].share.gpu_index) == ("a2", 3)


def test_one_round_packs_many_shares_without_giving_anything_twice():
    jobs = [share_job(f"j{k}", gpu_memory="4G") for k in range(10)]
    result = place([ranged_offer("o1", "a1")], jobs)
    taken = [r for launch in result.launches for r in launch.gpu_take.mem]
    assert len(result.launches) == 10
    assert len(gpu_shares.normalise(taken)) <= 2  # contiguous: packed, not spread
    assert sum(e - b + 1 for b, e in taken) == 10 * 4096
    assert {launch.share.gpu_index for launch in result.launches} == {0, 1}


def test_whole_gpu_jobs_skip_shared_gpus_and_take_whole_blocks():
    offers = [ranged_offer("o1", "a1", gpus=2, used={0: (4096, 0)})]
    result = place(offers, [Job("w", "bob", JobSpec.from_dict({"image": "busybox", "gpus": 1}))])
    (launch,) = result.launches
    assert launch.gpu_ids == (1,) and launch.share is None
    assert launch.gpu_take.mem == ((STRIDE, STRIDE + 32 * GIB - 1),)
    assert launch.gpu_take.core == ((STRIDE, STRIDE + 999),)
    two = place(offers, [Job("w2", "bob", JobSpec.from_dict({"image": "busybox", "gpus": 2}))])
    assert two.launches == [] and "w2" in two.waiting


def test_agents_without_ranges_are_unchanged_and_take_no_shares():
    result = place([offer("o1", "a1", [0, 1])], [Job("w", "bob", JobSpec.from_dict(
        {"image": "busybox", "gpus": 1}))])  # fmt: skip
    assert result.launches[0].gpu_take == gpu_shares.GpuRanges()
    refused = place([offer("o1", "a1", [0, 1])], [share_job("s", gpus=0.5)])
    assert refused.launches == [] and "shares" in refused.waiting["s"]


def test_a_full_gpu_set_makes_the_next_share_wait_with_a_reason():
    used = {i: (32 * GIB, 0) for i in range(8)}
    result = place([ranged_offer("o1", "a1", used=used)], [share_job("j", gpu_memory="4G")])
    assert result.launches == [] and "4 GiB" in result.waiting["j"]


def test_jobs_and_status_show_the_share():
    from dlc.cli.job_view import gpus, placement
    from dlc.cli.status_cmd import describe
    from dlc.scheduler.jobs.job import TaskPlacement

    task = TaskPlacement("j.0.0", "a1", "h1", (), share_gpu=2, share_memory_mib=4096)
    body = {"id": "j", "user": "u", "state": "running", "framework": None, "image": "x",
            "gpus": 1, "nodes": 1, "gpu_memory": 4096, "priority": 0, "attempt": 1,
            "failures": 0, "retries": 0, "command": [], "message": "",
            "tasks": [task.to_dict()]}  # fmt: skip
    assert gpus(body) == "4 GiB of GPU 2" and placement(body) == "h1:2"
    assert "4 GiB of GPU 2 (4096 MiB, compute shared without a floor)" in "\n".join(describe(body))
    half = TaskPlacement("j.0.0", "a1", "h1", (), share_gpu=2, share_memory_mib=16384,
                         share_core_milli=500)  # fmt: skip
    assert half.share_text == "0.5 of GPU 2"
    assert gpus({**body, "tasks": [half.to_dict()]}) == "0.5 of GPU 2"
    queued = {**body, "tasks": [], "gpu_memory": None, "gpu_fraction": 0.5}
    assert gpus(queued) == "0.5"


def test_a_share_and_a_whole_gpu_in_one_round_never_meet_on_a_gpu():
    whole = Job("w", "bob", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    for order in ([share_job("s", gpus=0.5), whole], [whole, share_job("s", gpus=0.5)]):
        result = place([ranged_offer("o1", "a1", gpus=2)], order)
        share = next(x for x in result.launches if x.share is not None)
        full = next(x for x in result.launches if x.share is None)
        assert full.gpu_ids != (share.share.gpu_index,)


def test_an_agent_whose_ranges_shares_took_entirely_has_no_whole_gpu():
    from dlc.scheduler.placement.decide import DecideRequest, decide
    from dlc.scheduler.placement.inventory import Inventory
    from dlc.scheduler.placement.model import PlacementConfig

    inventory = Inventory()
    totals = {"cpus": 16, "mem": 65536, "gpus": 1, "gpu_ids": "{0}", "gpu_mem": "[0-32767]",
              "gpu_core": "[0-999]"}  # fmt: skip
    inventory.replace_agents(
        decode_agents([{"id": "a1", "hostname": "h", "total_resources": totals}])
    )
    # shares hold all of GPU 0's memory and compute: the offer still lists gpu_ids {0}
    view = offer_view(offer("o1", "a1", [0]))
    whole = Job("w", "bob", JobSpec.from_dict({"image": "busybox", "gpus": 1}))
    decision = decide(
        DecideRequest(
            queue=[whole], inventory=inventory, offers=[view], config=PlacementConfig(), now=0.0
        )
    )
    assert decision.launches == [] and "w" in decision.waiting


def test_equal_choices_go_to_the_agent_with_fewer_whole_gpus():
    # both agents have a GPU holding a 4 GiB share; a2 also has two whole GPUs taken, so
    # packing there keeps a1's seven whole GPUs (and its NVLink quads) free
    offers = [
        ranged_offer("o1", "a1", used={2: (4096, 0)}),
        ranged_offer("o2", "a2", used={6: (4096, 0)}, whole_taken=(0, 1)),
    ]
    result = place(offers, [share_job("j1", gpu_memory="4G")])
    assert (result.launches[0].agent_id, result.launches[0].share.gpu_index) == ("a2", 6)


def _shares_mix(milli: int) -> WorkloadMix:
    """A mix of shares of ``milli`` thousandths only (what a core sees with a queue of them)."""
    shape = ShareRequest(cpu_milli=100, mem_mib=0, num_gpus=1, gpu_milli=milli)
    return WorkloadMix((shape,), (10.0,))


def test_a_share_is_scored_against_the_mix_the_caller_sees():
    # a1's only GPU has 0.5 free, a2's 0.7; a 0.2 share. Against the queued and running mix
    # (shares of 0.5, issue 26) it goes to a2 and leaves a1's 0.5 for the next 0.5 share;
    # against "more shares like it and whole GPUs" it would fill a1 to 0.3, which fits no 0.5
    offers = [
        ranged_offer("o1", "a1", gpus=2, mem_gib=16, used={0: (8192, 500)}, whole_taken=(1,)),
        ranged_offer("o2", "a2", gpus=2, mem_gib=16, used={0: (4915, 300)}, whole_taken=(1,)),
    ]
    live = place(offers, [share_job("j1", gpus=0.2)], mix=_shares_mix(500))
    assert (live.launches[0].agent_id, live.launches[0].share.gpu_index) == ("a2", 0)
    # no mix given: the default for shares (more like it and whole GPUs) packs a1
    assert place(offers, [share_job("j1", gpus=0.2)]).launches[0].agent_id == "a1"
