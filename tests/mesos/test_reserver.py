"""``--reserve``: RESERVE the GPU resources a task takes, UNRESERVE idle ones (pure)."""

from __future__ import annotations

import pytest

from dlc.mesos.echo import echo_round
from dlc.mesos.reserver import Reserver

ALLOC = {"allocation_info": {"role": "dlc"}}
DYN = {"type": "DYNAMIC", "role": "dlc"}


def scalar(name, value, **meta):
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}, **meta}


def ids(*items, **meta):
    return {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in items]}, **meta}


def mem(*gpus, **meta):
    ranges = [{"begin": g << 20, "end": (g << 20) + 99} for g in gpus]
    return {"name": "gpu_mem", "type": "RANGES", "ranges": {"range": ranges}, **meta}


def offer(oid, resources, agent="S0"):
    return {"id": {"value": oid}, "agent_id": {"value": agent}, "resources": resources,
            "allocation_info": {"role": "dlc"}}  # fmt: skip


def task(resources):
    return {"agent_id": {"value": "S0"}, "resources": resources,
            "executor": {"resources": [scalar("cpus", 0.1)]}}  # fmt: skip


def test_unreserved_gpus_are_reserved_in_the_same_accept_cpus_stay_shared():
    offers = [offer("O1", [scalar("cpus", 4.0, **ALLOC), scalar("gpus", 4.0, **ALLOC),
                           ids(0, 1, 2, 3, **ALLOC), mem(0, 1, 2, 3, **ALLOC)])]  # fmt: skip
    info = task([scalar("cpus", 1.0), scalar("gpus", 2.0), ids(0, 1), mem(0, 1)])
    reserver = Reserver(idle_s=60, principal="dlc-principal")
    result = echo_round(offers, [("j1", [info])], ["dlc"], reserver, now=0.0)
    [(offer_ids, [launched])] = result.accepts
    layer = {**DYN, "principal": "dlc-principal"}
    [reserve] = result.operations[("O1",)]
    assert reserve["type"] == "RESERVE"
    assert {r["name"] for r in reserve["reserve"]["resources"]} == {"gpus", "gpu_ids", "gpu_mem"}
    assert all(r["reservations"] == [layer] for r in reserve["reserve"]["resources"])
    by_name = {r["name"]: r for r in launched["resources"]}
    assert by_name["gpus"]["reservations"] == [layer]  # the launch uses the reserved form
    assert "reservations" not in by_name["cpus"]
    assert reserver.holding()


def test_already_reserved_gpus_are_reused_without_a_new_reserve():
    offers = [offer("O1", [scalar("cpus", 4.0, **ALLOC),
                           scalar("gpus", 2.0, reservations=[DYN], **ALLOC),
                           ids(0, 1, reservations=[DYN], **ALLOC),
                           scalar("gpus", 2.0, **ALLOC), ids(2, 3, **ALLOC)])]  # fmt: skip
    info = task([scalar("cpus", 1.0), scalar("gpus", 2.0), ids(0, 1)])
    result = echo_round(offers, [("j1", [info])], ["dlc"], Reserver(60), now=0.0)
    assert result.operations == {}


def test_idle_reserved_gpus_are_released_after_idle_s_only():
    reserved = [scalar("cpus", 4.0, **ALLOC), scalar("gpus", 2.0, reservations=[DYN], **ALLOC),
                ids(0, 1, reservations=[DYN], **ALLOC), mem(0, 1, reservations=[DYN], **ALLOC),
                scalar("gpus", 1.0, reservations=[{"type": "STATIC", "role": "dlc"}], **ALLOC),
                ids(5, reservations=[{"type": "STATIC", "role": "dlc"}], **ALLOC)]  # fmt: skip
    reserver = Reserver(idle_s=10)
    first = echo_round([offer("O1", reserved)], [], ["dlc"], reserver, now=100.0)
    assert first.operations == {} and first.unused == ["O1"]  # the idle clock starts
    later = echo_round([offer("O2", reserved)], [], ["dlc"], reserver, now=110.0)
    [unreserve] = later.operations[("O2",)]
    assert unreserve["type"] == "UNRESERVE"
    released = {r["name"]: r for r in unreserve["unreserve"]["resources"]}
    assert released["gpus"]["scalar"]["value"] == 2.0
    assert released["gpus"]["reservations"] == [DYN]  # never the static reservation
    assert released["gpu_ids"]["set"]["item"] == ["0", "1"]
    assert len(released["gpu_mem"]["ranges"]["range"]) == 2
    assert later.unused == [] and not reserver.holding()


@pytest.mark.parametrize("used_at", [105.0, 109.0])
def test_a_gpu_used_again_restarts_its_idle_clock(used_at):
    reserved = [scalar("cpus", 4.0, **ALLOC), scalar("gpus", 1.0, reservations=[DYN], **ALLOC),
                ids(0, reservations=[DYN], **ALLOC)]  # fmt: skip
    reserver = Reserver(idle_s=10)
    echo_round([offer("O1", reserved)], [], ["dlc"], reserver, now=100.0)
    info = task([scalar("cpus", 1.0), scalar("gpus", 1.0), ids(0)])
    echo_round([offer("O2", reserved)], [("j", [info])], ["dlc"], reserver, now=used_at)
    again = echo_round([offer("O3", reserved)], [], ["dlc"], reserver, now=used_at + 5.0)
    assert again.operations == {}
