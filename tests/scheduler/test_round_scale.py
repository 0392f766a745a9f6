"""What keeps an offer round and a submit cheap at openb scale (issue 26), and that the
shortcuts decide exactly what the long way did."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import Job, JobSpec, JobState
from dlc.scheduler.placement import share_placement
from dlc.scheduler.placement.inventory import AgentTotals, Inventory
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer, place
from tests.scheduler.placement.test_share_placement import ranged_offer, share_job


def _busy_offers(rng: random.Random, agents: int) -> list[dict]:
    offers = []
    for n in range(agents):
        used = {i: (rng.randrange(0, 30) * 1024, rng.randrange(0, 1000))
                for i in range(8) if rng.random() < 0.7}  # fmt: skip
        offers.append(ranged_offer(f"o{n}", f"a{n:03d}", used=used))
    return offers


def _placed(result) -> list[tuple]:
    return [(x.job_id, x.agent_id, x.share.gpu_index if x.share else x.gpu_ids)
            for x in result.launches]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_share_room_index_places_exactly_as_a_full_scan(seed, monkeypatch):
    rng = random.Random(seed)
    offers = _busy_offers(rng, 12)
    queue = []
    for n in range(200):
        if rng.random() < 0.8:
            queue.append(share_job(f"s{n:03d}", gpus=rng.choice([0.1, 0.25, 0.5, 0.7, 0.9])))
        else:
            queue.append(Job(f"w{n:03d}", "bob", JobSpec(image="busybox", gpus=rng.choice([1, 2]),
                                                         cpus=0.1, mem_mib=64)))  # fmt: skip
    config = PlacementConfig("first-fit")
    indexed = place(offers, queue, config)

    class NoIndex(share_placement.ShareRoom):
        def covers(self, slots):
            return False  # every share scans every agent, as before the index

    monkeypatch.setattr(share_placement, "ShareRoom", NoIndex)
    scanned = place(offers, queue, config)
    assert _placed(indexed) == _placed(scanned)
    assert indexed.waiting == scanned.waiting
    assert len(indexed.launches) > 20 and indexed.waiting  # some fit, some wait


def test_a_share_reads_each_agent_state_once_across_rounds(monkeypatch):
    full = {i: (0, 1000 - 50) for i in range(8)}  # 50 thousandths left on each GPU
    offers = [ranged_offer(f"o{n}", f"a{n:03d}", used=full) for n in range(60)]
    offers.append(ranged_offer("o-free", "a-free"))
    read = []
    amounts = share_placement._slot_amounts

    def counting(slot, topology):
        read.append(slot.agent_id)
        return amounts(slot, topology)

    monkeypatch.setattr(share_placement, "_slot_amounts", counting)
    memo = RoundMemo()  # a core's, kept across its rounds
    queue = [share_job("s1", gpus=0.5), share_job("s2", gpus=0.5)]
    result = place(offers, queue, PlacementConfig("first-fit"), memo=memo)
    assert [x.agent_id for x in result.launches] == ["a-free", "a-free"]
    # the 60 alike agents are one state, read once; a-free before and after each share
    assert read == ["a000", "a-free", "a-free", "a-free"]
    read.clear()
    again = place(offers, queue, PlacementConfig("first-fit"), memo=memo)  # the next round
    assert _placed(again) == _placed(result)
    assert read == []  # nothing changed since: no agent is read again
    place(offers, queue, PlacementConfig("first-fit"), memo=RoundMemo())  # another core's
    assert read == ["a000", "a-free", "a-free", "a-free"]  # reads for itself


def test_a_round_writes_its_waiting_reasons_in_one_transaction(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda s: (s.image, None))  # fmt: skip
    core.update_agents([{"id": "a1", "hostname": "h1", "active": True,
                         "total_resources": {"cpus": 16, "mem": 65536,
                                             "gpu_ids": "{0,1,2,3,4,5,6,7}"}}])  # fmt: skip
    jobs = [core.submit("alice", JobSpec(image="busybox", gpus=8)) for _ in range(30)]
    statements = []
    store._db.set_trace_callback(statements.append)
    core.on_offers([offer("o1", "a1", [0, 1])])  # 2 GPUs free: all 30 wait
    store._db.set_trace_callback(None)
    assert sum(s.startswith("BEGIN") for s in statements) == 1
    for job in jobs:
        stored = store.get_job(job.job_id)
        assert stored.state is JobState.QUEUED
        assert stored.message.startswith("waiting: no offer has 8 free GPUs")
        assert [state for _, state, _ in store.history(job.job_id)] == ["queued"]
    assert core.queued_jobs()[0].message == stored.message  # memory as stored
    store.close()
    again = SchedulerCore(JobStore(tmp_path / "db"), CoreConfig(), lambda s: (s.image, None))
    assert again.queued_jobs()[0].message.startswith("waiting: no offer has 8 free GPUs")


def test_admission_answers_follow_the_agents_and_tell_shares_from_whole_gpus():
    inventory = Inventory()
    plain = AgentTotals("a1", "h1", frozenset(range(4)), 16, 65536, exact=True)
    inventory.replace_agents([])
    inventory._set(plain)
    whole, share = JobSpec(image="x", gpus=1), JobSpec(image="x", gpus=1, gpu_fraction=0.5)
    assert inventory.impossible(whole) is None
    error = inventory.impossible(share)  # the agent takes no shares
    assert isinstance(error, JobSpecError) and error.field == "gpus"
    assert inventory.impossible(share) is not error  # a fresh error each time
    assert str(inventory.impossible(share)) == str(error)
    inventory._set(AgentTotals("a2", "h2", frozenset({0}), 16, 65536, exact=True,
                               gpu_memory={0: 16384}))  # fmt: skip
    assert inventory.impossible(share) is None  # a new agent: answers asked again
    with pytest.raises(JobSpecError, match="8 GPUs|gpus"):
        inventory.check(JobSpec(image="x", gpus=8))


def test_submit_reads_no_agent_once_the_answer_is_known(monkeypatch):
    inventory = Inventory()
    for n in range(50):
        inventory._set(AgentTotals(f"a{n}", "h", frozenset(range(8)), 64, 1 << 20, exact=True))
    calls = []
    meets = Inventory._meets
    monkeypatch.setattr(Inventory, "_meets", lambda self, *a: calls.append(1) or meets(self, *a))
    for _ in range(20):
        inventory.check(JobSpec(image="x", gpus=2))
    assert 0 < len(calls) <= 50 * 8  # one scan (8 fields, vendor first) for twenty submits


def test_the_reloaded_queue_counts_each_users_jobs(tmp_path):
    config = CoreConfig(placement=PlacementConfig("first-fit"), max_queued_per_user=2)
    core = SchedulerCore(JobStore(tmp_path / "db"), config, lambda s: (s.image, None))
    for _ in range(2):
        core.submit("alice", JobSpec(image="busybox", gpus=1))
    core.reload()
    with pytest.raises(Exception, match="alice already has 2 jobs queued"):
        core.submit("alice", JobSpec(image="busybox", gpus=1))
    core.submit("bob", JobSpec(image="busybox", gpus=1))
    core.store.close()


def test_sqlite_save_messages_changes_only_the_message(tmp_path):
    store = JobStore(tmp_path / "db")
    job = store.add_job(Job("j1", "alice", JobSpec(image="busybox", gpus=1)))
    store.save_messages([replace(job, message="waiting: x")])
    assert store.get_job("j1").message == "waiting: x"
    assert store.get_job("j1").spec == job.spec
    assert len(store.history("j1")) == 1  # a message alone is no history entry
    store.close()
