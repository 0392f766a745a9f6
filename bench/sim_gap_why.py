"""Why DLC's placements break agents with 8 GPUs free: each decision's cost parts, recorded.

The direct replay of ``dlc`` (``dlc simulate openb``'s arrivals and engine) up to ``--to`` percent
of demand. From ``--from`` on, every decision with more than one candidate is recorded: whole-GPU
and CPU-only jobs at :meth:`~dlc.scheduler.placement.whole_score.WholeScore.order`, shares at
:func:`~dlc.scheduler.allocator.fragscore.choose`. For the winner and for the best candidate that
is not a whole GPU of an agent with all 8 GPUs free, it keeps the measure's cost (bucketed growth)
and the host keep term. It prints how many decisions broke such an agent, and why: the measure
put it strictly lower, the host keep term did, or a tie. Knobs as in
``bench/sim_engine_knobs.py`` (NAME=VALUE); docs/simulator.md, "The gpushare mid-load gap"::

    .venv/bin/python bench/sim_gap_why.py --trace gpushare40 --seed 48 --from 20 --to 84
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_engine_knobs as knobs  # noqa: E402

from dlc.scheduler.allocator import fragscore  # noqa: E402
from dlc.scheduler.allocator import shares as fgd  # noqa: E402
from dlc.scheduler.placement.whole_score import WholeScore  # noqa: E402
from dlc.sim import io  # noqa: E402
from dlc.sim.cluster import ClusterState  # noqa: E402
from dlc.sim.frag import FragModel, FragState  # noqa: E402
from dlc.sim.policies import get_policy  # noqa: E402
from dlc.sim.policies.base import ClusterView  # noqa: E402
from dlc.sim.workload import arrival_sequence, target_mix  # noqa: E402


class Recorder:
    """Wraps the two decision points; ``events`` holds one dict per recorded decision."""

    def __init__(self, cluster: ClusterState, lo: float):
        self.lo, self.pct, self.events = lo, 0.0, []
        self.gpus = {name: int(cluster.gpu_count[n]) for n, name in enumerate(cluster.names)}
        self._order, self._choose = WholeScore.order, fragscore.choose
        WholeScore.order = self._wrap_order()  # type: ignore[method-assign]
        fragscore.choose = self._wrap_choose()

    def _keep(self, kind: str, empty: np.ndarray, base: np.ndarray, extra: np.ndarray,
              win: int, able: np.ndarray) -> None:  # fmt: skip
        event = {"kind": kind, "breaks": bool(empty[win]), "win": (base[win], extra[win])}
        alt = np.flatnonzero(~empty & able & np.isfinite(base))
        if len(alt):
            k = alt[np.argmin(base[alt] + extra[alt])]
            event["alt"] = (base[k], extra[k])
        self.events.append(event)

    def _wrap_order(self):
        order, rec = self._order, self

        def wrapped(score, candidates, gpus, cpus, mem):
            out = order(score, candidates, gpus, cpus, mem)
            if rec.pct < rec.lo or len(candidates) < 2:
                return out
            at = np.array([score._row[id(c)] for c in candidates])
            rows = np.sort(at)
            req = fgd.ShareRequest(int(cpus * 1000), 0, gpus, 1000)
            base = score._cost(req, rows)[at]
            extra = fragscore.host_keep_cost(
                req, score._agents, rows, score._guarded, score._params
            )
            extra = np.zeros(len(at)) if extra is None else extra[np.searchsorted(rows, at), 0]
            free = score._free[at]
            empty = np.array(
                [
                    rec.gpus[c.agent_id] == 8 and f == 8
                    for c, f in zip(candidates, free, strict=True)
                ]
            )
            able = np.array([c.cpus >= cpus - 1e-9 and c.mem >= mem - 1e-9 for c in candidates])
            kind = "cpu-only" if not gpus else f"{gpus}-GPU"
            rec._keep(kind, empty, base, extra, candidates.index(out[0]), able)
            return out

        return wrapped

    def _wrap_choose(self):
        choose, rec = self._choose, self

        def wrapped(req, agents, mix, params=fragscore.DEFAULT_PARAMS, frag=None, guarded=None):
            out = choose(req, agents, mix, params, frag, guarded)
            # the share path's caller (share_placement._choose_in_arrays) holds the agents
            caller = sys._getframe(1).f_locals
            if rec.pct < rec.lo or out is None or "chosen" not in caller:
                return out
            slots = [caller["room"].slots[k] for k in caller["chosen"]]
            every = np.arange(len(agents.model))
            base = fragscore.node_costs(req, agents, mix, every, params, frag)
            extra = fragscore.host_keep_cost(req, agents, every, guarded, params)
            extra = np.zeros_like(base) if extra is None else extra
            whole = agents.gpu_left == 1000
            empty = np.array([rec.gpus[s.agent_id] == 8 and len(s.free) == 8 for s in slots])
            empty = empty[:, None] & whole
            win = out.agent * base.shape[1] + out.gpus[0]
            rec._keep("share", empty.ravel(), base.ravel(), extra.ravel(), win,
                      np.ones(base.size, dtype=bool))  # fmt: skip
            return out

        return wrapped


def report(events: list[dict]) -> None:
    """Decisions by kind, those that broke an empty 8-GPU agent, and why."""
    kinds = Counter(e["kind"] for e in events)
    why: Counter = Counter()
    gaps: Counter = Counter()
    for e in events:
        if not e["breaks"]:
            continue
        if "alt" not in e:
            why[(e["kind"], "no other candidate")] += 1
            continue
        (wb, we), (ab, ae) = e["win"], e["alt"]
        cause = "tie, order" if wb + we >= ab + ae else "measure lower" if wb < ab else "host keep"
        why[(e["kind"], cause)] += 1
        gaps[(e["kind"], f"{wb:+.0f}{we:+.1f} vs {ab:+.0f}{ae:+.1f}")] += 1
    print("decisions with a choice:", dict(kinds))
    for (kind, cause), n in sorted(why.items()):
        print(f"  broke an empty 8-GPU agent: {kind:8s} {cause:20s} {n}")
    print("  most common (winner's measure+host keep vs the best other, in buckets):")
    for (kind, text), n in gaps.most_common(8):
        print(f"    {n:4d} {kind:8s} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gpushare40")
    parser.add_argument("--seed", type=int, default=48)
    parser.add_argument("--from", dest="lo", type=float, default=20.0)
    parser.add_argument("--to", dest="hi", type=float, default=84.0)
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    args = parser.parse_args()
    knobs.apply(args.changes)
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
    cluster = ClusterState(nodes)
    rec = Recorder(cluster, args.lo)
    rng = np.random.default_rng(args.seed)
    arrivals = arrival_sequence(pods, cluster.total_gpu_milli, 1.3, rng)
    policy = get_policy("dlc")
    frag = FragState(FragModel(target_mix(pods), cluster.model_names), cluster)
    view = ClusterView(cluster, frag)
    so_far = 0
    for pod in arrivals:
        so_far += pod.total_gpu_milli
        rec.pct = 100 * so_far / cluster.total_gpu_milli
        if rec.pct > args.hi:
            break
        placed = policy(pod, view, rng)
        if placed is not None:
            cluster.place(pod, placed)
            view.frag.update(placed.node)
    print(f"== {args.trace} seed {args.seed}, {args.lo:g}-{args.hi:g}% of demand")
    report(rec.events)


if __name__ == "__main__":
    main()
