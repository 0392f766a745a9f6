"""What the share hold (``--share-hold-reserve``) costs one offer round of the real core.

Usage::

    .venv/bin/python bench/share_hold.py [--agents 500] [--offered 50] [--queued 200]
        [--seed 1] [--json bench/results/share_hold.json]

``--agents`` agents (8 x 32 GiB GPUs advertising ``gpu_mem``/``gpu_core`` ranges) are known
to a :class:`~dlc.scheduler.core.facade.SchedulerCore`; a first round of offers from all of them,
with nothing queued, leaves a seeded mix of whole, partly shared and full GPUs in the
inventory (about 30 % whole). Then ``--queued`` jobs (half shares of 0.25 to 0.9 of a GPU,
half whole GPUs) are submitted and ``--offered`` agents offer: the timed round. The same
stream runs with the hold off and at reserve 1 and 1.5; the table shows the round's CPU time and
what it decided. Writes JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.mesos.codec import MesosCodec  # noqa: E402
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore  # noqa: E402
from dlc.scheduler.jobs.job import JobSpec, JobState  # noqa: E402
from dlc.scheduler.placement.model import PlacementConfig  # noqa: E402
from dlc.scheduler.placement.share_hold import HELD_PREFIX, ShareHoldSettings  # noqa: E402
from dlc.store.sqlite import JobStore  # noqa: E402
from dlc.topology import gpu_shares  # noqa: E402
from dlc.topology.gpu_shares import STRIDE  # noqa: E402

GPUS, MIB = 8, 32768
SIZES = (0.25, 0.5, 0.81, 0.9)  # no share fits the 0.19 or 0.1 that 0.81 and 0.9 leave
#: what a queued job asks: the shares above and, half the time, one whole GPU (whole-GPU
#: demand is what the hold keeps whole GPUs for)
ASKS = SIZES + (1,) * len(SIZES)


def master_agent(k: int) -> dict:
    blocks = ",".join(f"{i * STRIDE}-{i * STRIDE + MIB - 1}" for i in range(GPUS))
    cores = ",".join(f"{i * STRIDE}-{i * STRIDE + 999}" for i in range(GPUS))
    return {"id": f"a{k}", "hostname": f"h{k}", "active": True, "attributes": {},
            "resources": {"cpus": 96.0, "mem": 786432.0, "gpus": float(GPUS),
                          "gpu_ids": "{" + ",".join(map(str, range(GPUS))) + "}",
                          "gpu_mem": f"[{blocks}]", "gpu_core": f"[{cores}]"}}  # fmt: skip


def offer(oid: str, k: int, used: dict[int, int]) -> dict:
    """An offer of agent ``k``; ``used``: GPU -> thousandths shares hold (1000: full)."""
    mem, core, free = [], [], []
    for i in range(GPUS):
        milli = used.get(i, 0)
        if milli >= 1000:
            continue
        if not milli:
            free.append(str(i))
        mem.append((i * STRIDE + MIB * milli // 1000, i * STRIDE + MIB - 1))
        core.append((i * STRIDE + milli, i * STRIDE + 999))
    scalar = {"name": "cpus", "type": "SCALAR", "scalar": {"value": 64.0}}
    return {"id": {"value": oid}, "agent_id": {"value": f"a{k}"}, "hostname": f"h{k}",
            "framework_id": {"value": "fw"}, "attributes": [],
            "resources": [scalar, {"name": "mem", "type": "SCALAR", "scalar": {"value": 1e5}},
                          {"name": "gpus", "type": "SCALAR", "scalar": {"value": len(free)}},
                          {"name": "gpu_ids", "type": "SET", "set": {"item": free}},
                          {"name": "ports", "type": "RANGES",
                           "ranges": {"range": [{"begin": 31000, "end": 31999}]}},
                          gpu_shares.ranges_json(gpu_shares.GPU_MEM, tuple(mem)),
                          gpu_shares.ranges_json(gpu_shares.GPU_CORE, tuple(core))]}  # fmt: skip


def one_run(args, hold: ShareHoldSettings, workdir: Path) -> dict:
    rng = random.Random(args.seed)
    usage = [{i: rng.choice((0, 0, 0, 500, 810, 1000, 1000)) for i in range(GPUS)}
             for _ in range(args.agents)]  # fmt: skip
    config = CoreConfig(placement=PlacementConfig("first-fit", share_hold=hold))
    store = JobStore(workdir / f"db-{hold.reserve}")
    core = SchedulerCore(store, config, lambda s: (s.image, None), codec=MesosCodec())
    core.update_agents([master_agent(k) for k in range(args.agents)])
    core.on_offers([offer(f"warm{k}", k, usage[k]) for k in range(args.agents)])
    spec = {"image": "busybox", "cpus": 0.1, "mem_mib": 64}
    queued = [core.submit("u", JobSpec.from_dict({**spec, "gpus": rng.choice(ASKS)}))
              for _ in range(args.queued)]  # fmt: skip
    jobs = [j for j in queued if j.spec.is_share]
    offered = rng.sample(range(args.agents), args.offered)
    started = time.process_time()
    core.on_offers([offer(f"o{k}", k, usage[k]) for k in offered])
    cpu_ms = (time.process_time() - started) * 1000
    # the hold's own per-round part (inventory view, share mix), once more on its own
    started = time.process_time()
    core.share_holds.hold(0.0, list(core.queued_jobs()))
    build_ms = (time.process_time() - started) * 1000 if hold.enabled else 0.0
    placed = sum(core.store.get_job(j.job_id).state != JobState.QUEUED for j in jobs)
    held = sum(HELD_PREFIX in (core.queue_reason(j.job_id) or "") for j in jobs)
    whole = sum(1 for u in usage for v in u.values() if v == 0) / (args.agents * GPUS)
    return {"hold_reserve": hold.reserve, "round_cpu_ms": round(cpu_ms, 1),
            "hold_build_cpu_ms": round(build_ms, 1), "placed": placed,
            "held": held, "whole_fraction_before": round(whole, 3)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--offered", type=int, default=50)
    parser.add_argument("--queued", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default="bench/results/share_hold.json")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the agents have no dlc_topo: one warning each
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for hold in (
            ShareHoldSettings(),
            ShareHoldSettings(reserve=1.0),
            ShareHoldSettings(reserve=1.5),
        ):
            rows.append(one_run(args, hold, Path(tmp)))
    print(f"{args.agents} agents x {GPUS} GPUs, {args.offered} offered, {args.queued} jobs "
          f"queued (about half shares), seed {args.seed}")  # fmt: skip
    print("| hold reserve | round CPU ms | hold build CPU ms | shares placed | shares held | "
          "whole GPUs before |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['hold_reserve']:g} | {r['round_cpu_ms']} | {r['hold_build_cpu_ms']} | "
              f"{r['placed']} | {r['held']} | "
              f"{r['whole_fraction_before']:.0%} |")  # fmt: skip
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.node(), "python": platform.python_version(), **vars(args)}
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
