"""``bench/sim_engine_knobs.py`` with host memory in the engine's mix (an experiment).

The core's mix counts shapes by CPU, GPU thousandths and GPUs only (``mem_mib=0``,
:func:`dlc.scheduler.placement.whole_score.counted_mix`), so DLC's fragmentation measure never sees
a GPU that host memory strands; FGD's measure does (a shape fits only where its memory does).
Here every shape of the engine's mix gets the median memory of the trace's pods of that
shape, in this process only; the arguments are ``sim_engine_knobs.py``'s (``mem_cap=1``
also caps what a shape can use by the pods the agent's memory still hosts)::

    .venv/bin/python bench/sim_mem_mix.py --trace multigpu40 --seeds 42 --out DIR [mem_cap=1]
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_engine_knobs as knobs  # noqa: E402

import dlc.sim.policies.engine as engine  # noqa: E402
from dlc.sim import io  # noqa: E402
from dlc.sim.trace import MILLI  # noqa: E402


def _memory_by_shape(trace: str) -> dict[tuple[int, int, int], int]:
    pods = io.load_pods(Path(os.environ.get("DLC_TRACES", "traces")), trace)
    seen: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for p in pods:
        if p.num_gpu and p.gpu_milli:
            whole = p.gpu_milli >= MILLI
            seen[(p.cpu_milli, min(p.gpu_milli, MILLI), p.num_gpu if whole else 1)].append(
                p.memory_mib
            )
    return {k: int(statistics.median(v)) for k, v in seen.items()}


def main() -> None:
    trace = sys.argv[sys.argv.index("--trace") + 1] if "--trace" in sys.argv else "multigpu40"
    memory = _memory_by_shape(trace)
    plain = engine.counted_mix

    def with_memory(counts):
        mix = plain(counts)
        if mix is None:
            return None

        def mem(s):
            return replace(s, mem_mib=memory.get((s.cpu_milli, s.gpu_milli, s.num_gpus), 0))

        return replace(
            mix,
            shapes=tuple(mem(s) for s in mix.shapes),
            guarded=tuple(mem(s) for s in mix.guarded),
        )

    engine.counted_mix = with_memory
    knobs.main()


if __name__ == "__main__":
    main()
