"""Red-team session 10, finding 47: many-part ``gpu_model`` values made the mix slow to build.

A job may allow several GPU models (``V100M16|V100M32``) and the fragmentation mix keeps each
shape's allowed models, so every restricted shape's column of the access table matched each
of its parts against each agent model, normalising both afresh (a regex each), every time the
core adopted a new mix. One user's 1,000 queued jobs, each allowing 85 distinct two-letter
models, made 950 shapes; against 11 agent models one build took 1.8 s of the scheduler's
thread, and a few kills and submits per round made the mix
drift past its threshold so that every round paid it. Agents advertising thousands of
distinct ``gpu_model`` values grew the process-wide model table, and that cost with it,
without bound.
"""

from __future__ import annotations

import itertools
import string

import pytest

from dlc.errors import JobSpecError
from dlc.scheduler.allocator import base, fragscore
from dlc.scheduler.allocator.base import model_matches
from dlc.scheduler.allocator.mix_models import MAX_ROWS, ModelRows
from dlc.scheduler.allocator.shares import MixArrays, ShareRequest, WorkloadMix
from dlc.scheduler.jobs.spec import JobSpec
from dlc.scheduler.jobs.spec_rules import MAX_GPU_MODELS

NAMES = ["", "Tesla_V100-SXM2-16GB", "Tesla_V100-SXM2-32GB", "A100-SXM4-80GB", "Tesla_T4",
         "Tesla_P100-PCIE", "A10", "G2", "H100", "K80", "MI250X"]  # fmt: skip


def _mix(shapes: int, parts: int) -> WorkloadMix:
    pairs = ["".join(p) for p in itertools.product(string.ascii_uppercase + string.digits, "0A")]
    allowed = [frozenset(pairs[(j + k) % len(pairs)] for k in range(parts)) for j in range(shapes)]
    return WorkloadMix(
        tuple(ShareRequest(1000 + j, 0, 1, 1000, allowed[j]) for j in range(shapes)),
        tuple(1.0 for _ in range(shapes)),
    )


@pytest.fixture
def normalised(monkeypatch):
    """Counts the model names and parts normalised (a regex each), with the caches empty."""
    seen = [0]
    real = base._normalise_model

    def counting(text: str) -> str:
        seen[0] += 1
        return real(text)

    for cached in ("_model_access", "_normal_part", "_matches"):
        if hasattr(base, cached):
            getattr(base, cached).cache_clear()
    monkeypatch.setattr(base, "_normalise_model", counting)
    return seen


def test_a_mix_is_built_with_each_name_and_part_normalised_once_and_rebuilt_for_free(normalised):
    mix = _mix(200, MAX_GPU_MODELS)
    arrays = fragscore.mix_arrays(mix, NAMES)
    # 200 x 16 x 11 pairs matched afresh normalised 70,400 times; each text once is enough
    assert normalised[0] <= len(NAMES) + 200 * MAX_GPU_MODELS
    first = normalised[0]
    again = fragscore.mix_arrays(mix, NAMES)  # the next round's adoption, same shapes
    assert normalised[0] == first
    assert (again.access == arrays.access).all()
    for j in (0, 17, 199):
        shape = mix.shapes[j]
        want = [any(model_matches(w, m) for w in shape.gpu_models) for m in NAMES]
        assert arrays.access[:, j].tolist() == want


def test_a_new_agent_model_matches_only_its_own_row(normalised):
    mix = _mix(50, 4)
    arrays = MixArrays(mix, NAMES)
    before = normalised[0]
    arrays.cover([*NAMES, "Tesla_A0-new"])
    assert normalised[0] - before <= 1  # the new name; the parts are known
    assert arrays.access.shape == (len(NAMES) + 1, 50)
    assert arrays.access[-1].tolist() == [
        any(model_matches(w, "Tesla_A0-new") for w in s.gpu_models) for s in mix.shapes
    ]


def test_thousands_of_agent_models_stop_growing_the_table_at_its_cap():
    rows = ModelRows()
    got = [rows.row(f"Tesla_V100_node{i:05d}") for i in range(3 * MAX_ROWS)]
    assert len(rows.names) == MAX_ROWS
    assert got[: MAX_ROWS - 1] == list(range(1, MAX_ROWS))
    assert set(got[MAX_ROWS - 1 :]) == {0}  # as an agent naming no model
    assert rows.row("Tesla_V100_node00003") == 4  # known names keep their rows
    # row 0 is not a model any restricted shape allows
    assert not MixArrays(_mix(3, 2), rows.names).access[0].any()


def test_a_gpu_model_allows_at_most_sixteen_models():
    sixteen = "|".join(f"M{i}" for i in range(MAX_GPU_MODELS))
    assert JobSpec.from_dict({"image": "x", "gpu_model": sixteen}).gpu_model == sixteen
    with pytest.raises(JobSpecError) as refused:
        JobSpec.from_dict({"image": "x", "gpu_model": f"{sixteen}|M99"})
    assert refused.value.field == "gpu_model" and "at most 16" in str(refused.value)


def test_the_mix_forgets_the_spec_of_a_share_shape_once_no_share_of_it_is_left():
    # red-team #50: a submitted and killed share of a new shape (distinct cpus) kept its whole
    # spec, arguments and all (240 KB each), for the life of the scheduler
    from dlc.mesos.codec import MesosCodec
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.scheduler.placement.model import PlacementConfig
    from dlc.store.memory import MemoryJobStore
    from tests.scheduler.helpers import offer

    core = SchedulerCore(
        MemoryJobStore(), CoreConfig(placement=PlacementConfig("first-fit")),
        lambda s: (s.image or "img", None), codec=MesosCodec(),
    )  # fmt: skip
    core.on_offers([offer("o", "a1", [0, 1], attrs={"gpu_mem_mib": "16384"})])
    book = core.state.book.mix
    kept = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 0.5, "cpus": 3}))
    for i in range(20):
        spec = JobSpec.from_dict({"image": "img", "gpus": 0.5, "cpus": 1 + i / 1000,
                                  "command": ["sh", "-c", f"{i}" + "x" * 1000]})  # fmt: skip
        core.kill(core.submit("mallory", spec).job_id, "mallory")
    assert list(book._spec_of) == [(3.0, 0.5, None)]
    assert book._spec_of[(3.0, 0.5, None)] is kept.spec
    mix = book.mix(16384, lambda agent, gpu: None, 0)
    assert mix is not None and [s.cpu_milli for s in mix.shapes] == [3000]
