"""Reservation keys and the two JSON formats of reserved resources (dlc/mesos/resources.py)."""

from __future__ import annotations

import pytest

from dlc.mesos.resources import (
    Resources,
    is_dynamic,
    offerable_to,
    reservation_json,
    reservation_key,
    reserve_items,
    reserved_role,
)

STATIC = {"type": "STATIC", "role": "dlc"}


@pytest.mark.parametrize(
    ("res", "key"),
    [
        ({}, "*"),
        ({"role": "*"}, "*"),
        ({"role": "dlc"}, "dlc"),  # static, the older format
        ({"role": "dlc", "reservation": {"principal": "p"}}, "+dlc"),  # dynamic, older format
        ({"reservations": [STATIC]}, "dlc"),
        ({"reservations": [{"type": "DYNAMIC", "role": "dlc"}]}, "+dlc"),
        ({"reservations": [{"type": "STATIC", "role": "eng"},
                           {"type": "DYNAMIC", "role": "eng/dlc"}]}, "eng,+eng/dlc"),
    ],
)  # fmt: skip
def test_reservation_key_reads_both_formats(res, key):
    assert reservation_key(res) == key


@pytest.mark.parametrize(
    ("key", "owner", "dynamic", "refined", "older"),
    [
        ("*", None, False, {}, {"role": "*"}),
        ("dlc", "dlc", False, {"reservations": [STATIC]}, {"role": "dlc"}),
        ("+dlc", "dlc", True, {"reservations": [{"type": "DYNAMIC", "role": "dlc"}]},
         {"role": "dlc", "reservation": {}}),
    ],
)  # fmt: skip
def test_reservation_json_round_trips(key, owner, dynamic, refined, older):
    assert reserved_role(key) == owner and is_dynamic(key) is dynamic
    assert reservation_json(key, refinement=True) == refined
    assert reservation_json(key, refinement=False) == older
    assert reservation_key(refined or {"role": "*"}) == key


@pytest.mark.parametrize(
    ("key", "role", "ok"),
    [("*", "dlc", True), ("dlc", "dlc", True), ("dlc", "spark", False),
     ("eng", "eng/dlc", True), ("eng/dlc", "eng", False), ("+dlc", "dlc", True)],
)  # fmt: skip
def test_offerable_to(key, role, ok):
    assert offerable_to(key, role) is ok


def test_flag_reservations_render_and_pop():
    bag = Resources.parse("gpus(dlc):2;gpus:2;cpus:1")
    json = bag.to_json(refinement=True, allocated="dlc")
    gpus = [r for r in json if r["name"] == "gpus"]
    assert {"reservations": [STATIC]}.items() <= gpus[0].items()
    assert all(r["allocation_info"] == {"role": "dlc"} for r in json)
    dynamic_gpu = {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1},
                   "reservations": [{"type": "DYNAMIC", "role": "dlc"}]}  # fmt: skip
    dynamic = Resources.from_json([dynamic_gpu])
    assert dynamic.popped() == Resources.parse("gpus:1")
    assert str(dynamic) == "gpus(reservations: [(DYNAMIC,dlc)]):1"


def test_reserve_items_only_touches_the_named_resources():
    text = "cpus:4;gpus:2;gpu_ids:{0,1};gpu_mem(x):[0-9]"
    assert reserve_items(text, "dlc", ("gpus", "gpu_ids", "gpu_mem")) == (
        "cpus:4;gpus(dlc):2;gpu_ids(dlc):{0,1};gpu_mem(x):[0-9]"
    )
