"""The direct openb replay through the production engine with one scoring knob changed.

Each row of docs/simulator.md's "Measured again in round 3, session 6" table::

    .venv/bin/python bench/sim_engine_knobs.py --trace multigpu40 --seeds 42 \
        --out /tmp/knobs/pop1 POPULARITY=1.0
    .venv/bin/python bench/sim_engine_knobs.py --trace multigpu40 --seeds 42 \
        --out /tmp/knobs/pure POPULARITY=1.0 cpu_cap=none granular=0

``POPULARITY`` and ``GPU_SHARE`` are :mod:`dlc.scheduler.placement.whole_score`'s mix
constants, ``RESERVE`` and ``SHARE_KEEP_COST`` :mod:`dlc.scheduler.allocator.mix_models`'s; any
other name is a field of :class:`dlc.scheduler.allocator.fragscore.ScoreParams` (booleans as
0/1). The change is made in this process only (module constants and the defaults that hold
``DEFAULT_PARAMS``), then ``dlc simulate openb --policy dlc`` runs as usual (``--mode core``:
through the scheduler core, as ``dlc simulate openb --mode core``).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dlc.scheduler.allocator.fragscore as fragscore  # noqa: E402
import dlc.scheduler.allocator.mix_models as mix_models  # noqa: E402
import dlc.scheduler.placement.placer  # noqa: E402, F401  (imported before the defaults are patched)
import dlc.scheduler.placement.share_placement  # noqa: E402, F401
import dlc.scheduler.placement.whole_score as whole_score  # noqa: E402
import dlc.sim.policies.engine  # noqa: E402, F401
from dlc.cli.main import main as dlc_main  # noqa: E402

MIX_CONSTANTS = ("POPULARITY", "GPU_SHARE", "RESTRICTED_ALL")
#: mix_models' reserve constants (``RESERVE=0``: the engine before the model reserve;
#: ``SHARE_KEEP_COST=0``: shares ignore it, the engine before session 14)
RESERVE_CONSTANTS = ("RESERVE", "SHARE_KEEP_COST")


def params_with(changes: dict[str, str]) -> fragscore.ScoreParams:
    """The default ``ScoreParams`` (as now set) with ``changes`` (field name -> text)."""
    fields = {}
    for name, text in changes.items():
        current = getattr(fragscore.DEFAULT_PARAMS, name)
        fields[name] = text == "1" if isinstance(current, bool) else type(current)(text)
    return dataclasses.replace(fragscore.DEFAULT_PARAMS, **fields)


def _use(params: fragscore.ScoreParams) -> None:
    """Make ``params`` the default everywhere ``DEFAULT_PARAMS`` was bound (module names and
    default arguments of functions and methods of the loaded ``dlc`` modules)."""
    old = fragscore.DEFAULT_PARAMS
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("dlc."):
            continue
        if getattr(module, "DEFAULT_PARAMS", None) is old:
            module.DEFAULT_PARAMS = params
        for value in vars(module).values():
            functions = [value] if inspect.isfunction(value) else []
            if inspect.isclass(value):
                functions = [f for f in vars(value).values() if inspect.isfunction(f)]
            for fn in functions:
                if fn.__defaults__:
                    fn.__defaults__ = tuple(params if d is old else d for d in fn.__defaults__)


def apply(items: list[str]) -> None:
    """Apply ``NAME=VALUE`` knobs: the mix constants of ``whole_score`` (``MIX_CONSTANTS``)
    and ``mix_models`` (``RESERVE_CONSTANTS``) by name, every other name as a ``ScoreParams``
    field made the default everywhere."""
    changes = dict(item.split("=", 1) for item in items)
    for name in MIX_CONSTANTS:
        if name in changes:
            setattr(whole_score, name, float(changes.pop(name)))
    for name in RESERVE_CONSTANTS:
        if name in changes:
            setattr(mix_models, name, float(changes.pop(name)))
    if changes:
        _use(params_with(changes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="multigpu40")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--out", required=True)
    parser.add_argument("--agents", type=int, help="only the first N openb nodes (short runs)")
    parser.add_argument(
        "--mode", default="replay", help="replay (the direct engine replay) or core"
    )
    parser.add_argument("changes", nargs="*", help="NAME=VALUE")
    args = parser.parse_args()
    apply(args.changes)
    argv = ["simulate", "openb", "--trace", args.trace, "--policy", "dlc", "--mode", args.mode,
            "--seeds", args.seeds, "--out", args.out]  # fmt: skip
    if args.agents:
        argv += ["--agents", str(args.agents)]
    dlc_main(argv)


if __name__ == "__main__":
    main()
