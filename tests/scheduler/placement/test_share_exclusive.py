"""Exclusive share placement (``--exclusive-per-user``/``--exclusive-per-group``): a GPU is
shared only within one user or group, in the pure placement and through the core."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.errors import JobSpecError
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.share_placement import ShareTenants, Tenant, may_share
from tests.scheduler.helpers import place
from tests.scheduler.placement.test_share_placement import ranged_offer

GROUPS = {"alice": "vision", "bob": "vision", "carol": "nlp"}


def tenants(held: dict[int, list[tuple[str, str | None]]], agent: str = "a1") -> ShareTenants:
    """GPU -> [(user, exclusive)] of the shares on ``agent``."""
    out = ShareTenants(group_of=GROUPS.get)
    for gpu, users in held.items():
        for user, exclusive in users:
            out.add(agent, gpu, Tenant(user, GROUPS.get(user, user), exclusive))
    return out


def job(job_id: str, user: str, exclusive: str | None = None, **ask) -> Job:
    body = {"image": "busybox", "cpus": 0.1, "mem_mib": 64, **(ask or {"gpu_memory": "4G"})}
    if exclusive:
        body["exclusive_per"] = exclusive
    return Job(job_id, user, JobSpec.from_dict(body))


def used(held: dict) -> dict[int, tuple[int, int]]:
    """Each listed GPU holds 4 GiB per share already."""
    return {gpu: (4096 * len(users), 0) for gpu, users in held.items()}


# held shares (GPU -> [(user, exclusive)]), the new job (user, exclusive) -> the GPU it gets
# (None: it waits). Shares pack onto shared GPUs, so without exclusivity a share goes to the
# shared GPU 5; the cases show where exclusivity sends it instead.
TABLE = {
    "plain share packs onto bob's plain share": ({5: [("bob", None)]}, ("alice", None), 5),
    "exclusive alice avoids bob's GPU, takes a whole one": (
        {5: [("bob", None)]}, ("alice", "user"), "whole"),
    "exclusive alice packs onto her own share": (
        {5: [("bob", None)], 6: [("alice", None)]}, ("alice", "user"), 6),
    "plain alice kept off bob's exclusive GPU": ({5: [("bob", "user")]}, ("alice", None), "whole"),
    "plain bob joins his own exclusive GPU": ({5: [("bob", "user")]}, ("bob", None), 5),
    "group: alice joins bob's group-exclusive GPU (both vision)": (
        {5: [("bob", "group")]}, ("alice", None), 5),
    "group: carol (nlp) is kept off it": ({5: [("bob", "group")]}, ("carol", None), "whole"),
    "group-exclusive alice joins vision's shares only": (
        {5: [("carol", None)], 6: [("bob", None)]}, ("alice", "group"), 6),
    "user-exclusive alice does not join bob although same group": (
        {5: [("bob", None)], 6: [("alice", None)]}, ("alice", "user"), 6),
}  # fmt: skip


@pytest.mark.parametrize("held, new, want", TABLE.values(), ids=TABLE.keys())
def test_exclusive_placement_table(held, new, want):
    # a fault-isolated backend: under MPS every GPU is single-tenant anyway (test_share_tenancy)
    result = place(
        [ranged_offer("o1", "a1", used=used(held), sharing="watchdog")], [job("j1", *new)],
        share_tenants=tenants(held),
    )  # fmt: skip
    (launch,) = result.launches
    if want == "whole":
        assert launch.share.gpu_index not in held  # a GPU nobody shares yet
    else:
        assert launch.share.gpu_index == want


def test_a_share_kept_off_every_gpu_with_room_waits_with_a_reason():
    # one 16 GiB GPU per agent, half held by bob's exclusive share: alice's 4 GiB would fit
    held = {0: [("bob", "user")]}
    offer = ranged_offer("o1", "a1", gpus=1, mem_gib=16, used=used(held))
    result = place([offer], [job("j1", "alice")], share_tenants=tenants(held))
    assert not result.launches
    reason = result.waiting["j1"]
    assert reason.startswith("no GPU has a share of 4 GiB left"), reason
    assert "1 GPU(s) with room hold shares it may not join (exclusive per user or group)" in reason


def test_a_round_sees_its_own_exclusive_shares():
    # alice's exclusive share and then carol's plain one in the same round: never one GPU
    result = place(
        [ranged_offer("o1", "a1", gpus=2)],
        [job("j1", "alice", "user"), job("j2", "carol")],
        share_tenants=tenants({}),
    )  # fmt: skip
    gpus = [launch.share.gpu_index for launch in result.launches]
    assert len(gpus) == 2 and gpus[0] != gpus[1]


def test_may_share_is_symmetric():
    users = [Tenant(u, GROUPS[u], x) for u in GROUPS for x in (None, "user", "group")]
    for a in users:
        for b in users:
            assert may_share(a, b) == may_share(b, a)


BAD = {
    "unknown scope": ({"gpu_memory": "4G", "exclusive_per": "team"}, "must be user or group"),
    "whole GPUs": ({"gpus": 2, "exclusive_per": "user"}, "only a GPU share can be exclusive"),
}


@pytest.mark.parametrize("body, message", BAD.values(), ids=BAD.keys())
def test_bad_exclusive_asks_get_one_line(body, message):
    with pytest.raises(JobSpecError, match=message) as err:
        JobSpec.from_dict({"image": "busybox", **body})
    assert err.value.field == "exclusive_per" and "\n" not in str(err.value)


def test_the_submit_flags_set_the_field(monkeypatch):
    from dlc.cli import submit_cmd
    from dlc.cli.main import cli

    sent = []

    class Client:
        def __init__(self, *args):
            pass

        def submit(self, body):
            sent.append(body)
            return {"id": "j1"}

    monkeypatch.setattr(submit_cmd, "ApiClient", Client)
    for flag, scope in (("--exclusive-per-user", "user"), ("--exclusive-per-group", "group")):
        args = ["submit", "--image", "busybox", "--gpu-memory", "4G", flag, "--", "true"]
        result = CliRunner().invoke(cli, args, env={"DLC_API": "http://x", "DLC_TOKEN": "t"})
        assert result.exit_code == 0, result.output
        assert sent[-1]["exclusive_per"] == scope
    args = ["submit", "--image", "busybox", "--gpus", "2", "--exclusive-per-user", "--", "true"]
    result = CliRunner().invoke(cli, args, env={"DLC_API": "http://x", "DLC_TOKEN": "t"})
    assert result.exit_code != 0 and "only a GPU share can be exclusive" in result.output


def test_the_core_keeps_other_users_off_a_gpu_an_exclusive_share_runs_on(tmp_path):
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.scheduler.placement.model import PlacementConfig
    from dlc.store.sqlite import JobStore
    from dlc.topology.gpu_shares import STRIDE

    core = SchedulerCore(
        JobStore(tmp_path / "db"), CoreConfig(placement=PlacementConfig("first-fit")),
        lambda s: (s.image, None),
    )  # fmt: skip
    mem = ",".join(f"{i * STRIDE}-{i * STRIDE + 32767}" for i in range(8))
    core.update_agents([{
        "id": "a1", "hostname": "host-a1", "active": True, "attributes": {},
        "resources": {"cpus": 64.0, "mem": 262144.0, "gpus": 8.0, "gpu_ids": "{0,1,2,3,4,5,6,7}",
                      "gpu_mem": f"[{mem}]",
                      "gpu_core": "[" + ",".join(f"{i * STRIDE}-{i * STRIDE + 999}"
                                                 for i in range(8)) + "]"},
    }])  # fmt: skip
    spec = {"image": "busybox", "cpus": 0.1, "mem_mib": 64, "gpu_memory": "4G"}
    bob = core.submit("bob", JobSpec.from_dict({**spec, "exclusive_per": "user"}))
    core.on_offers([ranged_offer("o1", "a1")])
    (task,) = core.store.get_job(bob.job_id).tasks
    held = {task.share_gpu: [("bob", "user")]}
    alice = core.submit("alice", JobSpec.from_dict(spec))
    core.on_offers([ranged_offer("o2", "a1", used=used(held))])
    (other,) = core.store.get_job(alice.job_id).tasks
    assert other.share_gpu != task.share_gpu  # packing alone would have put it there


@pytest.mark.parametrize(
    "cpus, mem, short",
    [(0.5, 65536, "not enough cpus beside"), (16, 1024, "not enough memory beside"),
     (0.5, 1024, "not enough cpus and memory beside")],
)  # fmt: skip
def test_a_share_short_of_cpus_or_memory_is_told_so_not_gpu_memory(cpus, mem, short):
    # 8 x 32 GiB GPUs, all free: the 4 GiB share waits for the agent's CPUs or memory
    body = ranged_offer("o1", "a1")
    for res in body["resources"]:
        if res["name"] in ("cpus", "mem"):
            res["scalar"]["value"] = cpus if res["name"] == "cpus" else mem
    share = Job("j1", "alice", JobSpec.from_dict({"image": "b", "cpus": 1, "mem_mib": 2048,
                                                   "gpu_memory": "4G"}))  # fmt: skip
    result = place([body], [share])
    assert not result.launches
    reason = result.waiting["j1"]
    assert reason.startswith(short) and "GPU has a share" not in reason, reason
    assert f"the most an agent with shares free has is {cpus:g} cpus/{mem:g} MiB" in reason
