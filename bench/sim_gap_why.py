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

``--alt NAME=VALUE[,...]`` (repeatable) records instead, for every decision with a choice, where
the engine would have placed the pod with those host keep knobs, and prints how many each
places elsewhere and whether the engine's winner had fewer cores left (docs/simulator.md,
"cpu300: the host keep terms at CPU saturation")::

    .venv/bin/python bench/sim_gap_why.py --trace cpu300 --seed 44 --from 70 --to 131 \
        --alt host_keep_among=gpus --alt host_keep_pair=0
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


def _share_slots(frame) -> list | None:
    """The agents' slots, in ``fragscore.choose``'s order, when the share path called it
    (``share_placement._choose_in_arrays`` holds them as ``room`` and ``chosen``); else None."""
    caller = frame.f_locals
    if "chosen" not in caller:
        return None
    return [caller["room"].slots[k] for k in caller["chosen"]]


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

        def wrapped(
            req, agents, mix, params=fragscore.DEFAULT_PARAMS, frag=None, guarded=None, extra=None
        ):
            out = choose(req, agents, mix, params, frag, guarded, extra)
            slots = _share_slots(sys._getframe(1))
            if rec.pct < rec.lo or out is None or slots is None:
                return out
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


class Mover:
    """With ``--alt``: for each decision with a choice, where the engine would have placed the
    pod with other host keep knobs (``ScoreParams`` fields differing in the term only, so the
    cached measure is the same), and the cores left on both winners."""

    def __init__(self, cluster: ClusterState, alts: dict[str, fragscore.ScoreParams]):
        self.cluster, self.alts, self.pct, self.events = cluster, alts, 0.0, []
        self.row = {name: n for n, name in enumerate(cluster.names)}
        self._order, self._choose = WholeScore.order, fragscore.choose
        WholeScore.order = self._wrap_order()  # type: ignore[method-assign]
        fragscore.choose = self._wrap_choose()

    def _keep(self, kind: str, win: str, alt: dict[str, str]) -> None:
        cores = self.cluster.cpu_left / 1000
        moved = {k: float(cores[self.row[win]] - cores[self.row[a]]) for k, a in alt.items()
                 if a != win}  # fmt: skip
        self.events.append({"kind": kind, "pct": self.pct, "moved": moved})

    def _wrap_order(self):
        order, rec = self._order, self

        def wrapped(score, candidates, gpus, cpus, mem):
            out = order(score, candidates, gpus, cpus, mem)
            if len(candidates) < 2:
                return out
            kept, alt = score._params, {}
            try:
                for name, params in rec.alts.items():
                    score._params = params
                    alt[name] = order(score, candidates, gpus, cpus, mem)[0].agent_id
            finally:
                score._params = kept
            rec._keep("cpu-only" if not gpus else f"{gpus}-GPU", out[0].agent_id, alt)
            return out

        return wrapped

    def _wrap_choose(self):
        choose, rec = self._choose, self

        def wrapped(
            req, agents, mix, params=fragscore.DEFAULT_PARAMS, frag=None, guarded=None, extra=None
        ):
            out = choose(req, agents, mix, params, frag, guarded, extra)
            slots = _share_slots(sys._getframe(1))
            if out is None or slots is None:
                return out
            alt = {}
            for name, other in rec.alts.items():
                placed = choose(req, agents, mix, other, frag, guarded, extra)
                alt[name] = slots[placed.agent].agent_id if placed else slots[out.agent].agent_id
            rec._keep("share", slots[out.agent].agent_id, alt)
            return out

        return wrapped


def report_moves(events: list[dict], alts: list[str], split: float) -> None:
    """Per alternative: the decisions it places elsewhere, by kind and before/after ``split``
    percent of demand, and whether the engine's winner had fewer cores left than the
    alternative's (the median difference)."""
    print(f"decisions with a choice: {len(events)}")
    for name in alts:
        groups: dict[tuple[str, str], list[float]] = {}
        for e in events:
            if name in e["moved"]:
                when = f"<{split:g}%" if e["pct"] < split else f"{split:g}%+"
                groups.setdefault((e["kind"], when), []).append(e["moved"][name])
        total = sum(len(v) for v in groups.values())
        print(f"  {name}: {total} placed elsewhere (the engine's winner has fewer cores left:"
              " poorer, more: richer; median cores, winner minus alternative)")  # fmt: skip
        for (kind, when), diffs in sorted(groups.items()):
            d = np.array(diffs)
            print(f"    {kind:8s} {when:6s} {len(d):5d}: poorer {(d < 0).sum():5d}, richer "
                  f"{(d > 0).sum():5d}, median {np.median(d):+.1f}")  # fmt: skip


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
    parser.add_argument(
        "--alt",
        action="append",
        default=[],
        help="NAME=VALUE[,NAME=VALUE] host keep knobs: report the decisions they place "
        "elsewhere instead, every decision, before and after --from (repeatable)",
    )
    parser.add_argument("changes", nargs="*", help="NAME=VALUE (dlc's knobs)")
    args = parser.parse_args()
    knobs.apply(args.changes)
    root = Path(os.environ.get("DLC_TRACES", "traces"))
    nodes, pods = io.load_nodes(root), io.load_pods(root, args.trace)
    cluster = ClusterState(nodes)
    alts = {
        text: knobs.params_with(dict(i.split("=", 1) for i in text.split(","))) for text in args.alt
    }
    rec = Mover(cluster, alts) if alts else Recorder(cluster, args.lo)
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
    if isinstance(rec, Mover):
        report_moves(rec.events, list(alts), args.lo)
    else:
        report(rec.events)


if __name__ == "__main__":
    main()
