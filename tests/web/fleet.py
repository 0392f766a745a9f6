"""A simulated fleet for the dashboard at scale: 100 agents, whole jobs, shares, a 2x8 job,
a queue of 50, behind the real API server (used by the browser test and bench/dashboard.py).

Agents are built from the real ``nvidia-smi topo -m`` fixtures in
``/work/shared/fixtures/topology/`` (8-GPU machines) and, for the 16-GPU agents, from the
DGX-2 fixture: it is cut after GPU4's row, so its NV6-through-NVSwitch links (the header and
the rows present) are carried to all 16 GPUs. Each agent offers through the real
:class:`~dlc.scheduler.core.facade.SchedulerCore`, which places the jobs; tasks are then reported
running. GPU utilisation is a fake NVML reading (deterministic per GPU) put into the
snapshot's ``used``/``usage`` fields, as the executor's sampling would.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from dlc.api.logs import LogReader
from dlc.api.metrics import SchedulerMetrics
from dlc.api.server import ApiServer
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from dlc.topology import gpu_shares
from dlc.topology.model import PairLink, PcieLevel, Topology
from dlc.topology.node_config import agent_attributes, gpu_memories
from dlc.topology.parse_topo import load_topology_text
from dlc.web.dashboard import Dashboard
from tests.scheduler.helpers import offer

FIXTURES = Path("/work/shared/fixtures/topology")
#: (fixture, GPU model, MiB per GPU, sharing backend)
EIGHT = [
    ("dgx1-v100_nv1-nv2_mlx5_oneflow.txt", "Tesla V100-SXM2-16GB", 16384, "mps"),
    ("hgx-h100_nv18_gpu-numa-id_thunderkittens.txt", "NVIDIA H100 80GB HBM3", 81559, "mps"),
    ("pcie-8gpu_nv12-bridge-pairs_non-adjacent_all-sys_tabs_k8s-dp-546.txt",
     "NVIDIA A100-PCIE-40GB", 40960, "watchdog"),
    ("rtx4090-8gpu_all-sys_2nic_gpu-numa-id_tabs.txt", "NVIDIA GeForce RTX 4090", 24564, "none"),
]  # fmt: skip
SIXTEEN = ("dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt", "Tesla V100-SXM3-32GB", 32768, "mps")
POOLS = ("default", "research", "prod")
USERS = ("alice", "bob", "carol", "dave", "erin")


@dataclass
class Fleet:
    """A running API server with the simulated fleet behind it."""

    api: ApiServer
    dashboard: Dashboard
    store: JobStore
    admin_token: str
    agents: list[dict]  # {id, hostname, model, pool, gpus}
    two_by_eight: str  # the 2x8 job's id
    queued: list[str]  # queued job ids, in submit order

    @property
    def url(self) -> str:
        return self.api.url

    def stop(self) -> None:
        self.api.stop()
        self.dashboard.stop()
        self.store.close()


def _with_model(topo: Topology, model: str, mib: int) -> Topology:
    return replace(topo, gpus=tuple(replace(g, model=model, memory_mib=mib) for g in topo.gpus))


def dgx2() -> Topology:
    """The DGX-2 fixture completed to its 16 GPUs (every pair NV6 through the NVSwitches)."""
    cut = load_topology_text((FIXTURES / SIXTEEN[0]).read_text(), allow_truncated=True)
    first = cut.gpus[0]
    gpus = tuple(replace(first, index=i, cpu_affinity=cut.gpus[min(i, 4)].cpu_affinity)
                 for i in range(16))  # fmt: skip
    links = {(a, b): PairLink(a, b, PcieLevel.SYS, 6) for a in range(16) for b in range(a + 1, 16)}
    return Topology(gpus, links, source="topo-m")


def machine_types() -> list[tuple[Topology, str]]:
    """(topology with model and memory, sharing backend) of each machine type, 16-GPU last."""
    out = []
    for name, model, mib, sharing in EIGHT:
        topo = load_topology_text((FIXTURES / name).read_text())
        out.append((_with_model(topo, model, mib), sharing))
    out.append((_with_model(dgx2(), SIXTEEN[1], SIXTEEN[2]), SIXTEEN[3]))
    return out


def agent_offer(k: int, topo: Topology, sharing: str, pool: str) -> dict:
    """Agent ``k``'s offer: its GPUs, gpu_mem/gpu_core blocks and node-config attributes."""
    attrs = {**agent_attributes(topo, sharing), "dlc_pool": pool}
    body = offer(f"o{k}", f"agent-{k:03d}", list(topo.gpu_indices), cpus=128,
                 mem=1024 * 1024, attrs=attrs)  # fmt: skip
    memories = gpu_memories(topo) or {}
    body["hostname"] = f"gpu-node-{k:03d}"
    body["resources"] += [
        gpu_shares.ranges_json(gpu_shares.GPU_MEM, gpu_shares.mem_ranges(memories)),
        gpu_shares.ranges_json(gpu_shares.GPU_CORE, gpu_shares.core_ranges(memories)),
    ]
    return body


def fake_reading(key: str) -> int | None:
    """A GPU's utilisation, fixed per key: mostly busy, one in six idle, one in ten unsampled."""
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    if h % 10 == 0:
        return None
    if h % 6 == 0:
        return h % 4  # allocated but idle (< 5 %)
    return 40 + h % 60


