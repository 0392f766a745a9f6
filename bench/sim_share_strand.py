"""Where a policy strands GPU room behind CPU on an openb trace, and what it fails at saturation.

The direct replay (:func:`dlc.sim.replay.replay`'s loop: same arrivals and random stream as
``dlc simulate openb``), every decision recorded. Per policy it prints the first failed GPU pod,
the pods failed per window of arrived demand (by shape), and at each checkpoint the whole free
GPUs, the room in partly used GPUs, how much of it sits on nodes with under 4 cores left (per
node type), and which pods a node type holds (``--type``). Knobs as in
``bench/sim_engine_knobs.py`` (NAME=VALUE, applied to ``dlc``); docs/simulator.md,
"gpushare100 and multigpu40 against FGD"::

    .venv/bin/python bench/sim_share_strand.py --trace gpushare100 --seed 42 \
        --policies dlc,fgd --at 20,86 --type P100x2/16c [cap_max=none ...]
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay_probe as probe  # noqa: E402
import sim_engine_knobs as knobs  # noqa: E402

from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.trace import MILLI  # noqa: E402

WINDOWS = (0, 80, 86, 87, 88, 90, 95, 100, 110, 131)


def _state(cluster: ClusterState, on: dict, kind: str | None) -> list[str]:
    gl = cluster.gpu_left
    part = (gl > 0) & (gl < MILLI)
    poor = part & (cluster.cpu_left < 4000)[:, None]
    lines = [
        f"whole free GPUs {int((gl == MILLI).sum())}, room in partly used GPUs "
        f"{gl[part].sum() / MILLI:.1f} GPUs, of it on nodes with under 4 cores "
        f"{gl[poor].sum() / MILLI:.1f}"
    ]
    by: dict[str, float] = defaultdict(float)
    for n in np.flatnonzero(poor.any(axis=1)):
        by[probe.node_type(cluster, n)] += gl[n][poor[n]].sum() / MILLI
    top = sorted(by.items(), key=lambda kv: -kv[1])[:5]
    lines.append("  under 4 cores, by node type: " + ", ".join(f"{t} {v:.1f}" for t, v in top))
    if kind:
        held = Counter()
        whole = 0
        for n in range(len(cluster)):
            if probe.node_type(cluster, n) == kind:
                held.update(on.get(n, {}))
                whole += int((gl[n] == MILLI).sum())
        lines.append(f"  {kind}: {whole} whole GPUs free; holds {dict(held.most_common(8))}")
    return lines


def run(nodes, pods, policy_name: str, seed: int, at: list[float], kind: str | None) -> None:
    replay = probe.start(nodes, pods, policy_name, seed)
    cluster = replay.cluster
    first = None
    failed: dict[int, Counter] = defaultdict(Counter)
    gpus_failed: Counter = Counter()
    on: dict[int, Counter] = {}
    print(f"== {policy_name} seed {seed}")
    for pod, pct, crossed in replay.walk(at):
        for mark in crossed:
            print(f" at {mark}% of demand: " + "\n".join(_state(cluster, on, kind)))
        where = replay.decide(pod)
        if where is None:
            window = max(w for w in WINDOWS if w <= pct)
            failed[window][probe.shape(pod)] += 1
            gpus_failed[window] += pod.total_gpu_milli / MILLI
            if first is None and pod.num_gpu:
                first = pct
            continue
        replay.place(pod, where)
        on.setdefault(where.node, Counter())[probe.shape(pod)] += 1
    print(f" first failed GPU pod at {first:.2f}% of demand" if first else " no GPU pod failed")
    for lo, hi in zip(WINDOWS, WINDOWS[1:], strict=False):
        if failed[lo]:
            pods_ = sum(failed[lo].values())
            print(f" failed {lo}-{hi}%: {pods_} pods, {gpus_failed[lo]:.1f} GPUs:",
                  dict(failed[lo].most_common(5)))  # fmt: skip
    print(
        f" at the end: allocated {cluster.allocation_ratio():.3f}%, " + _state(cluster, on, None)[0]
    )


def main() -> None:
    parser = probe.arguments(__doc__, "gpushare100", 42, "20,86", policies="dlc,fgd")
    parser.add_argument("--type", help="a node type (as printed, e.g. P100x2/16c) to detail")
    args = parser.parse_args()
    knobs.apply(args.changes)
    nodes, pods = probe.load(args.trace)
    at = probe.percents(args.at)
    for name in args.policies.split(","):
        run(nodes, pods, name, args.seed, at, args.type)


if __name__ == "__main__":
    main()
