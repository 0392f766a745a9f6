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

import argparse
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_engine_knobs as knobs  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.frag import FragModel, FragState  # noqa: E402
from dlc.sim.policies import get_policy  # noqa: E402
from dlc.sim.policies.base import ClusterView  # noqa: E402
from dlc.sim.trace import MILLI  # noqa: E402
from dlc.sim.workload import arrival_sequence, target_mix  # noqa: E402

WINDOWS = (0, 80, 86, 87, 88, 90, 95, 100, 110, 131)


def _shape(pod) -> str:
    if not pod.num_gpu:
        return f"cpu-only {pod.cpu_milli / 1000:g}c"
    return f"{pod.num_gpu}x{pod.gpu_milli} {pod.cpu_milli / 1000:g}c"


def _type(cluster: ClusterState, n: int) -> str:
    model = cluster.model_names[cluster.model[n]]
    return f"{model}x{cluster.gpu_count[n]}/{cluster.cpu_capacity[n] // 1000}c"


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
        by[_type(cluster, n)] += gl[n][poor[n]].sum() / MILLI
    top = sorted(by.items(), key=lambda kv: -kv[1])[:5]
    lines.append("  under 4 cores, by node type: " + ", ".join(f"{t} {v:.1f}" for t, v in top))
    if kind:
        held = Counter()
        whole = 0
        for n in range(len(cluster)):
            if _type(cluster, n) == kind:
                held.update(on.get(n, {}))
                whole += int((gl[n] == MILLI).sum())
        lines.append(f"  {kind}: {whole} whole GPUs free; holds {dict(held.most_common(8))}")
    return lines


def run(nodes, pods, policy_name: str, seed: int, at: list[float], kind: str | None) -> None:
    cluster = ClusterState(nodes)
    total = cluster.total_gpu_milli
    rng = np.random.default_rng(seed)
    arrivals = arrival_sequence(pods, total, 1.3, rng)
    policy = get_policy(policy_name)
    view = ClusterView(
        cluster, FragState(FragModel(target_mix(pods), cluster.model_names), cluster)
    )
    marks, so_far, first = sorted(at), 0, None
    failed: dict[int, Counter] = defaultdict(Counter)
    gpus_failed: Counter = Counter()
    on: dict[int, Counter] = {}
    print(f"== {policy_name} seed {seed}")
    for pod in arrivals:
        so_far += pod.total_gpu_milli
        while marks and so_far > marks[0] / 100 * total:
            print(f" at {marks.pop(0)}% of demand: " + "\n".join(_state(cluster, on, kind)))
        where = policy(pod, view, rng)
        pct = 100 * so_far / total
        if where is None:
            window = max(w for w in WINDOWS if w <= pct)
            failed[window][_shape(pod)] += 1
            gpus_failed[window] += pod.total_gpu_milli / MILLI
            if first is None and pod.num_gpu:
                first = pct
            continue
        cluster.place(pod, where)
        view.frag.update(where.node)
        on.setdefault(where.node, Counter())[_shape(pod)] += 1
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gpushare100")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--policies", default="dlc,fgd")
    parser.add_argument("--at", default="20,86", help="percents of the GPUs arrived")
    parser.add_argument("--type", help="a node type (as printed, e.g. P100x2/16c) to detail")
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    args = parser.parse_args()
    knobs.apply(args.changes)
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
    at = [float(a) for a in args.at.split(",")]
    for name in args.policies.split(","):
        run(nodes, pods, name, args.seed, at, args.type)


if __name__ == "__main__":
    main()
