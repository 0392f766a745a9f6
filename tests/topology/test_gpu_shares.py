"""The gpu_mem / gpu_core RANGES arithmetic: blocks per GPU, whole-GPU takes, share takes."""

from __future__ import annotations

import pytest

from dlc.errors import FieldError
from dlc.topology.gpu_shares import (
    STRIDE,
    GpuRanges,
    amounts,
    block,
    core_ranges,
    is_whole,
    mem_ranges,
    normalise,
    parse_ranges_text,
    parse_sharing,
    per_gpu,
    ranges_from_resources,
    ranges_text,
    share_take,
    subtract,
    whole_gpu_take,
)

# The layout DESIGN.md checked on the real master: two 16 GiB GPUs.
MEM = mem_ranges({0: 16384, 1: 16384})
CORE = core_ranges([0, 1])


def test_blocks_sit_at_the_stride():
    assert ranges_text(MEM) == "[0-16383,1048576-1064959]"
    assert ranges_text(CORE) == "[0-999,1048576-1049575]"
    assert amounts(MEM) == {0: 16384, 1: 16384} and amounts(CORE) == {0: 1000, 1: 1000}


def test_two_shares_then_a_whole_gpu_leave_exactly_the_rest():
    first = share_take(0, 4096, 250, MEM, CORE)
    assert first == GpuRanges(((0, 4095),), ((0, 249),))
    mem, core = subtract(MEM, first.mem), subtract(CORE, first.core)
    second = share_take(0, 4096, 250, mem, core)
    assert second == GpuRanges(((4096, 8191),), ((250, 499),))
    mem, core = subtract(mem, second.mem), subtract(core, second.core)
    assert ranges_text(mem) == "[8192-16383,1048576-1064959]"
    assert not is_whole(0, mem, core) and is_whole(1, mem, core, 16384)
    whole = whole_gpu_take([1], mem, core)
    assert whole == GpuRanges(((STRIDE, STRIDE + 16383),), ((STRIDE, STRIDE + 999),))
    mem, core = subtract(mem, whole.mem), subtract(core, whole.core)
    assert amounts(mem) == {0: 8192} and amounts(core) == {0: 500}


def test_a_share_may_take_non_contiguous_pieces():
    holes = ((0, 1023), (4096, 8191))  # 1 GiB and 4 GiB free, not adjacent
    take = share_take(0, 2048, 0, holes, ((0, 999),))
    assert take.mem == ((0, 1023), (4096, 5119)) and take.core == ()


def test_a_shared_gpu_cannot_be_taken_whole():
    mem = subtract(MEM, ((0, 0),))
    with pytest.raises(FieldError, match="GPU 0 is not whole"):
        whole_gpu_take([0], mem, CORE)


@pytest.mark.parametrize(
    "memory, core, message",
    [
        (16385, 0, "GPU 0 has 16384 MiB and 1000/1000 compute left"),
        (0, 1001, "gpu core: 1001 is not a whole number in 0..1000"),
        (-1, 0, "gpu memory: -1"),
        (1.5, 0, "gpu memory: 1.5"),
    ],
    ids=["more-memory-than-left", "more-than-a-gpu", "negative", "fraction-of-a-mib"],
)
def test_over_asks_are_one_line_errors(memory, core, message):
    with pytest.raises(FieldError, match=message):
        share_take(0, memory, core, MEM, CORE)


def test_a_gpu_not_in_the_offer_has_nothing_left():
    with pytest.raises(FieldError, match="GPU 5 has 0 MiB"):
        share_take(5, 1, 1, MEM, CORE)


def test_offer_json_and_state_text_read_back():
    offer = GpuRanges(MEM, CORE).resources_json()
    assert ranges_from_resources(offer, "gpu_mem") == MEM
    assert ranges_from_resources(offer, "gpu_core") == CORE
    assert parse_ranges_text("[8192-16383, 1048576-1064959]") == (
        (8192, 16383),
        (STRIDE, STRIDE + 16383),
    )
    with pytest.raises(FieldError, match="ranges"):
        parse_ranges_text("[5-2]")


def test_per_gpu_splits_a_range_that_crosses_a_block_boundary():
    assert per_gpu(((STRIDE - 2, STRIDE + 1),)) == {
        0: ((STRIDE - 2, STRIDE - 1),),
        1: ((STRIDE, STRIDE + 1),),
    }


@pytest.mark.parametrize("index, size", [(-1, 10), (0, 0), (0, STRIDE + 1)])
def test_bad_blocks_are_refused(index, size):
    with pytest.raises(FieldError):
        block(index, size)


def test_sharing_modes():
    assert parse_sharing(" MPS ").value == "mps"
    with pytest.raises(FieldError, match="sharing: 'hami' is not a sharing mode; use one of mps|"):
        parse_sharing("hami")


def _merged(ranges):
    """The plain sort-and-merge the readers' short cuts must agree with."""
    out: list[tuple[int, int]] = []
    for begin, end in sorted(ranges):
        if out and begin <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return tuple(out)


def _split(ranges):
    out: dict[int, list[tuple[int, int]]] = {}
    for begin, end in _merged(ranges):
        while begin <= end:
            index = begin // STRIDE
            stop = min(end, (index + 1) * STRIDE - 1)
            out.setdefault(index, []).append((begin, stop))
            begin = stop + 1
    return {i: tuple(rs) for i, rs in sorted(out.items())}


def test_readers_agree_with_a_plain_merge_and_split():
    """normalise gives normalised tuples back as they are, per_gpu splits without sorting:
    both agree with the plain merge and split for random ranges (overlapping, adjacent,
    unsorted, crossing blocks, empty, lists), in GPU order."""
    import random

    rnd = random.Random(7)
    for _ in range(3000):
        ranges = []
        for _ in range(rnd.randint(0, 8)):
            begin = rnd.randint(0, 4) * STRIDE + rnd.choice([0, 1, 99, STRIDE - 2])
            ranges.append((begin, begin + rnd.choice([-1, 0, 1, 100, STRIDE])))
        for given in (ranges, tuple(ranges), _merged(ranges)):
            assert normalise(given) == _merged(ranges)
            split = per_gpu(given)
            assert split == _split(ranges) and list(split) == sorted(split)
            assert amounts(given) == {i: sum(e - b + 1 for b, e in rs) for i, rs in split.items()}
    normal = ((0, 9), (20, 29))
    assert normalise(normal) is normal
    assert normalise(((0, 9), (10, 29))) == ((0, 29),)  # adjacent: joined, not given back
