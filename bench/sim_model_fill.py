"""Which GPU models each policy fills first on a ``gpuspec`` trace, and which pods that fails.

The direct replay (:func:`dlc.sim.replay.replay`, same arrivals and random stream as ``dlc
simulate openb``), every decision recorded. Per policy: the GPU pods failed up to ``--upto``
percent of the arrived demand, by the GPU models they allow (pods, GPUs, the first failure),
and at each ``--at`` checkpoint, per GPU model, its whole free GPUs, the room left in partly
used ones, and whose pods (by allowed models, ``-``: any) hold its GPUs. Knobs as in
``bench/sim_engine_knobs.py`` (NAME=VALUE, applied to ``dlc``), and ``RESERVE=0`` for the
engine before the model reserve (``mix_models.RESERVE``); docs/simulator.md, "Model reserve"::

    .venv/bin/python bench/sim_model_fill.py --trace gpuspec33 --seed 44 --policies dlc,fgd \
        --at 20,45,70 --upto 70
"""

from __future__ import annotations

import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay_probe as probe  # noqa: E402
import sim_engine_knobs as knobs  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.trace import MILLI, PodSpec  # noqa: E402


def _spec(pod: PodSpec) -> str:
    return "|".join(sorted(pod.gpu_models)) or "-"


def _models(cluster: ClusterState, held: dict[str, Counter]) -> list[str]:
    lines = []
    for k, model in enumerate(cluster.model_names):
        gl = cluster.gpu_left[cluster.model == k]
        whole, part = int((gl == MILLI).sum()), gl[(gl > 0) & (gl < MILLI)].sum() / MILLI
        top = {s: round(v / MILLI, 1) for s, v in held[model].most_common(4)}
        lines.append(f"  {model}: whole free {whole}, room in partly used {part:.1f}; held {top}")
    return lines


def run(nodes, pods, name: str, seed: int, at: list[float], upto: float) -> None:
    replay = probe.start(nodes, pods, name, seed)
    cluster, total = replay.cluster, replay.total
    marks, so_far = sorted(at), 0
    held: dict[str, Counter] = defaultdict(Counter)
    failed: Counter = Counter()
    gpus: Counter = Counter()
    first: dict[str, float] = {}
    print(f"== {name} seed {seed}")
    for pod in replay.arrivals:
        so_far += pod.total_gpu_milli
        while marks and so_far > marks[0] / 100 * total:
            print(f" at {marks.pop(0)}% of demand:", *_models(cluster, held), sep="\n")
        where = replay.decide(pod)
        pct = 100 * so_far / total
        if where is None:
            if pod.num_gpu and pct <= upto:
                failed[_spec(pod)] += 1
                gpus[_spec(pod)] += pod.total_gpu_milli
                first.setdefault(_spec(pod), pct)
            continue
        replay.place(pod, where)
        model = cluster.model_names[int(cluster.model[where.node])]
        held[model][_spec(pod)] += pod.total_gpu_milli
    print(f" GPU pods failed up to {upto}%: {sum(failed.values())}, "
          f"{sum(gpus.values()) / MILLI:.1f} GPUs")  # fmt: skip
    for spec, milli in gpus.most_common(8):
        share = f"{failed[spec]} pods, {milli / MILLI:.1f} GPUs"
        print(f"  {spec}: {share}, first at {first[spec]:.1f}%")


def main() -> None:
    parser = probe.arguments(__doc__, "gpuspec33", 44, "20,45,70", policies="dlc,fgd")
    parser.add_argument("--upto", type=float, default=70.0, help="count failures up to here")
    args = parser.parse_args()
    knobs.apply(args.changes)  # RESERVE=0 included (sim_engine_knobs.MODEL_CONSTANTS)
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
    at = [float(a) for a in args.at.split(",")]
    for name in args.policies.split(","):
        run(nodes, pods, name, args.seed, at, args.upto)


if __name__ == "__main__":
    main()
