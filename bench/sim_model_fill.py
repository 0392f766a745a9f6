"""Which GPU models each policy fills first on a ``gpuspec`` trace, and which pods that fails.

The direct replay (:func:`dlc.sim.replay.replay`, same arrivals and random stream as ``dlc
simulate openb``), every decision recorded. Per policy: the GPU pods failed up to ``--upto``
percent of the arrived demand, by the GPU models they allow (pods, GPUs, the first failure),
and at each ``--at`` checkpoint, per GPU model, its whole free GPUs, the room left in partly
used ones, and whose pods (by allowed models, ``-``: any; ``share``: a share) hold its GPUs,
with the reserve's need per model under DLC's mix there. ``--why``: a line per failed
restricted pod, its shape and how many nodes of its models had its GPU room, also its CPUs,
also its memory. Knobs as in ``bench/sim_engine_knobs.py`` (NAME=VALUE, applied to ``dlc``;
``RESERVE=0``: the engine before the model reserve, ``SHARE_KEEP_COST=0``: before share
keep); docs/simulator.md, "Model reserve" and "Share keep"::

    .venv/bin/python bench/sim_model_fill.py --trace gpuspec33 --seed 44 --policies dlc,fgd \
        --at 20,45,70 --upto 70
    .venv/bin/python bench/sim_model_fill.py --trace gpuspec10 --seed 42 --policies dlc,fgd \
        --at 10,20,26,38 --upto 40 --why SHARE_KEEP_COST=0
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

from dlc.scheduler.allocator import mix_models  # noqa: E402
from dlc.scheduler.allocator.shares import MixArrays  # noqa: E402
from dlc.scheduler.jobs.job import Job  # noqa: E402
from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.openb_jobs import spec_of  # noqa: E402
from dlc.sim.trace import MILLI, PodSpec  # noqa: E402


def _spec(pod: PodSpec) -> str:
    return "|".join(sorted(pod.gpu_models)) or "-"


def _holder(pod: PodSpec) -> str:
    """Who holds GPUs, for the checkpoints: the allowed models, and whether a share."""
    return _spec(pod) + (" share" if 0 < pod.gpu_milli < MILLI else "")


def _why(cluster: ClusterState, pod: PodSpec, pct: float) -> str:
    """One line on a failed pod: its shape, and how many of the nodes of its GPU models
    have its GPU room, also its CPUs, also its memory (the last is 0: it failed)."""
    mine = cluster.access(pod.gpu_models)
    gpu = cluster.gpus_fitting(pod).sum(axis=1) >= max(pod.num_gpu, 1)
    cpu = cluster.cpu_left >= pod.cpu_milli
    mem = cluster.mem_left >= pod.memory_mib
    shape = f"{pod.num_gpu}x{pod.gpu_milli} GPU, {pod.cpu_milli / 1000:g} CPUs"
    return (
        f"  {pct:.1f}% {_spec(pod)} {shape}: of {int(mine.sum())} nodes, GPU room on "
        f"{int((mine & gpu).sum())}, and CPUs on {int((mine & gpu & cpu).sum())}, "
        f"and memory on {int((mine & gpu & cpu & mem).sum())}; CPUs on "
        f"{int((mine & cpu).sum())} (GPU room or not)"
    )


def _needs(policy: object, pod: PodSpec) -> str:
    """Per GPU model, the reserve's need (``mix_models.reserved``: the restricted demand it
    can host, of the mix's GPU demand, in thousandths) under the mix the engine would score
    ``pod`` against; empty for a policy without one (FGD)."""
    mix_of = getattr(policy, "mix", None)
    if mix_of is None:
        return ""
    mix = mix_of(Job(job_id="probe", user="openb", spec=spec_of(pod)))
    if mix is None:
        return ""
    arrays = MixArrays(mix, mix_models.MODELS.names)
    if not arrays.constrained:
        return " reserve: no restricted shape in the mix"
    restricted = np.array([bool(s.gpu_models) for s in arrays.shapes])
    demand = arrays.weight * arrays.milli * arrays.num
    need = arrays.access[:, restricted] @ demand[restricted] / demand.sum()
    names = mix_models.MODELS.names
    text = ", ".join(f"{names[k]} {1000 * v:.1f}" for k, v in enumerate(need) if v > 0)
    shapes = sum(bool(s.gpu_models) for s in arrays.shapes)
    return f" reserve need (thousandths; {shapes} restricted shapes in the mix): {text}"


def _models(cluster: ClusterState, held: dict[str, Counter]) -> list[str]:
    lines = []
    for k, model in enumerate(cluster.model_names):
        gl = cluster.gpu_left[cluster.model == k]
        whole, part = int((gl == MILLI).sum()), gl[(gl > 0) & (gl < MILLI)].sum() / MILLI
        top = {s: round(v / MILLI, 1) for s, v in held[model].most_common(6)}
        lines.append(f"  {model}: whole free {whole}, room in partly used {part:.1f}; held {top}")
    return lines


def run(nodes, pods, name: str, seed: int, at: list[float], upto: float, why: bool = False) -> None:
    replay = probe.start(nodes, pods, name, seed)
    cluster = replay.cluster
    held: dict[str, Counter] = defaultdict(Counter)
    failed: Counter = Counter()
    gpus: Counter = Counter()
    first: dict[str, float] = {}
    print(f"== {name} seed {seed}")
    for pod, pct, crossed in replay.walk(at):
        for mark in crossed:
            print(f" at {mark}% of demand:", *_models(cluster, held), sep="\n")
            print(_needs(replay.policy, pod))
        where = replay.decide(pod)
        if where is None:
            if pod.num_gpu and pct <= upto:
                if why and pod.gpu_models:
                    print(_why(cluster, pod, pct))
                failed[_spec(pod)] += 1
                gpus[_spec(pod)] += pod.total_gpu_milli
                first.setdefault(_spec(pod), pct)
            continue
        replay.place(pod, where)
        model = cluster.model_names[int(cluster.model[where.node])]
        held[model][_holder(pod)] += pod.total_gpu_milli
    print(f" GPU pods failed up to {upto}%: {sum(failed.values())}, "
          f"{sum(gpus.values()) / MILLI:.1f} GPUs")  # fmt: skip
    for spec, milli in gpus.most_common(8):
        share = f"{failed[spec]} pods, {milli / MILLI:.1f} GPUs"
        print(f"  {spec}: {share}, first at {first[spec]:.1f}%")


def main() -> None:
    parser = probe.arguments(__doc__, "gpuspec33", 44, "20,45,70", policies="dlc,fgd")
    parser.add_argument("--upto", type=float, default=70.0, help="count failures up to here")
    parser.add_argument(
        "--why", action="store_true", help="a line per failed restricted pod: what it lacked"
    )
    args = parser.parse_args()
    knobs.apply(args.changes)  # RESERVE=0, SHARE_KEEP_COST=... included (sim_engine_knobs)
    nodes, pods = probe.load(args.trace)
    for name in args.policies.split(","):
        run(nodes, pods, name, args.seed, probe.percents(args.at), args.upto, args.why)


if __name__ == "__main__":
    main()
