"""Facts of the known agents kept per inventory version (each offer round read all 1,213
agents for them, issue 26): the shareable agents (offer views are marked by them) and the
largest GPU memory (the placement mix sizes shares by it); a change of any agent's totals is
seen at once."""

from __future__ import annotations

from dlc.mesos.agents import decode_agents
from dlc.mesos.offers import offer_view
from dlc.scheduler.placement.inventory import Inventory
from dlc.scheduler.placement.model import OfferView

from ..helpers import offer


def _view(oid: str, agent: str, share_blocks: bool) -> OfferView:
    raw = offer(oid, agent, [0, 1])
    if share_blocks:
        raw["resources"].append({"name": "gpu_mem", "type": "RANGES", "ranges": {"range": [
            {"begin": i << 20, "end": (i << 20) + 1023} for i in range(2)]}})  # fmt: skip
    return offer_view(raw)


def _slave(agent: str, share_blocks: bool) -> dict:
    resources = {"cpus": 8.0, "mem": 65536.0, "gpus": 2.0, "gpu_ids": "{0, 1}"}
    if share_blocks:
        resources["gpu_mem"] = "[0-1023, 1048576-1049599]"
    return {"id": agent, "hostname": agent, "active": True, "resources": resources}


def test_the_shareable_agents_follow_every_change_of_the_totals():
    inventory = Inventory()
    assert inventory.shareable_ids() == frozenset()

    inventory.note_offers([_view("o1", "a1", share_blocks=False)])
    assert inventory.shareable_ids() == frozenset()
    inventory.note_offers([_view("o2", "a2", share_blocks=True)])  # an offer teaches it
    assert inventory.shareable_ids() == {"a2"}

    inventory.replace_agents(decode_agents([_slave("a1", True), _slave("a3", False)]))  # a2 left
    assert inventory.shareable_ids() == {"a1"}
    inventory.replace_agents(decode_agents([_slave("a1", False)]))
    assert inventory.shareable_ids() == frozenset()


def test_a_copy_answers_for_its_own_agents():
    inventory = Inventory()
    inventory.replace_agents(decode_agents([_slave("a1", True)]))
    assert inventory.shareable_ids() == {"a1"}
    copy = inventory.copy()
    inventory.replace_agents(decode_agents([_slave("a2", True)]))
    assert copy.shareable_ids() == {"a1"}
    assert inventory.shareable_ids() == {"a2"}


def test_the_largest_gpu_memory_follows_the_agents(tmp_path):
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.scheduler.placement.model import PlacementConfig
    from dlc.store.sqlite import JobStore

    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")))
    assert core.share_holds.largest_gpu_mib() == 0  # the kept fact itself
    core.update_agents([_slave("a1", True)])
    assert core.share_holds.largest_gpu_mib() == 1024
    bigger = _slave("a2", False)
    bigger["resources"]["gpu_mem"] = "[0-2047]"
    core.update_agents([_slave("a1", True), bigger])
    assert core.share_holds.largest_gpu_mib() == 2048
    core.update_agents([_slave("a1", False)])
    assert core.share_holds.largest_gpu_mib() == 0
    store.close()


def _exact_view(oid: str, gpus: list[int], mem_end: int = 1023, blocks=None) -> OfferView:
    raw = offer(oid, "a1", gpus, attrs={"gpu_model": "A100"})
    raw["resources"].append({"name": "gpu_mem", "type": "RANGES", "ranges": {"range": [
        {"begin": i << 20, "end": (i << 20) + mem_end} for i in blocks or gpus]}})  # fmt: skip
    return offer_view(raw)


def test_an_offer_grows_an_exact_agent_only_by_what_it_teaches():
    """An offer that teaches an exact agent nothing leaves its totals and the version as
    they are (issue 26: checked without copying the totals); a new GPU id, or more memory
    on a GPU than known, still grows them."""
    inventory = Inventory()
    slave = _slave("a1", share_blocks=True)
    slave["attributes"] = {"gpu_model": "A100"}
    inventory.replace_agents(decode_agents([slave]))
    before, version = inventory.get("a1"), inventory.version
    inventory.note_offers([_exact_view("o1", [0, 1])])
    inventory.note_offers([_exact_view("o2", [1], mem_end=511)])
    assert inventory.get("a1") is before and inventory.version == version

    inventory.note_offers([_exact_view("o3", [1, 3], blocks=[1])])  # GPU 3: a new id
    assert inventory.get("a1").gpu_ids == {0, 1, 3} and inventory.version > version
    inventory.note_offers([_exact_view("o3", [1, 2])])  # GPU 2: id and memory unknown
    grown = inventory.get("a1")
    assert grown.gpu_ids == {0, 1, 2, 3} and grown.gpu_memory[2] == 1024
    assert inventory.version > version
    version = inventory.version
    inventory.note_offers([_exact_view("o4", [0], mem_end=2047)])  # more memory on GPU 0
    assert inventory.get("a1").gpu_memory[0] == 2048 and inventory.version > version
