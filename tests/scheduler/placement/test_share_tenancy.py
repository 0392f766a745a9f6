"""Blast radius bounded by tenancy: shares of two tenants never meet under one MPS daemon.

On an MPS agent every shared GPU holds one tenant's shares (the user's, or the group's when
the jobs ask for --exclusive-per-group); on a fault-isolated backend (``shim``) tenants mix.
The property test places and ends shares in random order over agents of both kinds.
"""

from __future__ import annotations

import random

import pytest

from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.share_placement import ShareTenants, Tenant, mps_tenancy
from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer

GROUPS = {"alice": "vision", "bob": "vision", "carol": "nlp", "dave": "nlp", "erin": "ops"}
AGENTS = {"a1": "mps", "a2": "shim", "a3": "mps"}


def job(job_id: str, user: str, exclusive: str | None = None, mib: int = 4096) -> Job:
    body = {"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpu_memory": f"{mib}M"}
    if exclusive:
        body["exclusive_per"] = exclusive
    return Job(job_id, user, JobSpec.from_dict(body))


def tenant_of(j: Job) -> Tenant:
    return Tenant(j.user, GROUPS[j.user], j.spec.exclusive_per)


def test_a_second_user_is_kept_off_an_mps_gpu_and_joins_on_the_shim():
    held = ShareTenants(group_of=GROUPS.get)
    held.add("a1", 5, Tenant("bob", "vision"))
    held.add("a2", 5, Tenant("bob", "vision"))
    used = {5: (4096, 0)}
    on_mps = place([ranged_offer("o1", "a1", used=used)], [job("j1", "alice")], share_tenants=held)
    assert on_mps.launches[0].share.gpu_index != 5  # packing alone would have chosen GPU 5
    on_shim = place(
        [ranged_offer("o2", "a2", used=used, sharing="shim")], [job("j2", "alice")],
        share_tenants=held,
    )  # fmt: skip
    assert on_shim.launches[0].share.gpu_index == 5
    assert on_shim.launches[0].share.backend == "shim"


def test_one_tenant_still_packs_under_mps_and_group_opt_in_shares_a_daemon():
    held = ShareTenants(group_of=GROUPS.get)
    held.add("a1", 5, Tenant("bob", "vision", "group"))
    held.add("a1", 6, Tenant("alice", "vision"))
    used = {5: (4096, 0), 6: (4096, 0)}
    mine = place([ranged_offer("o1", "a1", used=used)], [job("j1", "alice")], share_tenants=held)
    assert mine.launches[0].share.gpu_index == 6  # her own GPU
    group = place(
        [ranged_offer("o2", "a1", used=used)], [job("j2", "alice", "group")], share_tenants=held
    )
    assert group.launches[0].share.gpu_index == 5  # vision opted in: one tenant


def test_when_every_mps_gpu_is_another_tenants_the_share_waits():
    held = ShareTenants(group_of=GROUPS.get)
    held.add("a1", 0, Tenant("bob", "vision"))
    offer = ranged_offer("o1", "a1", gpus=1, mem_gib=16, used={0: (4096, 0)})
    result = place([offer], [job("j1", "carol")], share_tenants=held)
    assert not result.launches and "may not join" in result.waiting["j1"]


@pytest.mark.parametrize("seed", range(12))
def test_placement_never_puts_two_tenants_under_one_mps_daemon(seed):
    rng = random.Random(seed)
    live: dict[str, tuple[str, int, Job]] = {}  # job id -> (agent, GPU, job)
    for step in range(60):
        if live and rng.random() < 0.3:  # a share ends
            live.pop(rng.choice(sorted(live)))
            continue
        tenants = ShareTenants(group_of=GROUPS.get)
        used: dict[str, dict[int, tuple[int, int]]] = {a: {} for a in AGENTS}
        for agent, gpu, j in live.values():
            tenants.add(agent, gpu, tenant_of(j))
            mib, milli = used[agent].get(gpu, (0, 0))
            used[agent][gpu] = (mib + j.spec.share_memory_mib(32 * 1024), milli)
        offers = [
            ranged_offer(f"o{step}{a}", a, gpus=2, mem_gib=32, used=used[a], sharing=kind)
            for a, kind in AGENTS.items()
        ]
        user = rng.choice(sorted(GROUPS))
        new = job(f"j{step}", user, rng.choice((None, None, "user", "group")),
                  rng.choice((2048, 4096, 8192)))  # fmt: skip
        result = place(offers, [new], share_tenants=tenants)
        for launch in result.launches:
            live[launch.job_id] = (launch.agent_id, launch.share.gpu_index, new)
        by_gpu: dict[tuple[str, int], set] = {}
        for agent, gpu, j in live.values():
            by_gpu.setdefault((agent, gpu), set()).add(mps_tenancy(tenant_of(j)))
        for (agent, gpu), owners in by_gpu.items():
            if AGENTS[agent] == "mps":
                assert len(owners) == 1, f"step {step}: GPU {gpu} of {agent} under MPS: {owners}"
    assert live  # the sequence placed shares
