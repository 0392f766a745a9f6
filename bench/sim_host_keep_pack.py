"""``bench/sim_engine_knobs.py`` with host keep weighing a packing pod's own demand (an experiment).

docs/simulator.md, "multigpu40: packing hosts (round 3, session 13)". Host keep
charges a whole-GPU pod for the hosts of the scarce shapes an agent stops hosting (on
``multigpu40`` a 4-GPU 60.2-core 313 GiB pod on an empty 128-core G3 node pays for the 120-core
8-GPU pods' hosts), though two such pods pack that agent (every whole free GPU and 90% of its
CPU left or more). Here, on an agent the request packs, the charge is:

- ``pack=P``: multiplied by ``D / (D + P * d)``, ``D`` the expected GPU demand (mix weight x
  GPUs) of the charged shapes it stops hosting there, ``d`` the request shape's own;
- ``gate=G``: dropped while those shapes' hosts among the candidates outnumber ``G`` times
  their count in the mix (their demand so far, as an estimate of what is still to come);
- ``pair=W``: the packing-hosts term (:func:`pair_loss`) added with weight ``W``: the form
  it was measured in before it went into the engine as ``ScoreParams.host_keep_pair`` (the
  same term); on an engine that has it, run the others with ``host_keep_pair=0`` to measure
  them on the engine they were measured on.

In this process only; the other arguments are ``sim_engine_knobs.py``'s::

    .venv/bin/python bench/sim_host_keep_pack.py --trace multigpu40 --seeds 42 --out DIR \
        pack=1 host_keep_pair=0
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_engine_knobs as knobs  # noqa: E402

import dlc.scheduler.allocator.fragscore as fragscore  # noqa: E402
from dlc.scheduler.allocator import host_keep  # noqa: E402
from dlc.scheduler.allocator.shares import MILLI  # noqa: E402
from dlc.scheduler.placement import share_placement  # noqa: E402


def _packs(req, whole, cpu_left):
    """Per agent: ``k >= 2`` pods of ``req``'s shape take every whole free GPU and 90% of
    the CPU left or more."""
    k = whole // req.num_gpus
    if req.cpu_milli:
        k = np.minimum(k, cpu_left // req.cpu_milli)
    return (k >= 2) & (k * req.num_gpus == whole) & (k * req.cpu_milli >= 0.9 * cpu_left)


def _share(req, cpu_left, mem_left, gpu_left, guarded, min_spread, pack, gate):
    """Per agent, the part of the host keep charge ``req`` pays there."""
    ones = np.ones(len(cpu_left))
    own = (guarded.num == req.num_gpus) & (guarded.cpu == req.cpu_milli)
    if not own.any():
        return ones
    whole = (gpu_left >= MILLI).sum(axis=1)
    has_gpus = whole[:, None] >= guarded.num[None, :]
    hosts = has_gpus & (cpu_left[:, None] >= guarded.cpu[None, :])
    hosts &= mem_left[:, None] >= guarded.mem[None, :]
    value = host_keep._value(guarded, has_gpus.sum(axis=0), hosts.sum(axis=0), min_spread)
    after = (whole - req.num_gpus)[:, None] >= guarded.num[None, :]
    after &= (cpu_left - req.cpu_milli)[:, None] >= guarded.cpu[None, :]
    after &= (mem_left - req.mem_mib)[:, None] >= guarded.mem[None, :]
    gone = hosts & ~after & (value > 0)[None, :]
    packs = _packs(req, whole, cpu_left)
    if gate > 0:
        count = guarded.weight * guarded.total  # each shape's count in the mix
        seen = gone @ count
        left = np.where(gone, hosts.sum(axis=0)[None, :], 0).max(axis=1, initial=0)
        return np.where(packs & (left > gate * seen), 0.0, 1.0)
    demand = guarded.weight * guarded.num
    theirs, mine = gone @ demand, pack * float(demand[own].sum())
    share = np.divide(theirs, theirs + mine, out=ones.copy(), where=theirs > 0)
    return np.where(packs, share, 1.0)


def pair_loss(req, cpu_left, mem_left, gpu_left, guarded, min_spread):
    """``[agents]`` GPU thousandths of the pack hosts ``req`` takes away: an agent whose whole
    free GPUs are exactly a guarded shape's (2 GPUs or more) and whose CPU left that shape
    takes 85% of or more (the half of a G3 node beside a 4-GPU 60-core pod) packs one pod
    of it; the term is host keep's (weight x GPUs x concentration, from ``min_spread`` up)
    with those agents as the hosts. The request's own shape is not charged."""
    whole = (gpu_left >= MILLI).sum(axis=1)
    shaped = (guarded.num >= 2) & ~((guarded.num == req.num_gpus) & (guarded.cpu == req.cpu_milli))
    has_gpus = whole[:, None] >= guarded.num[None, :]
    fits = has_gpus & (cpu_left[:, None] >= guarded.cpu[None, :])
    fits &= mem_left[:, None] >= guarded.mem[None, :]
    hosts = fits & (whole[:, None] == guarded.num[None, :])
    hosts &= guarded.cpu[None, :] >= 0.85 * cpu_left[:, None]
    hosts &= shaped[None, :]
    value = host_keep._value(guarded, has_gpus.sum(axis=0), hosts.sum(axis=0), min_spread)
    value = np.where(shaped, value, 0.0)
    if not value.any():
        return np.zeros(gpu_left.shape)
    taken = req.num_gpus if not req.is_share else 1

    def lost(gpus):
        after = (whole - gpus)[:, None] >= guarded.num[None, :]
        after &= (cpu_left - req.cpu_milli)[:, None] >= guarded.cpu[None, :]
        after &= (mem_left - req.mem_mib)[:, None] >= guarded.mem[None, :]
        return (hosts & ~after) @ value

    if not req.is_share:
        return np.repeat(lost(taken)[:, None], gpu_left.shape[1], axis=1)
    return np.where(gpu_left >= MILLI, lost(1)[:, None], lost(0)[:, None])


def main() -> None:
    settings = {"pack": 0.0, "gate": 0.0, "pair": 0.0}
    for item in list(sys.argv[1:]):
        name, _, value = item.partition("=")
        if name in settings and value:
            settings[name] = float(value)
            sys.argv.remove(item)
    plain_loss, plain_guarded = fragscore.host_loss, host_keep.guarded_of

    def guarded_of(mix):
        """``host_keep.guarded_of``, keeping the mix's total count (it normalises by it)."""
        guarded = plain_guarded(mix)
        if guarded is not None:
            object.__setattr__(guarded, "total", float(sum(mix.weights)))
        return guarded

    pair = settings.pop("pair")

    def weighed(req, cpu_left, mem_left, gpu_left, guarded, min_spread=0.0, *shipped):
        out = plain_loss(req, cpu_left, mem_left, gpu_left, guarded, min_spread, *shipped)
        if pair:
            out = out + pair * pair_loss(req, cpu_left, mem_left, gpu_left, guarded, min_spread)
        if req.is_share or not req.num_gpus or not out.any():
            return out
        if not settings["pack"] and not settings["gate"]:
            return out
        share = _share(req, cpu_left, mem_left, gpu_left, guarded, min_spread, **settings)
        return out * share[:, None]

    host_keep.guarded_of = guarded_of
    fragscore.guarded_of = guarded_of
    share_placement.guarded_of = guarded_of
    fragscore.host_loss = weighed
    knobs.main()


if __name__ == "__main__":
    main()
