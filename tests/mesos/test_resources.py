"""Tests for dlc.mesos.resources: mesos-agent flag syntax and resource arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlc.errors import ResourceSyntaxError
from dlc.mesos.resources import Resources, attributes_summary, parse_attributes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "cpus:4;mem:4096.5",
            [
                {"name": "cpus", "type": "SCALAR", "scalar": {"value": 4.0}, "role": "*"},
                {"name": "mem", "type": "SCALAR", "scalar": {"value": 4096.5}, "role": "*"},
            ],
            id="scalars",
        ),
        pytest.param(
            "gpu_ids:{0,1,2,3}",
            [
                {
                    "name": "gpu_ids",
                    "type": "SET",
                    "set": {"item": ["0", "1", "2", "3"]},
                    "role": "*",
                }
            ],
            id="set-items-are-strings",
        ),
        pytest.param(
            "gpu_ids:{10, 2,1}",
            [{"name": "gpu_ids", "type": "SET", "set": {"item": ["1", "2", "10"]}, "role": "*"}],
            id="set-sorted-numerically",
        ),
        pytest.param(
            "ports:[31000-31100, 32000-32000]",
            [
                {
                    "name": "ports",
                    "type": "RANGES",
                    "ranges": {
                        "range": [{"begin": 31000, "end": 31100}, {"begin": 32000, "end": 32000}]
                    },
                    "role": "*",
                }
            ],
            id="ranges",
        ),
        pytest.param(
            "ports:[1-5,6-9]",
            [
                {
                    "name": "ports",
                    "type": "RANGES",
                    "ranges": {"range": [{"begin": 1, "end": 9}]},
                    "role": "*",
                }
            ],
            id="adjacent-ranges-merge",
        ),
        pytest.param(
            "cpus(dlc):2",
            [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 2.0}, "role": "dlc"}],
            id="role",
        ),
        pytest.param(
            " cpus:1 ; ;gpus:0",
            [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.0}, "role": "*"}],
            id="blank-items-and-zero-scalars-vanish",
        ),
        pytest.param(
            '[{"name":"gpus","type":"SCALAR","scalar":{"value":2}}]',
            [{"name": "gpus", "type": "SCALAR", "scalar": {"value": 2.0}, "role": "*"}],
            id="json-form",
        ),
    ],
)
def test_parse_resources(text: str, expected: list[dict]) -> None:
    assert Resources.parse(text).to_json() == expected


@pytest.mark.parametrize(
    ("text", "item", "hint"),
    [
        pytest.param("cpus4", "cpus4", "NAME[(ROLE)]:VALUE", id="no-colon"),
        pytest.param("cpus:four", "cpus:four", "number", id="text-value"),
        pytest.param("ports:[1-]", "ports:[1-]", "BEGIN-END", id="half-range"),
        pytest.param("ports:[9-1]", "ports:[9-1]", "ends before", id="reversed-range"),
        pytest.param("gpu_ids:{0,1", "gpu_ids:{0,1", "must end with '}'", id="open-set"),
        pytest.param("cpus:-1", "cpus:-1", "negative", id="negative"),
        pytest.param("cpus:1;cpus:2", "cpus:2", "twice", id="duplicate"),
    ],
)
def test_parse_resources_errors_name_the_item(text: str, item: str, hint: str) -> None:
    with pytest.raises(ResourceSyntaxError) as raised:
        Resources.parse(text)
    assert raised.value.flag == "resources"
    assert raised.value.item == item
    assert hint in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "rack:r1", [{"name": "rack", "type": "TEXT", "text": {"value": "r1"}}], id="text"
        ),
        pytest.param(
            "count:4", [{"name": "count", "type": "SCALAR", "scalar": {"value": 4.0}}], id="numeric"
        ),
        pytest.param(
            "zone:[1-3]",
            [{"name": "zone", "type": "RANGES", "ranges": {"range": [{"begin": 1, "end": 3}]}}],
            id="ranges",
        ),
        pytest.param(
            "dlc_topo:v1.g4/a-b;gpu_model:Tesla_V100",
            [
                {"name": "dlc_topo", "type": "TEXT", "text": {"value": "v1.g4/a-b"}},
                {"name": "gpu_model", "type": "TEXT", "text": {"value": "Tesla_V100"}},
            ],
            id="dlc-attributes",
        ),
        pytest.param("", [], id="empty"),
    ],
)
def test_parse_attributes(text: str, expected: list[dict]) -> None:
    assert parse_attributes(text) == expected


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        pytest.param("gpu_model:Tesla V100", "text values", id="space"),
        pytest.param("ids:{0,1}", "SET", id="set"),
        pytest.param("rack", "NAME:VALUE", id="no-colon"),
    ],
)
def test_parse_attributes_errors(text: str, hint: str) -> None:
    with pytest.raises(ResourceSyntaxError, match=hint) as raised:
        parse_attributes(text)
    assert raised.value.flag == "attributes"


def test_attributes_summary_matches_master_state_form() -> None:
    attributes = parse_attributes("rack:r1;count:4;zone:[1-3]")
    assert attributes_summary(attributes) == {"rack": "r1", "count": 4.0, "zone": "[1-3]"}


AGENT = Resources.parse("cpus:4;mem:4096;ports:[31000-31100];gpus:4;gpu_ids:{0,1,2,3}")


@pytest.mark.parametrize(
    ("want", "contained"),
    [
        pytest.param("cpus:4;gpus:4;gpu_ids:{0,1,2,3}", True, id="everything"),
        pytest.param("gpus:2;gpu_ids:{0,2}", True, id="gpu-subset"),
        pytest.param("gpu_ids:{7}", False, id="unknown-gpu-id"),
        pytest.param("gpus:5", False, id="too-many-gpus"),
        pytest.param("cpus:4.001", False, id="scalar-just-over"),
        pytest.param("ports:[31050-31060]", True, id="range-inside"),
        pytest.param("ports:[31090-31110]", False, id="range-overlapping-end"),
        pytest.param("disk:1", False, id="absent-resource"),
        pytest.param("cpus(dlc):1", False, id="other-role"),
    ],
)
def test_contains(want: str, contained: bool) -> None:
    assert AGENT.contains(Resources.parse(want)) is contained


def test_subtract_and_add_round_trip_and_summary() -> None:
    task = Resources.parse("cpus:0.1;gpus:2;gpu_ids:{0,2};ports:[31005-31006]")
    left = AGENT - task
    assert left.summary() == {
        "cpus": 3.9,
        "mem": 4096.0,
        "ports": "[31000-31004, 31007-31100]",
        "gpus": 2.0,
        "gpu_ids": "{1, 3}",
    }
    assert left + task == AGENT
    assert left.set_items("gpu_ids") == {"1", "3"}
    assert left.scalar("gpus") == 2.0


def test_scalars_use_three_decimals_like_mesos() -> None:
    total = Resources()
    for _ in range(10):
        total = total + Resources.parse("cpus:0.1")
    assert total == Resources.parse("cpus:1")
    assert (total - Resources.parse("cpus:1")).to_json() == []


@st.composite
def bag_and_part(draw: st.DrawFn) -> tuple[Resources, Resources]:
    """A random agent bag and a random part of it."""
    ids = draw(st.sets(st.integers(0, 15), max_size=8))
    cpus = draw(st.integers(0, 64)) / 10
    begin = draw(st.integers(1000, 2000))
    length = draw(st.integers(0, 50))
    whole = Resources.parse(
        f"cpus:{cpus};gpu_ids:{{{','.join(map(str, ids))}}};ports:[{begin}-{begin + length}]"
    )
    part_ids = draw(st.sets(st.sampled_from(sorted(ids)), max_size=len(ids))) if ids else set()
    part_cpus = draw(st.integers(0, int(cpus * 10))) / 10
    lo = draw(st.integers(begin, begin + length))
    hi = draw(st.integers(lo, begin + length))
    part = Resources.parse(
        f"cpus:{part_cpus};gpu_ids:{{{','.join(map(str, part_ids))}}};ports:[{lo}-{hi}]"
    )
    return whole, part


@settings(max_examples=150, deadline=None)
@given(bag_and_part())
def test_arithmetic_properties(pair: tuple[Resources, Resources]) -> None:
    whole, part = pair
    assert whole.contains(part)
    assert whole.contains(whole - part)
    assert (whole - part) + part == whole
    assert (whole - whole).to_json() == []
