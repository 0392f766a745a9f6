"""What each policy refuses and leaves free on an openb trace, at given percents of demand.

The direct replay (:func:`dlc.sim.replay.replay`'s loop, same arrivals and random stream as
``dlc simulate openb``), with the cluster read when the arrived GPU demand first reaches each
checkpoint. Per policy and seed it prints the allocation ratio, the refused pods by shape
(GPUs x thousandths, cores, GiB) up to the first checkpoint and between checkpoints, and per
node type (GPU model, GPUs, cores) the free GPU capacity: whole free GPUs, free thousandths
on partly used GPUs, and how much of the free capacity sits on nodes with under 4 cores or
under 8 GiB left. Knobs as in ``bench/sim_engine_knobs.py`` (NAME=VALUE, applied to ``dlc``)::

    .venv/bin/python bench/sim_leftovers.py --trace multigpu40 --seeds 42,43 \
        --policies dlc,fgd --at 100,130 [host_keep=0 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
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


def _shape(pod) -> str:
    return f"{pod.num_gpu}x{pod.gpu_milli} {pod.cpu_milli / 1000:g}c {pod.memory_mib / 1024:.0f}G"


def _leftovers(cluster: ClusterState, names: list[str], on: dict) -> dict:
    """Free GPU capacity per node type (model, GPUs, cores), in GPUs."""
    out: dict[str, Counter] = {}
    whole = cluster.gpu_left == MILLI
    partial = np.where(whole, 0, cluster.gpu_left).sum(axis=1) / MILLI
    free = cluster.gpu_left.sum(axis=1) / MILLI
    cpu_poor, mem_poor = cluster.cpu_left < 4000, cluster.mem_left < 8192
    poor = cpu_poor | mem_poor
    for n in range(len(cluster)):
        key = (
            f"{names[cluster.model[n]]} {cluster.gpu_count[n]}g {cluster.cpu_capacity[n] // 1000}c"
        )
        c = out.setdefault(key, Counter())
        c["nodes"] += 1
        c["whole"] += int(whole[n].sum())
        c["partial"] += float(partial[n])
        c["free_on_poor"] += float(free[n]) if poor[n] else 0.0
        c["whole_on_poor"] += int(whole[n].sum()) if poor[n] else 0
        c["whole_cpu_poor"] += int(whole[n].sum()) if cpu_poor[n] else 0
        c["whole_mem_poor"] += int(whole[n].sum()) if mem_poor[n] else 0
        c["empty_nodes"] += int(whole[n].sum() == cluster.gpu_count[n] and cluster.gpu_count[n] > 0)
        c["cores_left"] += float(cluster.cpu_left[n]) / 1000
    table = {k: {f: round(v, 2) for f, v in c.items()} for k, c in sorted(out.items())}
    holes = [
        f"{names[cluster.model[n]]} {int(whole[n].sum())}w {cluster.cpu_left[n] / 1000:g}c "
        f"{cluster.mem_left[n] / 1024:.1f}G ["
        + ", ".join(f"{k}x {s}" for s, k in on.get(n, {}).items())
        + "]"
        for n in np.flatnonzero(whole.any(axis=1))
    ]
    big: dict[str, Counter] = {}  # where the pods of 4 GPUs or more went, per node type
    for n, shapes in on.items():
        key = f"{names[cluster.model[n]]} {cluster.gpu_count[n]}g"
        for s, k in shapes.items():
            if int(s.split("x")[0]) >= 4:
                big.setdefault(s, Counter())[key] += k
    big_out = {s: dict(c) for s, c in sorted(big.items())}
    return {"by_type": table, "whole_gpu_nodes": holes, "big_pods_on": big_out}


def run(nodes, pods, policy_name: str, seed: int, at: list[int]) -> dict:
    mix = target_mix(pods)
    cluster = ClusterState(nodes)
    total = cluster.total_gpu_milli
    rng = np.random.default_rng(seed)
    arrivals = arrival_sequence(pods, total, 1.3, rng)
    policy = get_policy(policy_name)
    view = ClusterView(cluster, FragState(FragModel(mix, cluster.model_names), cluster))
    marks = sorted(at)
    so_far, failed, out, on = 0, Counter(), [], {}
    final = sum(p.total_gpu_milli for p in arrivals)
    for pod in arrivals:
        so_far += pod.total_gpu_milli
        where = policy(pod, view, rng)
        if where is None:
            failed[_shape(pod)] += 1
        else:
            cluster.place(pod, where)
            on.setdefault(where.node, Counter())[_shape(pod)] += 1
            view.frag.update(where.node)
        while marks and (so_far >= marks[0] / 100 * total or so_far == final):
            out.append({
                "at": marks.pop(0),
                "arrived": round(100 * so_far / total, 2),
                "alloc": round(cluster.allocation_ratio(), 3),
                "failed": dict(failed.most_common()),
                "failed_gpus": round(sum(_gpus(s) * k for s, k in failed.items()), 2),
                "free": _leftovers(cluster, cluster.model_names, on),
            })  # fmt: skip
            failed = Counter()
    return {"policy": policy_name, "seed": seed, "checkpoints": out}


def _gpus(shape: str) -> float:
    n, milli = shape.split()[0].split("x")
    return int(n) * int(milli) / MILLI


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="multigpu40")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--policies", default="dlc,fgd")
    parser.add_argument("--at", default="100,130", help="percents of the GPUs arrived")
    parser.add_argument("--out", help="write the JSON here")
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    args = parser.parse_args()
    knobs.apply(args.changes)
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
    at = [int(a) for a in args.at.split(",")]
    results = [
        run(nodes, pods, p, int(s), at)
        for s in args.seeds.split(",")
        for p in args.policies.split(",")
    ]
    text = json.dumps(results, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    for r in results:
        for c in r["checkpoints"]:
            head = f"{r['policy']} seed {r['seed']} at {c['at']}% ({c['arrived']})"
            refused = f"{sum(c['failed'].values())} pods / {c['failed_gpus']} GPUs"
            print(f"{head}: alloc {c['alloc']}, refused {refused}")
            for shape, k in list(c["failed"].items())[:8]:
                print(f"    refused {k:4d} x {shape}")
            for key, f in c["free"]["by_type"].items():
                print(f"    {key:18s} " + " ".join(f"{n}={v}" for n, v in f.items()))
            print("    nodes with whole free GPUs:", "; ".join(c["free"]["whole_gpu_nodes"]))
            for shape, where in c["free"]["big_pods_on"].items():
                print(f"    placed {shape}: {where}")


if __name__ == "__main__":
    main()
