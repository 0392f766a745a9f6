"""Every policy refuses impossible requests with the same one-line reason."""

from __future__ import annotations

import pytest
from alloc_machines import dgx1_volta, with_hardware

from dlc.errors import AllocationError, DlcError
from dlc.scheduler.allocator import POLICY_MODULES, allocate

ALL8 = frozenset(range(8))


def mixed_box():
    return with_hardware(dgx1_volta(), ["A100"] * 2 + ["V100"] * 6, [81920, 81920] + [16384] * 6)


ERRORS = [
    # (id, free, count, kwargs, reason, words in the message)
    ("zero GPUs", ALL8, 0, {}, "bad_count", "count"),
    ("fewer than required", ALL8, 1, {"required": {0, 1}}, "bad_count", "required"),
    ("unknown GPU", ALL8 | {9}, 2, {}, "unknown_gpu", "9"),
    ("unknown required GPU", ALL8, 2, {"required": {12}}, "unknown_gpu", "12"),
    ("required GPU busy", {1, 2, 3}, 2, {"required": {0}}, "required_not_free", "[0]"),
    ("not enough free", {1, 2}, 3, {}, "too_few_free", "only 2"),
    ("model nowhere", ALL8, 1, {"gpu_model": "H100"}, "model_mismatch", "H100"),
    ("model too rare", ALL8, 3, {"gpu_model": "A100"}, "model_mismatch", "A100"),
    (
        "required GPU wrong model",
        ALL8,
        2,
        {"gpu_model": "A100", "required": {5}},
        "model_mismatch",
        "5",
    ),
    ("memory too small", ALL8, 3, {"min_memory_mib": 40000}, "memory_too_small", "40000"),
    (
        "required GPU too small",
        ALL8,
        1,
        {"min_memory_mib": 40000, "required": {4}},
        "memory_too_small",
        "4",
    ),
]


@pytest.mark.parametrize("policy", sorted(POLICY_MODULES))
@pytest.mark.parametrize(
    ("free", "count", "kwargs", "reason", "words"),
    [case[1:] for case in ERRORS],
    ids=[case[0] for case in ERRORS],
)
def test_impossible_requests_raise_with_reason(policy, free, count, kwargs, reason, words):
    with pytest.raises(AllocationError) as err:
        allocate(mixed_box(), free, count, policy=policy, **kwargs)
    assert isinstance(err.value, DlcError)
    assert err.value.reason == reason
    assert words in str(err.value) and "\n" not in str(err.value)


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(AllocationError) as err:
        allocate(dgx1_volta(), ALL8, 1, policy="greedy")
    assert err.value.reason == "bad_policy"
    assert "tree" in str(err.value) and "best-effort" in str(err.value)


def test_unknown_model_does_not_match_a_model_request():
    with pytest.raises(AllocationError) as err:
        allocate(dgx1_volta(), ALL8, 1, gpu_model="V100")
    assert err.value.reason == "model_mismatch"
