"""Cutting a task's resources out of offers, echoed as offered (dlc/mesos/echo.py).

Offer shapes are the real 1.11 master's (printed by a framework with MULTI_ROLE and
RESERVATION_REFINEMENT on an agent started with ``gpus(dlc):2;gpu_ids(dlc):{0,1};gpus:2;...``).
"""

from __future__ import annotations

import copy
import json

import pytest

from dlc.mesos.echo import CarveError, echo_round, pools_of, reserved_for, usable

ALLOC = {"allocation_info": {"role": "dlc"}}
STATIC = {"reservations": [{"type": "STATIC", "role": "dlc"}]}


def scalar(name, value, **meta):
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}, **meta}


def ids(*items, **meta):
    return {"name": "gpu_ids", "type": "SET", "set": {"item": [str(i) for i in items]}, **meta}


def ranges(name, *pairs, **meta):
    return {"name": name, "type": "RANGES",
            "ranges": {"range": [{"begin": b, "end": e} for b, e in pairs]}, **meta}  # fmt: skip


def offer(oid, resources, agent="S0", role="dlc"):
    out = {"id": {"value": oid}, "agent_id": {"value": agent}, "resources": resources}
    if role:
        out["allocation_info"] = {"role": role}
    return out


#: the real master's offer for gpus(dlc):2;gpu_ids(dlc):{0,1};gpus:2;gpu_ids:{2,3};cpus:2;...
MIXED = [
    ranges("ports", (31000, 31010), **ALLOC),
    ids(0, 1, **ALLOC, **STATIC),
    ids(2, 3, **ALLOC),
    ranges("gpu_mem", (0, 99), (1048576, 1048675), **ALLOC, **STATIC),
    scalar("gpus", 2.0, **ALLOC, **STATIC),
    scalar("cpus", 2.0, **ALLOC),
    scalar("mem", 2048.0, **ALLOC),
    scalar("gpus", 2.0, **ALLOC),
]


def _key(res):
    return json.dumps(res, sort_keys=True)


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        # scalars: reserved first, the rest from unreserved, each echoed with its metadata
        (
            [scalar("gpus", 3.0)],
            [scalar("gpus", 2.0, **ALLOC, **STATIC), scalar("gpus", 1.0, **ALLOC)],
        ),
        ([scalar("gpus", 1.0)], [scalar("gpus", 1.0, **ALLOC, **STATIC)]),
        ([scalar("cpus", 1.1)], [scalar("cpus", 1.1, **ALLOC)]),
        # a SET: the chosen items, from whichever entry holds them
        ([ids(1, 2)], [ids(1, **ALLOC, **STATIC), ids(2, **ALLOC)]),
        ([ids(3)], [ids(3, **ALLOC)]),
        # RANGES: the chosen sub-ranges
        ([ranges("gpu_mem", (10, 19))], [ranges("gpu_mem", (10, 19), **ALLOC, **STATIC)]),
        ([ranges("ports", (31005, 31005))], [ranges("ports", (31005, 31005), **ALLOC)]),
    ],
)
def test_carve_takes_reserved_first_and_echoes_metadata(wanted, expected):
    pool = pools_of([offer("O1", copy.deepcopy(MIXED))])[("S0", "dlc")]
    assert sorted(map(_key, pool.carve(wanted))) == sorted(map(_key, expected))


@pytest.mark.parametrize(
    "wanted",
    [[scalar("gpus", 4.5)], [ids(7)], [ranges("gpu_mem", (95, 105))], [scalar("disk", 1.0)]],
)
def test_carve_refuses_what_the_offer_lacks_and_changes_nothing(wanted):
    pool = pools_of([offer("O1", copy.deepcopy(MIXED))])[("S0", "dlc")]
    before = copy.deepcopy(pool.entries)
    with pytest.raises(CarveError, match=wanted[0]["name"]):
        pool.carve([scalar("cpus", 1.0), *wanted])
    assert pool.entries == before


def test_successive_carves_shrink_the_pool():
    pool = pools_of([offer("O1", copy.deepcopy(MIXED))])[("S0", "dlc")]
    pool.carve([scalar("gpus", 2.0), ids(0, 1)])
    # the reserved GPUs are gone: the next task gets the unreserved ones
    assert pool.carve([scalar("gpus", 1.0), ids(2)]) == [
        scalar("gpus", 1.0, **ALLOC),
        ids(2, **ALLOC),
    ]
    with pytest.raises(CarveError):
        pool.carve([scalar("gpus", 2.0)])


@pytest.mark.parametrize(
    ("res", "roles", "expected"),
    [
        (scalar("cpus", 1.0), ["dlc"], True),
        (scalar("cpus", 1.0, **STATIC), ["dlc"], True),
        (scalar("cpus", 1.0, reservations=[{"type": "STATIC", "role": "spark"}]), ["dlc"], False),
        (scalar("cpus", 1.0, role="spark"), ["dlc"], False),  # the pre-refinement format
        (scalar("cpus", 1.0, role="*"), ["dlc"], True),
        (scalar("cpus", 1.0, reservations=[{"type": "STATIC", "role": "eng"}]), ["eng/dlc"], True),
        (scalar("cpus", 1.0, reservations=[{"type": "STATIC", "role": "spark"}]), None, True),
        (scalar("disk", 1.0, disk={"persistence": {"id": "v1"}}), None, False),
        (scalar("cpus", 1.0, revocable={}), None, False),
    ],
)
def test_usable_entries(res, roles, expected):
    assert usable(res, roles) is expected


