"""Decision time of the multi-tenant policy: a queue of 10,000 jobs over 1,000 agents, 20 groups.

Usage::

    .venv/bin/python bench/quota.py [--jobs 10000] [--agents 1000] [--groups 20]
        [--repeats 5] [--seed 1] [--json bench/results/quota.json] [--quick] [--no-fail]

Measures :func:`dlc.scheduler.tenancy.quotas.plan` (quota admission, borrowing, DRF order across
groups, user limits, preemption planning) alone, and a whole ``SchedulerCore.on_offers``
round (plan + placement per pool) with one offer per agent, on two pools (``dev``: a
fifth of the agents, ``train``: the rest) of 8-GPU agents. Half the agents are busy with
running jobs, so groups borrow and some lenders reclaim. Prints a table, writes JSON.

It has no timing targets, but an instrument that measures nothing is broken: it exits 1
(naming why on stderr; ``--no-fail``: 0) when the plan admits no job or the round launches
none of the admitted jobs. ``--quick``: 1,000 jobs over 100 agents, one repeat (seconds).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from dlc.mesos.codec import MesosCodec  # noqa: E402
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement  # noqa: E402
from dlc.scheduler.jobs.queue import queue_key  # noqa: E402
from dlc.scheduler.tenancy.policy import Group, Policy, Quota, Resources, UserLimits  # noqa: E402
from dlc.scheduler.tenancy.quotas import plan  # noqa: E402


def build(jobs: int, agents: int, groups: int, seed: int):
    """(queue, running, policy, capacity, offers) of a seeded cluster."""
    rng = random.Random(seed)
    pools = {f"a{i}": ("dev" if i < agents // 5 else "train") for i in range(agents)}
    capacity = {
        p: Resources(8 * n, 64 * n, 512 * 1024 * n)
        for p, n in (("dev", agents // 5), ("train", agents - agents // 5))
    }
    names = [f"team-{g:02d}" for g in range(groups)]
    users = {g: [f"{g}-u{u}" for u in range(10)] for g in names}
    group_objs = {g: Group(g, frozenset(users[g]), "train") for g in names}
    quotas = {}
    for pool, cap in capacity.items():
        share = cap.gpus / groups * 0.8  # 80 % guaranteed, 20 % only borrowable
        for g in names:
            quotas[g, pool] = Quota(g, pool, Resources(share, share * 8, share * 65536))
    limits = {u: UserLimits(u, max_running=40) for g in names for u in users[g][:3]}
    policy = Policy(group_objs, quotas, limits)
    sizes = [1, 1, 1, 2, 2, 4, 8]
    running, busy = [], {}
    for i, agent in enumerate(list(pools)[: agents // 2]):
        group = names[i % groups]
        spec = JobSpec.from_dict({"image": "x", "gpus": 8, "pool": pools[agent]})
        task = TaskPlacement(f"r{i}.0.0", agent, agent, tuple(range(8)))
        running.append(Job(f"r{i}", rng.choice(users[group]), spec, JobState.RUNNING,
                           submitted_at=-i, tasks=(task,)))  # fmt: skip
        busy[agent] = True
    queue = []
    for i in range(jobs):
        group = rng.choice(names)
        body = {"image": "x", "gpus": rng.choice(sizes), "priority": rng.choice([-10, 0, 0, 10])}
        if rng.random() < 0.2:
            body["pool"] = "dev"
        queue.append(Job(f"q{i}", rng.choice(users[group]), JobSpec.from_dict(body),
                         submitted_at=float(i)))  # fmt: skip
    queue.sort(key=queue_key)
    offers = [(a, p) for a, p in pools.items() if a not in busy]
    return queue, running, policy, capacity, offers


def offer(agent: str, pool: str) -> dict:
    ids = [str(i) for i in range(8)]
    return {
        "id": {"value": f"o-{agent}"}, "agent_id": {"value": agent}, "hostname": agent,
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 64}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 524288}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 8}},
            {"name": "gpu_ids", "type": "SET", "set": {"item": ids}},
        ],
        "attributes": [{"name": "dlc_pool", "type": "TEXT", "text": {"value": pool}}],
    }  # fmt: skip


class _Store:
    """The least a SchedulerCore needs (no disk: the bench times decisions)."""

    framework_id = "fw"

    def __init__(self, jobs):
        self.jobs = {j.job_id: j for j in jobs}

    def new_job_id(self):
        return f"n{len(self.jobs)}"

    def add_job(self, job):
        self.jobs[job.job_id] = job
        return job

    def save_job(self, job, event=None):
        self.jobs[job.job_id] = job
        return job

    def get_job(self, job_id):
        return self.jobs[job_id]

    def list_jobs(self, user=None, states=None, limit=None, newest_first=False):
        return [j for j in self.jobs.values() if states is None or j.state in states]

    def list_jobs_page(self, user, limit, before=None):
        return []

    def history(self, job_id):
        return []  # the bench's jobs have none: no launch time to restore


def time_round(queue, running, policy, offers) -> tuple[float, int, int]:
    """One on_offers round on a fresh core: (seconds, launches, kills)."""
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.scheduler.placement.model import PlacementConfig

    core = SchedulerCore(_Store([*queue, *running]), CoreConfig(PlacementConfig("first-fit")),
                         lambda s: (s.image, None), codec=MesosCodec())  # fmt: skip
    core.set_tenancy(policy)
    slaves = [{"id": a, "hostname": a, "resources": {"cpus": 64.0, "mem": 524288.0,
               "gpu_ids": "{" + ", ".join(map(str, range(8))) + "}"},
               "attributes": {"dlc_pool": p}} for a, p in offers]  # fmt: skip
    busy = {t.agent_id for j in running for t in j.tasks}
    slaves += [{"id": a, "hostname": a, "resources": {"cpus": 64.0, "mem": 524288.0,
                "gpu_ids": "{" + ", ".join(map(str, range(8))) + "}"},
                "attributes": {"dlc_pool": "dev" if int(a[1:]) < len(busy) * 2 // 5 else "train"}}
               for a in busy]  # fmt: skip
    core.update_agents(slaves)
    batch = [offer(a, p) for a, p in offers]
    started = time.perf_counter()
    actions = core.on_offers(batch)
    seconds = time.perf_counter() - started
    return seconds, sum(len(infos) for _, infos in actions.accepts), len(actions.kills)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", default="bench/results/quota.json")
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, 100 agents, 1 repeat")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a check fails")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.agents, args.repeats = 1000, 100, 1
    logging.disable(logging.WARNING)  # one "no dlc_topo" line per bare agent is not news here
    queue, running, policy, capacity, offers = build(args.jobs, args.agents, args.groups,
                                                     args.seed)  # fmt: skip
    plans = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        out = plan(queue, running, policy, capacity)
        plans.append(time.perf_counter() - started)
    round_s, launches, kills = time_round(queue, running, policy, offers)
    rows = {
        "plan (quota, DRF, limits, preemption)": statistics.median(plans),
        "whole offer round (plan + placement)": round_s,
    }
    table = Table(title=f"{args.jobs} queued jobs, {args.agents} agents, {args.groups} groups")
    for col in ("decision", "median s", "per job µs"):
        table.add_column(col)
    for name, sec in rows.items():
        table.add_row(name, f"{sec:.3f}", f"{sec / args.jobs * 1e6:.1f}")
    Console().print(table)
    held = len(out.held)
    print(f"plan: {len(out.runnable)} admitted, {held} held, {len(out.preemptions)} preemptions;"
          f" round: {launches} launches, {kills} kills")  # fmt: skip
    result = {
        "jobs": args.jobs, "agents": args.agents, "groups": args.groups, "seed": args.seed,
        "plan_s": plans, "plan_median_s": statistics.median(plans), "round_s": round_s,
        "admitted": len(out.runnable), "held": held, "preemptions": len(out.preemptions),
        "launches": launches, "kills": kills,
        "python": platform.python_version(), "machine": platform.machine(),
    }  # fmt: skip
    missed = _missed(len(out.runnable), launches)
    result["missed"] = missed
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    for line in missed:
        print(f"check failed: {line}", file=sys.stderr)
    return 1 if missed and not args.no_fail else 0


def _missed(admitted: int, launches: int) -> list[str]:
    """Why the figures measure nothing: no job admitted, or none of them launched."""
    if not admitted:
        return ["the plan admitted no job: the timings measure an empty decision"]
    if not launches:
        return [f"the round launched none of the {admitted} admitted jobs"]
    return []


if __name__ == "__main__":
    sys.exit(main())
