"""What offer rounds keep across rounds (issue 26): each cache gives the answers a fresh
computation gives, and forgets what changed (an agent whose offer changed is read again; a
job that starts or ends changes the mix; an inventory change changes impossibility)."""

from __future__ import annotations

import random
from collections import Counter

from dlc.mesos.codec import MesosCodec
from dlc.mesos.offers import offer_view
from dlc.scheduler.allocator.shares import MILLI
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.core.offer_views import OfferParser
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement import placer as placement
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.round_memo import RoundMemo
from dlc.scheduler.placement.share_placement import share_milli
from dlc.scheduler.placement.whole_score import counted_mix
from dlc.scheduler.tenancy.quotas import largest_gpu_memory
from dlc.store.memory import MemoryJobStore
from tests.scheduler.helpers import offer, place
from tests.scheduler.placement.test_round_indexes import _rows
from tests.scheduler.placement.test_share_placement import ranged_offer

FIRST_FIT = PlacementConfig("first-fit")


def _whole(job_id: str, gpus: int) -> Job:
    return Job(job_id, "alice", JobSpec(image="busybox", gpus=gpus, cpus=1, mem_mib=64))


def test_an_agent_whose_offer_changed_is_read_again():
    memo, parser = RoundMemo(), OfferParser(MesosCodec())
    views, _ = parser.parse([offer("o1", "a1", [0, 1, 2, 3])])
    first = place(views, [_whole("j1", 4)], FIRST_FIT, memo=memo)
    assert [x.gpu_ids for x in first.launches] == [(0, 1, 2, 3)]
    # the next round: the same agent offers two GPUs (its offer changed)
    views, _ = parser.parse([offer("o2", "a1", [2, 3])])
    second = place(views, [_whole("j2", 4)], FIRST_FIT, memo=memo)
    assert second.launches == [] and second.waiting["j2"] == "no offer has 4 free GPUs"
    third = place(views, [_whole("j3", 2)], FIRST_FIT, memo=memo)
    assert [(x.gpu_ids, x.offer_ids) for x in third.launches] == [((2, 3), ("o2",))]


def test_an_unchanged_offer_reuses_the_slot_under_its_new_offer_id():
    memo, parser = RoundMemo(), OfferParser(MesosCodec())
    views, _ = parser.parse([offer("o1", "a1", [0, 1])])
    place(views, [_whole("j1", 8)], FIRST_FIT, memo=memo)  # fits nowhere: nothing taken
    kept = memo.slot_state(views[0])
    assert kept is not None
    views, _ = parser.parse([offer("o2", "a1", [0, 1])])  # the same offer, a new id
    assert memo.slot_state(views[0]) is kept
    result = place(views, [_whole("j2", 2)], FIRST_FIT, memo=memo)
    assert [(x.gpu_ids, x.offer_ids) for x in result.launches] == [((0, 1), ("o2",))]
    # what the launch took is the round's: the next round starts from the offer again
    views, _ = parser.parse([offer("o3", "a1", [0, 1])])
    again = place(views, [_whole("j3", 2)], FIRST_FIT, memo=memo)
    assert [(x.gpu_ids, x.offer_ids) for x in again.launches] == [((0, 1), ("o3",))]


def test_a_view_parsed_again_with_equal_values_reuses_the_state_and_a_changed_one_not():
    """The kept state is found by comparing every field but the offer id (identity first,
    then value): a fresh parse of the same offer reuses it, one changed field does not."""
    memo = RoundMemo()
    body = offer("o1", "a1", [0, 1])
    place([offer_view(body)], [_whole("j1", 8)], FIRST_FIT, memo=memo)
    again = offer_view({**body, "id": {"value": "o2"}})
    kept = memo.slot_state(again)
    assert kept is not None and kept["free"] == frozenset({0, 1})
    fewer_cpus = offer_view(offer("o3", "a1", [0, 1], cpus=1.0))
    assert memo.slot_state(fewer_cpus) is None
    result = place([fewer_cpus], [_whole("j2", 2)], PlacementConfig("first-fit"), memo=memo)
    assert result.launches == [] and "cpus" in result.waiting["j2"]


def test_the_memo_places_as_a_fresh_read_over_random_rounds():
    rng = random.Random(7)
    memo, parser = RoundMemo(), OfferParser(MesosCodec())
    bodies = {f"a{n}": ranged_offer(f"o{n}", f"a{n}") for n in range(12)}
    for round_ in range(15):
        for agent in rng.sample(sorted(bodies), 3):  # some agents' offers change
            used = {i: (rng.randrange(0, 16) * 1024, rng.randrange(0, 900))
                    for i in range(8) if rng.random() < 0.4}  # fmt: skip
            bodies[agent] = ranged_offer("x", agent, used=used)
        offers = []
        for n, (_, body) in enumerate(sorted(bodies.items())):
            offers.append({**body, "id": {"value": f"r{round_}-{n}"}})
        queue = [_whole(f"w{round_}", rng.choice([1, 2, 4]))] + [
            Job(f"s{round_}-{k}", "alice", JobSpec.from_dict(
                {"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpus": rng.choice([0.3, 0.6])}))
            for k in range(3)
        ]  # fmt: skip
        views, _ = parser.parse(offers)
        kept = place(views, queue, FIRST_FIT, memo=memo)
        fresh = place(OfferParser(MesosCodec()).parse(offers)[0], queue, FIRST_FIT)
        assert kept.launches == fresh.launches
        assert kept.waiting == fresh.waiting and kept.declined == fresh.declined