def test_reserved_for_reads_both_formats():
    assert reserved_for(scalar("cpus", 1.0, **STATIC)) == "dlc"
    assert reserved_for(scalar("cpus", 1.0, role="dlc", reservation={})) == "dlc"
    refined = [{"type": "STATIC", "role": "eng"}, {"type": "DYNAMIC", "role": "eng/dlc"}]
    assert reserved_for(scalar("cpus", 1.0, reservations=refined)) == "eng/dlc"
    assert reserved_for(scalar("cpus", 1.0, role="*")) is None


def _task(agent, resources, executor=(scalar("cpus", 0.1), scalar("mem", 64.0))):
    return {"agent_id": {"value": agent}, "resources": resources,
            "executor": {"resources": list(executor)}}  # fmt: skip


def test_round_groups_accepts_per_role_and_declines_the_rest():
    offers = [
        offer("A1", [scalar("gpus", 2.0, **ALLOC, **STATIC), ids(0, 1, **ALLOC, **STATIC),
                     scalar("cpus", 2.0, **ALLOC), scalar("mem", 1024.0, **ALLOC)]),
        offer("A2", [scalar("cpus", 2.0, allocation_info={"role": "batch"}),
                     scalar("mem", 1024.0, allocation_info={"role": "batch"})], role="batch"),
        offer("B1", [scalar("cpus", 1.0, **ALLOC)], agent="S1"),
    ]  # fmt: skip
    task = _task("S0", [scalar("cpus", 1.0), scalar("mem", 100.0), scalar("gpus", 2.0), ids(0, 1)])
    result = echo_round(offers, [("j1", [task])], ["dlc", "batch"])
    assert result.refused == {}
    [(offer_ids, [info])] = result.accepts
    assert offer_ids == ["A1"]  # one ACCEPT takes offers of one allocation role only
    assert info["resources"][2:] == [
        scalar("gpus", 2.0, **ALLOC, **STATIC),
        ids(0, 1, **ALLOC, **STATIC),
    ]
    assert info["executor"]["resources"] == [
        scalar("cpus", 0.1, **ALLOC),
        scalar("mem", 64.0, **ALLOC),
    ]
    assert sorted(result.unused) == ["A2", "B1"]


def test_a_gang_that_does_not_fit_whole_launches_no_node():
    offers = [
        offer("A1", [scalar("cpus", 2.0, **ALLOC), scalar("mem", 512.0, **ALLOC)]),
        offer("B1", [scalar("cpus", 0.5, **ALLOC), scalar("mem", 512.0, **ALLOC)], agent="S1"),
    ]
    gang = [_task("S0", [scalar("cpus", 1.0)]), _task("S1", [scalar("cpus", 1.0)])]
    single = _task("S0", [scalar("cpus", 1.5)])
    result = echo_round(offers, [("gang", gang), ("one", [single])], ["dlc"])
    assert "cpus" in result.refused["gang"]
    # what the gang had cut on S0 went back: the next job gets it
    [(offer_ids, [info])] = result.accepts
    assert offer_ids == ["A1"] and info is single
    assert result.unused == ["B1"]


def test_carved_metadata_shares_no_dict_or_list_with_the_offer():
    """Metadata is copied without deepcopy for plain values (issue 26); nested dicts and
    lists (allocation_info, reservations) must still be copies: a TaskInfo changed later
    (the reserver adds to it) must not change the offer or the pool it came from."""
    entries = copy.deepcopy(MIXED)
    pool = pools_of([offer("O1", entries)])[("S0", "dlc")]
    taken = pool.carve([scalar("gpus", 1.0), scalar("cpus", 1.0)])
    offered = {id(v) for e in entries for v in e.values() if isinstance(v, dict | list)}
    offered |= {id(r) for e in entries for r in e.get("reservations", ())}
    kept = {id(v) for e in pool.entries for v in e.values() if isinstance(v, dict | list)}
    for res in taken:
        for key in ("allocation_info", "reservations"):
            if key in res:
                assert id(res[key]) not in offered | kept
        for reservation in res.get("reservations", ()):
            assert id(reservation) not in offered
    assert taken[0]["reservations"] == [{"type": "STATIC", "role": "dlc"}]


def test_pool_entries_show_what_is_left_after_each_carve():
    """A carve rewrites only the entries it took from (issue 26); every entry must still
    show what is left, as a rewrite of all entries would (the reserver reads them)."""
    pool = pools_of([offer("O1", copy.deepcopy(MIXED))])[("S0", "dlc")]
    pool.carve([scalar("cpus", 0.5)])
    pool.carve([scalar("gpus", 1.0), ids(0)])
    with pytest.raises(CarveError):  # refused: nothing changes, the next carve sees it so
        pool.carve([scalar("cpus", 1.0), ids(9)])
    pool.carve([scalar("gpus", 1.0), ids(1), scalar("cpus", 0.5)])
    left = {(e["name"], _key(e.get("reservations"))): e for e in pool.entries}
    assert left[("cpus", "null")]["scalar"] == {"value": 1.0}
    assert left[("gpus", _key(STATIC["reservations"]))]["scalar"] == {"value": 0.0}
    assert left[("gpu_ids", _key(STATIC["reservations"]))]["set"] == {"item": []}
    assert left[("gpu_ids", "null")]["set"] == {"item": ["2", "3"]}
    assert left[("mem", "null")]["scalar"] == {"value": 2048.0}
    # the next task takes what is left, from the unreserved entries
    assert pool.carve([scalar("gpus", 2.0), scalar("cpus", 1.0)]) == [
        scalar("gpus", 2.0, **ALLOC),
        scalar("cpus", 1.0, **ALLOC),
    ]
