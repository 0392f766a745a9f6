"""The emulated master's roles: per-role offers, SUPPRESS/REVIVE per role, RESERVE/UNRESERVE,
one role per ACCEPT (what tests/contract/test_roles_contract.py checks end to end)."""

from __future__ import annotations

from typing import Any

import pytest

from dlc.mesos.emulator.master import Master
from dlc.mesos.resources import Resources
from tests.mesos.emulator.test_emulator_master import Clock, FakeRuntime, call, drain, of_type

MULTI = [{"type": "GPU_RESOURCES"}, {"type": "MULTI_ROLE"}, {"type": "RESERVATION_REFINEMENT"}]


@pytest.fixture
def master() -> Master:
    master = Master("m1", FakeRuntime(), lambda: "127.0.0.1:5050", clock=Clock())
    master.add_agent(
        "host-a",
        Resources.parse("cpus(dlc):1;cpus(batch):1;cpus:2;mem:4096;gpus(dlc):2;gpu_ids(dlc):{0,1};"
                        "gpus:2;gpu_ids:{2,3}"),
        [],
    )  # fmt: skip
    return master


def subscribe(master: Master, **info: Any):
    body = {"user": "u", "name": "n", "capabilities": MULTI, **info}
    stream = master.subscribe({"type": "SUBSCRIBE", "subscribe": {"framework_info": body}})
    return drain(stream)[0]["subscribed"]["framework_id"]["value"], stream


def offers(master: Master, stream) -> list[dict[str, Any]]:
    master.allocator.request()
    master.tick()
    return [o for e in of_type(drain(stream), "OFFERS") for o in e["offers"]["offers"]]


def _by_role(offers_: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["allocation_info"]["role"]: o for o in offers_}


def test_one_offer_per_role_with_its_reservations_and_allocation_info(master):
    _, stream = subscribe(master, roles=["dlc", "batch"])
    got = _by_role(offers(master, stream))
    assert set(got) == {"dlc", "batch"}
    dlc = {(r["name"], str(r.get("reservations"))) for r in got["dlc"]["resources"]}
    assert ("gpus", str([{"type": "STATIC", "role": "dlc"}])) in dlc
    assert ("gpus", "None") in dlc  # the unreserved GPUs went with the first role's offer
    batch = got["batch"]["resources"]
    assert [r["name"] for r in batch] == ["cpus"]
    assert batch[0]["reservations"] == [{"type": "STATIC", "role": "batch"}]
    assert all(r["allocation_info"] == {"role": "batch"} for r in batch)


def test_suppress_and_revive_one_role(master):
    framework_id, stream = subscribe(master, roles=["dlc", "batch"])
    offers(master, stream)
    master.rescind_offers(lambda o: True, notify=False)
    call(master, framework_id, stream, "SUPPRESS", roles=["dlc"])
    assert set(_by_role(offers(master, stream))) == {"batch"}
    master.rescind_offers(lambda o: True, notify=False)
    call(master, framework_id, stream, "REVIVE", roles=["dlc"])
    assert set(_by_role(offers(master, stream))) == {"dlc", "batch"}


def test_accept_of_offers_of_two_roles_is_dropped(master):
    framework_id, stream = subscribe(master, roles=["dlc", "batch"])
    both = offers(master, stream)
    task = {"task_id": {"value": "t1"}, "agent_id": both[0]["agent_id"], "name": "t1",
            "command": {"value": "true"}, "resources": [
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}}]}  # fmt: skip
    call(master, framework_id, stream, "ACCEPT", offer_ids=[o["id"] for o in both],
         operations=[{"type": "LAUNCH", "launch": {"task_infos": [task]}}])  # fmt: skip
    [update] = of_type(drain(stream), "UPDATE")
    assert update["update"]["status"]["reason"] == "REASON_INVALID_OFFERS"
    assert "several roles" in update["update"]["status"]["message"]


def test_reserve_then_other_roles_never_see_it_and_unreserve_gives_it_back(master):
    framework_id, stream = subscribe(master, roles=["dlc"])
    [offer] = offers(master, stream)
    dynamic = [{"type": "DYNAMIC", "role": "dlc"}]
    reserved = [{"name": "gpus", "type": "SCALAR", "scalar": {"value": 2}, "reservations": dynamic,
                 "allocation_info": {"role": "dlc"}},
                {"name": "gpu_ids", "type": "SET", "set": {"item": ["2", "3"]},
                 "reservations": dynamic, "allocation_info": {"role": "dlc"}}]  # fmt: skip
    call(master, framework_id, stream, "ACCEPT", offer_ids=[offer["id"]],
         operations=[{"type": "RESERVE", "reserve": {"resources": reserved}}],
         filters={"refuse_seconds": 0})  # fmt: skip
    agent = next(iter(master.agents.values()))
    assert agent.total.select(lambda n, k: k == "+dlc") == Resources.from_json(reserved)
    other_id, other = subscribe(master, role="*", capabilities=[{"type": "GPU_RESOURCES"}])
    call(master, framework_id, stream, "SUPPRESS")
    names = {r["name"] for o in offers(master, other) for r in o["resources"]}
    assert "gpus" not in names  # all GPUs are reserved for dlc now
    call(master, other_id, other, "SUPPRESS")
    call(master, framework_id, stream, "REVIVE")
    [offer] = offers(master, stream)
    call(master, framework_id, stream, "ACCEPT", offer_ids=[offer["id"]],
         operations=[{"type": "UNRESERVE", "unreserve": {"resources": reserved}}])  # fmt: skip
    assert agent.total.select(lambda n, k: k == "+dlc") == Resources()
    assert agent.total.select(lambda n, k: k == "*").set_items("gpu_ids") == {"2", "3"}


@pytest.mark.parametrize(
    "reservations",
    [[{"type": "STATIC", "role": "dlc"}], [{"type": "DYNAMIC", "role": "batch"}]],
)
def test_invalid_reserve_is_dropped(master, reservations):
    framework_id, stream = subscribe(master, roles=["dlc"])
    [offer] = offers(master, stream)
    before = next(iter(master.agents.values())).total
    bad = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}, "reservations": reservations}]
    call(master, framework_id, stream, "ACCEPT", offer_ids=[offer["id"]],
         operations=[{"type": "RESERVE", "reserve": {"resources": bad}}])  # fmt: skip
    assert next(iter(master.agents.values())).total == before
