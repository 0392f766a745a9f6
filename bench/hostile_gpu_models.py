"""Hostile-queue benchmark: one user's queued jobs, each allowing many distinct GPU models.

Red-team finding 47 (docs/security.md): a restricted shape of the fragmentation mix matched
each part of its ``gpu_model`` against every agent model afresh whenever the core adopted a
new mix, and ten kills and submits a round drift a 1,000-job mix past its threshold. This
drives :class:`~dlc.scheduler.core.facade.SchedulerCore` (in-memory store) with ``--agents``
8-GPU agents of ten models, ``--jobs`` one-GPU jobs of one user whose ``gpu_model`` is
``T4`` (so submit finds an agent) and ``--parts - 1`` distinct two-letter names, and per
round kills ten of them, submits ten new ones and one plain job, then times
:meth:`on_offers` (wall clock; the machine's other load shows in it). ``--parts 0``: the
jobs name no model but distinct ``cpus`` (the older hostile queue, for comparison)::

    .venv/bin/python bench/hostile_gpu_models.py --parts 16
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import string
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import dlc  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))

from dlc.mesos.codec import MesosCodec  # noqa: E402
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore  # noqa: E402
from dlc.scheduler.jobs.job import JobSpec  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.store.memory import MemoryJobStore  # noqa: E402

MODELS = ["Tesla_V100-SXM2-16GB", "Tesla_V100-SXM2-32GB", "A100-SXM4-80GB", "Tesla_T4",
          "Tesla_P100-PCIE", "A10", "G2", "H100", "K80", "MI250X"]  # fmt: skip
PAIRS = ["".join(p) for p in itertools.product(string.ascii_uppercase + string.digits, repeat=2)]


def _offer(oid: str, agent: str, model: str) -> dict[str, Any]:
    scalar = [("cpus", 64.0), ("mem", 512000.0), ("gpus", 8.0)]
    resources: list[dict[str, Any]] = [
        {"name": n, "type": "SCALAR", "scalar": {"value": v}, "role": "*"} for n, v in scalar
    ]
    items = [str(i) for i in range(8)]
    resources.append({"name": "gpu_ids", "type": "SET", "set": {"item": items}, "role": "*"})
    return {
        "id": {"value": oid}, "agent_id": {"value": agent}, "framework_id": {"value": "fw"},
        "hostname": f"host-{agent}", "resources": resources,
        "attributes": [{"name": "gpu_model", "type": "TEXT", "text": {"value": model}}],
    }  # fmt: skip


def _spec(j: int, parts: int) -> JobSpec:
    if parts:
        names = ["T4"] + [PAIRS[(j * 7 + k) % len(PAIRS)] for k in range(parts - 1)]
        extra: dict[str, Any] = {"gpu_model": "|".join(names), "cpus": 1}
    else:
        extra = {"cpus": 1 + j / 1000}
    return JobSpec.from_dict({"image": "img", "gpus": 1, **extra})


def main() -> int:
    """Run the rounds and print each one's time and the median."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--agents", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    core = SchedulerCore(
        MemoryJobStore(), CoreConfig(placement=PlacementConfig("tree")),
        lambda s: (s.image or "img", None), codec=MesosCodec(),
    )  # fmt: skip

    def offers(r: int) -> list[dict[str, Any]]:
        return [_offer(f"o{r}-{a}", f"a{a}", MODELS[a % 10]) for a in range(args.agents)]

    core.on_offers(offers(-1))  # the agents' models, for submit's check
    jobs = [core.submit("mallory", _spec(j, args.parts)) for j in range(args.jobs)]
    times = []
    for r in range(args.rounds):
        for job in jobs[:10]:
            core.kill(job.job_id, "mallory")
        fresh = [
            core.submit("mallory", _spec(args.jobs + 10 * r + k, args.parts)) for k in range(10)
        ]
        jobs = jobs[10:] + fresh
        core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1, "cpus": 1}))
        start = time.perf_counter()
        core.on_offers(offers(r))
        times.append(time.perf_counter() - start)
        print(f"round {r}: {times[-1]:.3f} s")
    print(f"median {statistics.median(times):.3f} s (parts {args.parts}, jobs {args.jobs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