def with_usage(snapshot: dict) -> dict:
    """Fill the snapshot's ``used`` (per allocated GPU) and ``usage`` (per running job)."""
    at = snapshot["now"] - 3.0
    per_job: dict[str, list[int]] = {}
    # a whole GPU reads as its job (by name) reads: which jobs are idle or unsampled must not
    # depend on where placement put them (a better placement once left no job idle)
    names = {j["id"]: j.get("name") or j["id"] for j in snapshot["jobs"]}
    for agent in snapshot["agents"]:
        for gpu in agent["gpus"]:
            jobs = [gpu["holder"]] if gpu["holder"] else gpu["shares"]
            if not jobs:
                continue
            holder = gpu["holder"] and gpu["holder"].get("job")
            key = f"job/{names.get(holder, holder)}" if holder else f"{agent['id']}/{gpu['index']}"
            util = fake_reading(key)
            if util is None:
                continue
            total = gpu["memory_mib"] or 16384
            gpu["used"] = {"util_pct": util, "mem_used_mib": total * util // 120,
                           "mem_total_mib": total, "sampled_at": at}  # fmt: skip
            for holder in jobs:
                if holder["job"]:
                    per_job.setdefault(holder["job"], []).append(util)
    for job in snapshot["jobs"]:
        utils = per_job.get(job["id"])
        if utils and job["state"] == "running":
            job["usage"] = {"util_pct": round(sum(utils) / len(utils), 1),
                            "mem_used_mib": 1024 * len(utils), "sampled_at": at}  # fmt: skip
    return snapshot


def _status(task_id: str, agent_id: str) -> dict:
    return {"task_id": {"value": task_id}, "state": "TASK_RUNNING", "agent_id": {"value": agent_id}}


def build_fleet(work: Path, agents: int = 100, queue: int = 50) -> Fleet:
    """Start the API server with ``agents`` simulated agents (every fourth has 16 GPUs),
    about two thirds of the GPUs held (whole jobs, a 2x8 job, shares) and ``queue`` jobs
    waiting with mixed priorities."""
    store = JobStore(work / "db")
    metrics = SchedulerMetrics()
    # one offer round builds the whole fleet (the offers are not re-made between rounds), so
    # it considers every queued job: the round cap (32 by default) would leave the shares out
    config = CoreConfig(placement=PlacementConfig("tree"), max_jobs_per_round=None)
    core = SchedulerCore(store, config, lambda spec: (spec.image or "img", "12.1"),
                         metrics=metrics)  # fmt: skip
    types = machine_types()
    offers, described = [], []
    for k in range(agents):
        # every fourth agent has 16 GPUs; the 8-GPU machine types take turns in between
        topo, sharing = types[-1] if k % 4 == 3 else types[(k - k // 4) % (len(types) - 1)]
        pool = POOLS[k % len(POOLS)]
        offers.append(agent_offer(k, topo, sharing, pool))
        described.append({"id": f"agent-{k:03d}", "hostname": f"gpu-node-{k:03d}",
                          "model": topo.gpus[0].model, "pool": pool,
                          "gpus": len(topo.gpus)})  # fmt: skip

    def submit(user: str, **spec) -> str:
        body = {"image": "img", "cpus": 1, "mem_mib": 1024, "command": ["sleep", "1"], **spec}
        return core.submit(user, JobSpec.from_dict(body), max_priority=10).job_id

    two_by_eight = submit("alice", name="allreduce-2x8", gpus=8, nodes=2)
    for k in range(150):
        size = (1, 2, 4, 8)[k % 4]
        submit(USERS[k % len(USERS)], name=f"train-{k}", gpus=size)
    for k in range(40):
        share = {"gpu_memory": "4G"} if k % 2 else {"gpus": 0.25}
        submit(USERS[k % len(USERS)], name=f"notebook-{k}", **share)
    decision = core.on_offers(offers)
    for _, infos in decision.accepts:
        for info in infos:
            core.on_status(_status(info["task_id"]["value"], info["agent_id"]["value"]))
    queued = [
        submit(USERS[k % len(USERS)], name=f"queued-{k}", gpus=16 if k % 5 == 0 else 8,
               priority=(k * 37) % 11 - 5)
        for k in range(queue)
    ]  # fmt: skip
    dash = Dashboard(core, metrics, lambda: {"version": "fleet"})
    plain = dash.snapshot
    dash.snapshot = lambda user, admin: with_usage(plain(user, admin))  # type: ignore[method-assign]
    sandboxes = work / "agents"
    for job in core.active_jobs():  # each task's sandbox as the agents keep them
        for task in job.tasks:
            run = (
                sandboxes / "frameworks" / "fleet" / "executors" / task.executor_id / "runs" / "r1"
            )
            run.mkdir(parents=True)
            (run / "stdout").write_text(f"{job.spec.name}: epoch 1 of 90\n")
            (run / "stderr").write_text("")
    logs = LogReader(lambda: "fleet", sandbox_roots=[sandboxes])
    api = ApiServer(core, logs, lambda actions: None, web=dash)
    api.leadership = lambda: {"instance": "single", "leading": True}  # as dlc scheduler
    api.start()
    admin = store.add_token("admin", True)
    return Fleet(api, dash, store, admin, described, two_by_eight, queued)
