"""fragscore's per-GPU terms from a table per mix (issue 26): the very integers, and so the very
fragmentation, that the arithmetic over ``[K, G, S]`` arrays gives."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.scheduler.allocator import fragscore
from dlc.scheduler.allocator import shares as fgd


def _mix(rng: np.random.Generator, shapes: int) -> fgd.MixArrays:
    sizes = rng.choice([1, 50, 100, 190, 250, 470, 500, 810, 999, 1000], size=shapes)
    made = tuple(
        fgd.ShareRequest(
            cpu_milli=int(rng.integers(0, 20) * 1000),
            mem_mib=0,
            num_gpus=int(rng.choice([1, 2, 4, 8])) if size == 1000 else int(rng.integers(0, 2)),
            gpu_milli=int(size),
        )
        for size in sizes
    )
    weights = tuple(float(w) for w in rng.integers(1, 50, size=shapes))
    return fragscore.mix_arrays(fgd.WorkloadMix(made, weights), ["gpu"])


def _arithmetic(mix: fgd.MixArrays, gpu: np.ndarray, granular: bool) -> tuple[np.ndarray, ...]:
    """The terms as frag_of worked them out before the table (the reference)."""
    size = np.maximum(mix.milli, 1)[None, None, :]
    fits = gpu[:, :, None] >= size
    if granular:
        usable = np.minimum((gpu[:, :, None] // size) * size, gpu[:, :, None]).sum(axis=1)
    else:
        usable = (gpu[:, :, None] * fits).sum(axis=1)
    return usable, fits.sum(axis=1)


@pytest.mark.parametrize("granular", [True, False])
def test_table_terms_are_the_arithmetic_ones(granular):
    rng = np.random.default_rng(7)
    for _ in range(20):
        mix = _mix(rng, int(rng.integers(1, 40)))
        gpu = rng.integers(0, 1001, size=(int(rng.integers(1, 300)), int(rng.choice([4, 8, 16]))))
        usable, fitting = fragscore._gpu_terms(mix, gpu, granular)
        want_usable, want_fitting = _arithmetic(mix, gpu, granular)
        assert usable.dtype == want_usable.dtype and np.array_equal(usable, want_usable)
        assert np.array_equal(fitting, want_fitting)


def test_room_outside_0_to_1000_takes_the_arithmetic():
    rng = np.random.default_rng(8)
    mix = _mix(rng, 12)
    gpu = rng.integers(0, 1001, size=(50, 8))
    gpu[3, 2], gpu[9, 0] = 1500, -20  # no table row holds these
    usable, fitting = fragscore._gpu_terms(mix, gpu, True)
    want_usable, want_fitting = _arithmetic(mix, gpu, True)
    assert np.array_equal(usable, want_usable) and np.array_equal(fitting, want_fitting)


def test_each_mix_gets_its_own_table(monkeypatch):
    """frag_of over many mixes (more than the tables kept at once), byte for byte the measure
    with the arithmetic terms: a table is never read for another mix."""
    rng = np.random.default_rng(9)
    gpu = rng.integers(0, 1001, size=(100, 8))
    cpu, mem = rng.integers(0, 64, size=100) * 1000, np.zeros(100, dtype=np.int64)
    model = np.zeros(100, dtype=np.int64)
    mixes = [_mix(rng, int(rng.integers(1, 30))) for _ in range(30)]
    got = [fragscore.frag_of(mix, model, cpu, mem, gpu) for mix in mixes * 2]
    monkeypatch.setattr(fragscore, "_gpu_terms", _arithmetic)
    want = [fragscore.frag_of(mix, model, cpu, mem, gpu) for mix in mixes * 2]
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


def test_mem_cap_counts_the_gpus_memory_strands():
    """An 8-GPU agent with 4 whole GPUs free and memory for one 48 GiB pod: the 1-GPU shape
    can use 1 of the 4 GPUs with ``mem_cap`` (3 are fragments), all 4 without it."""
    shape = fgd.ShareRequest(cpu_milli=12000, mem_mib=48 * 1024, num_gpus=1, gpu_milli=1000)
    mix = fragscore.mix_arrays(fgd.WorkloadMix((shape,), (1.0,)), ["gpu"])
    gpu = np.array([[1000] * 4 + [0] * 4])
    state = (np.array([0]), np.array([40000]), np.array([71 * 1024]), gpu)
    off = fragscore.frag_of(mix, *state, fragscore.ScoreParams())
    on = fragscore.frag_of(mix, *state, fragscore.ScoreParams(mem_cap=True))
    assert off[0] == 0 and on[0] == 3000
