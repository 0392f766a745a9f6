"""Where DLC falls behind FGD mid-load on an openb trace: the pods one fails and the other places.

The direct replay (:func:`dlc.sim.replay.replay`'s loop: same arrivals and random stream as
``dlc simulate openb``), every decision of each policy recorded. For every failed GPU pod it
notes what blocked it on that policy's cluster at that moment: no node with the GPU room
("gpu"), nodes with the GPU room but none of them with the CPU ("cpu"), the memory ("mem"),
or either ("cpu+mem"). It prints, per window of arrived demand, the pods DLC fails and FGD
places (by shape and blocker), and at each checkpoint (``--at``) the free whole GPUs, the room
in partly used GPUs and the free CPU beside whole free GPUs, per node type, and the GPU room by
the cores left on its agent. ``--dump FILE``
keeps the records (pickle) for further reading; ``--against FILE`` compares ``dlc`` with the
``dlc`` of such a file (another engine's knobs) instead of FGD and prints the first pod the two
place differently. Knobs as in ``bench/sim_engine_knobs.py``
(NAME=VALUE, applied to ``dlc``); docs/simulator.md, "The gpushare mid-load gap"::

    .venv/bin/python bench/sim_gap_open.py --trace gpushare40 --seed 48 --at 80,86,90

Two engines on one trace (docs/simulator.md, "cpu300: the host keep terms at CPU saturation")::

    .venv/bin/python bench/sim_gap_open.py --trace cpu300 --seed 44 --at 86 --dlc-only \
        --dump /tmp/s12.pkl host_keep_among=gpus host_keep_pair=0
    .venv/bin/python bench/sim_gap_open.py --trace cpu300 --seed 44 --at 86 --against /tmp/s12.pkl
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay_probe as probe  # noqa: E402
import sim_engine_knobs as knobs  # noqa: E402
from replay_probe import node_type  # noqa: E402

from dlc.sim import io  # noqa: E402
from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.trace import MILLI, PodSpec  # noqa: E402

WINDOWS = (0, 70, 80, 84, 86, 88, 90, 92, 94, 96, 100, 131)


def shape(pod: PodSpec) -> str:
    """``GPUsxthousandths cores GiB``."""
    return probe.shape(pod, memory=True)


def blocker(cluster: ClusterState, pod: PodSpec) -> str:
    """What stops ``pod`` on ``cluster``: gpu, cpu, mem, cpu+mem, or none (it fits)."""
    gpu = cluster.access(pod.gpu_models) & (
        (cluster.gpu_left >= max(pod.gpu_milli, 1)).sum(axis=1) >= pod.num_gpu
    )
    cpu = cluster.cpu_left >= pod.cpu_milli
    mem = cluster.mem_left >= pod.memory_mib
    if not gpu.any():
        return "gpu"
    if (gpu & cpu & mem).any():
        return "none"
    if (gpu & mem).any():
        return "cpu"
    if (gpu & cpu).any():
        return "mem"
    return "cpu+mem"


def state(cluster: ClusterState) -> dict[str, dict[str, float]]:
    """Per node type: whole free GPUs, room in part-used GPUs, cores and GiB beside them."""
    gl = cluster.gpu_left
    whole = (gl == MILLI).sum(axis=1)
    part = np.where((gl > 0) & (gl < MILLI), gl, 0).sum(axis=1) / MILLI
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for n in range(len(cluster)):
        row = out[node_type(cluster, n)]
        row["nodes"] += 1
        row["whole"] += whole[n]
        row["part"] += part[n]
        row["cores_by_whole"] += cluster.cpu_left[n] / 1000 if whole[n] else 0
        row["whole_poor"] += whole[n] if cluster.cpu_left[n] < 4000 * whole[n] else 0
        row["cores"] += cluster.cpu_left[n] / 1000
    return {k: dict(v) for k, v in out.items()}


#: bins of the cores an agent has left, for :func:`room_by_cores`
CORE_BINS = (0, 1, 2, 4, 8, 16)


def room_by_cores(cluster: ClusterState) -> dict[str, float]:
    """GPU room (GPUs, whole and partly used) by the cores left on its agent: at saturation
    a pod that asks a few cores finds room only beside that many."""
    room = cluster.gpu_left.sum(axis=1) / MILLI
    cores = cluster.cpu_left / 1000
    edges = (*CORE_BINS, np.inf)
    out = {}
    for lo, hi in zip(edges, edges[1:], strict=False):
        out[f"{lo:g}+" if hi == np.inf else f"{lo:g}-{hi:g}"] = float(
            room[(cores >= lo) & (cores < hi)].sum()
        )
    return out


def run(nodes, pods, name: str, seed: int, at: list[float]) -> dict:
    """Replay ``name`` on seed ``seed``; the records (see the module docstring)."""
    replay = probe.start(nodes, pods, name, seed)
    cluster, total, arrivals = replay.cluster, replay.total, replay.arrivals
    marks, so_far = sorted(at), 0
    where: list[int] = []
    gpus: list[tuple[int, ...]] = []
    pct: list[float] = []
    blocked: dict[int, str] = {}
    snaps: dict[float, dict] = {}
    by_cores: dict[float, dict] = {}
    for i, pod in enumerate(arrivals):
        while marks and so_far + pod.total_gpu_milli > marks[0] / 100 * total:
            snaps[marks[0]] = state(cluster)
            by_cores[marks.pop(0)] = room_by_cores(cluster)
        so_far += pod.total_gpu_milli
        pct.append(100 * so_far / total)
        placed = replay.decide(pod)
        gpus.append(placed.gpus if placed is not None else ())
        if placed is None:
            where.append(-1)
            if pod.num_gpu:
                blocked[i] = blocker(cluster, pod)
            continue
        where.append(placed.node)
        replay.place(pod, placed)
    types = [node_type(cluster, n) for n in range(len(cluster))]
    return {"arrivals": arrivals, "where": where, "gpus": gpus, "pct": pct, "blocked": blocked,
            "snaps": snaps, "by_cores": by_cores, "types": types,
            "end": cluster.allocation_ratio()}  # fmt: skip


def first_change(rec: dict[str, dict], other: str) -> None:
    """The first pod the two replays place differently (same arrivals), and how many do."""
    dlc, base = rec["dlc"], rec[other]
    arrivals, pct = dlc["arrivals"], dlc["pct"]
    differ = [i for i, (a, b) in enumerate(zip(dlc["where"], base["where"], strict=True))
              if a != b]  # fmt: skip
    if not differ:
        print(f" dlc and {other} place every pod alike")
        return
    i = differ[0]

    def name(rec: dict, n: int) -> str:
        return rec["types"][n] if n >= 0 else "failed"

    print(
        f" {len(differ)} pods placed differently; the first, pod {i} at {pct[i]:.2f}% of "
        f"demand, {shape(arrivals[i])}: dlc {name(dlc, dlc['where'][i])} node "
        f"{dlc['where'][i]}, {other} {name(base, base['where'][i])} node {base['where'][i]}"
    )


def report(rec: dict[str, dict], other: str = "fgd") -> None:
    """Per window: the GPU pods DLC fails and ``other`` places, by shape and DLC's blocker."""
    dlc, fgd = rec["dlc"], rec[other]
    arrivals, pct = dlc["arrivals"], dlc["pct"]
    for lo, hi in zip(WINDOWS, WINDOWS[1:], strict=False):
        only = Counter()
        gpus = [0.0, 0.0]
        for i, p in enumerate(pct):
            if not lo <= p < hi or not arrivals[i].num_gpu:
                continue
            d, f = dlc["where"][i] < 0, fgd["where"][i] < 0
            gpus[0] += d * arrivals[i].total_gpu_milli / MILLI
            gpus[1] += f * arrivals[i].total_gpu_milli / MILLI
            if d and not f:
                only[(shape(arrivals[i]), dlc["blocked"][i], fgd["types"][fgd["where"][i]])] += 1
        if gpus[0] or gpus[1]:
            print(f" {lo}-{hi}%: GPUs failed dlc {gpus[0]:.1f} {other} {gpus[1]:.1f}; dlc only:")
            for (s, b, t), c in only.most_common(8):
                print(f"    {c:4d} {s:28s} dlc blocked by {b:7s} {other} put on {t}")
    for mark in dlc["snaps"]:
        if mark in dlc.get("by_cores", {}) and mark in fgd.get("by_cores", {}):
            d, f = dlc["by_cores"][mark], fgd["by_cores"][mark]
            print(f" at {mark}% of demand, GPU room by the cores left beside it (dlc | {other}): "
                  + ", ".join(f"{k} cores {d[k]:.0f} | {f[k]:.0f}" for k in d))  # fmt: skip
        print(f" at {mark}% of demand, per node type (dlc | {other}):")
        d, f = dlc["snaps"][mark], fgd["snaps"][mark]
        for t in sorted(d, key=lambda t: -d[t]["nodes"]):
            a, b = d[t], f[t]
            print(f"    {t:18s} n={a['nodes']:4.0f} whole {a['whole']:5.0f} | {b['whole']:5.0f}"
                  f"  part {a['part']:6.1f} | {b['part']:6.1f}"
                  f"  cores {a['cores']:7.0f} | {b['cores']:7.0f}"
                  f"  cores by whole {a['cores_by_whole']:6.0f} | {b['cores_by_whole']:6.0f}"
                  f"  whole <4c/GPU {a['whole_poor']:4.0f} | {b['whole_poor']:4.0f}")  # fmt: skip
    print(f" at the end: dlc {dlc['end']:.2f}%, {other} {fgd['end']:.2f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gpushare40")
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--at", default="80,86,90", help="percents of the GPUs arrived")
    parser.add_argument("--dump", help="pickle the records here")
    parser.add_argument("--load", help="read records pickled by --dump instead of replaying")
    parser.add_argument(
        "--against",
        help="compare dlc with the dlc of records pickled by --dump (another engine's knobs, "
        "called base) instead of fgd; no fgd replay",
    )
    parser.add_argument(
        "--dlc-only", action="store_true", help="replay dlc alone (to --dump for --against)"
    )
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    args = parser.parse_args()
    knobs.apply(args.changes)
    names = ("dlc",) if args.against or args.dlc_only else ("dlc", "fgd")
    if args.load:
        with open(args.load, "rb") as f:
            rec = pickle.load(f)
    else:
        root = Path(os.environ.get("DLC_TRACES", "traces"))
        nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
        at = [float(a) for a in args.at.split(",")]
        rec = {name: run(nodes, pods, name, args.seed, at) for name in names}
        rec["dlc"]["run"] = (args.trace, args.seed)
        if args.dump:
            with open(args.dump, "wb") as f:
                pickle.dump(rec, f)
    trace, seed = rec["dlc"].get("run", (args.trace, args.seed))
    print(f"== {trace} seed {seed}")
    if "fgd" not in rec and not args.against:
        return
    other = "fgd"
    if args.against:
        with open(args.against, "rb") as f:
            rec["base"] = pickle.load(f)["dlc"]
        other = "base"
        first_change(rec, other)
    report(rec, other)


if __name__ == "__main__":
    main()