def _recount(core: SchedulerCore):
    """The mix as a full recount of the queued jobs and running tasks (the old way)."""
    largest = largest_gpu_memory(core.inventory.agents()) or 0
    extra = int(core.config.placement.executor_cpus * 1000)
    counts: Counter = Counter()
    for job in core.state.queued.values():
        if job.spec.is_share:
            counts[(int(job.spec.cpus * 1000) + extra, share_milli(job.spec, largest), 1)] += 1
        elif job.spec.gpus:
            counts[(int(job.spec.cpus * 1000) + extra, MILLI, job.spec.gpus)] += job.spec.nodes
    for job, task, _ in core.state.running_tasks():
        if task.gpu_ids:
            counts[(int(job.spec.cpus * 1000) + extra, MILLI, len(task.gpu_ids))] += 1
        elif task.share_gpu is not None:
            agent = core.inventory.get(task.agent_id)
            total = (agent.gpu_memory.get(task.share_gpu) if agent else None) or largest
            counts[(int(job.spec.cpus * 1000) + extra, share_milli(job.spec, total), 1)] += 1
    return counted_mix(counts)


def _status(core: SchedulerCore, info: dict, state: str) -> None:
    core.on_status({"task_id": info["task_id"], "agent_id": info["agent_id"], "state": state,
                    "source": "SOURCE_EXECUTOR"})  # fmt: skip


def test_the_placement_mix_follows_launches_ends_and_kills():
    core = SchedulerCore(MemoryJobStore(), CoreConfig(placement=FIRST_FIT),
                         lambda spec: (spec.image, None))  # fmt: skip
    specs = [JobSpec(image="busybox", gpus=1), JobSpec(image="busybox", gpus=2, cpus=2),
             JobSpec.from_dict({"image": "busybox", "gpus": 0.5})]  # fmt: skip
    jobs = [core.submit("alice", specs[n % 3]) for n in range(9)]
    assert core.share_holds.placement_mix() == _recount(core)
    actions = core.on_offers([ranged_offer("o1", "a1", gpus=4)])
    infos = [i for _, batch in actions.accepts for i in batch]
    assert infos and core.share_holds.placement_mix() == _recount(core)
    for info in infos:
        _status(core, info, "TASK_RUNNING")
    assert core.share_holds.placement_mix() == _recount(core)
    _status(core, infos[0], "TASK_FINISHED")
    assert core.share_holds.placement_mix() == _recount(core)
    core.kill(jobs[-1].job_id, "alice")
    assert core.share_holds.placement_mix() == _recount(core)
    core.reload()
    assert core.share_holds.placement_mix() == _recount(core)


def test_impossibility_follows_the_inventory():
    core = SchedulerCore(MemoryJobStore(), CoreConfig(placement=FIRST_FIT),
                         lambda spec: (spec.image, None))  # fmt: skip
    agent = {"id": "a1", "hostname": "h1", "active": True,
             "total_resources": {"cpus": 16, "mem": 65536, "gpu_ids": "{0,1,2,3}"}}  # fmt: skip
    core.update_agents([agent])
    spec = JobSpec(image="busybox", gpus=4)
    assert core.state.impossible_reason(spec) is None
    assert core.state.impossible_reason(spec) is None  # kept
    smaller = {**agent, "total_resources": {**agent["total_resources"], "gpu_ids": "{0,1}"}}
    core.update_agents([smaller])
    assert core.state.impossible_reason(spec) is not None  # the same spec, asked again


def test_the_share_room_reads_again_the_rows_of_agents_whose_offer_changed(monkeypatch):
    rooms = []
    real = placement.new_share_room

    def capture(*args):
        rooms.append(real(*args))
        return rooms[-1]

    monkeypatch.setattr(placement, "new_share_room", capture)
    memo, parser = RoundMemo(), OfferParser(MesosCodec())
    used = {0: (1024, 100), 3: (2048, 300)}
    bodies = [ranged_offer(f"o{n}", f"a{n}", used=used) for n in range(4)]
    too_big = Job("s", "alice", JobSpec.from_dict({"image": "busybox", "gpu_memory": "64G"}))
    for round_, changed in enumerate([None, 1, 2, None]):
        if changed is not None:  # one agent's offer changes: a share more on GPU 5
            bodies[changed] = ranged_offer("x", f"a{changed}", used={**used, 5: (4096, 500)})
        offers = [{**b, "id": {"value": f"r{round_}-{n}"}} for n, b in enumerate(bodies)]
        result = place(parser.parse(offers)[0], [too_big], FIRST_FIT, memo=memo)
        assert not result.launches  # fits nowhere: the room stays as filled
        _rows(rooms[-1], rooms[-1].slots)  # every row as a fresh read of its slot
    assert memo.share_fill.states  # the fill was kept, and rows were copied from it


def test_decide_asks_impossibility_only_of_new_jobs_until_the_inventory_changes():
    from dlc.scheduler.placement.decide import DecideRequest, decide
    from dlc.scheduler.placement.inventory import Inventory

    inventory, asked = Inventory(), []

    def impossible_of(spec: JobSpec) -> str | None:
        asked.append(spec.gpus)
        return "too big" if spec.gpus > 4 else None

    memo = RoundMemo()
    queue = [_whole("j1", 2), _whole("j2", 8)]

    def round_of(jobs):
        asked.clear()
        return decide(DecideRequest(queue=jobs, inventory=inventory, offers=[],
                                    config=FIRST_FIT, now=0.0, impossible_of=impossible_of,
                                    memo=memo))  # fmt: skip

    first = round_of(queue)
    assert sorted(asked) == [2, 8] and first.impossible == {
        "j2": "impossible on the current agents: too big"
    }
    second = round_of([*queue, _whole("j3", 1)])
    assert asked == [1]  # only the new job; the others' answers kept
    assert second.impossible == first.impossible and "j1" in second.waiting
    inventory.version += 1  # an agent's totals changed: every job is asked again
    round_of(queue)
    assert sorted(asked) == [2, 8]
